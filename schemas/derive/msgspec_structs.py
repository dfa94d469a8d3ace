"""Derive msgspec Structs from a shape, with the built-in Structs' options.

Like `schemas.builtin.structs`: `frozen`, `kw_only` and `gc=False` (a decoded message is a
tree of values that cannot form a reference cycle). Unknown fields are rejected
when the source rejects them (pydantic's `extra="forbid"`) and ignored otherwise,
as pydantic's default `extra="ignore"` does. Aliases are the wire keys (`rename`).
msgspec is strict: "42" is not an int. Bounds msgspec cannot check (on a Decimal,
an int bound past int64, `max_digits`, `decimal_places`) are left out of `Meta`:
`msgspec_bounds` says which, and `codec-schema check` reports them.
"""

from __future__ import annotations

import datetime
import decimal
import uuid
from types import GenericAlias
from typing import Annotated, Any, Final, Literal

import msgspec

from schemas.shape import (
    Choice,
    Constraints,
    FieldShape,
    ListOf,
    MapOf,
    MessageShape,
    Scalar,
    TypeShape,
    messages,
)

DERIVED_MODULE: Final = "schemas.derived"
"""The `__module__` of every derived class (they live in no importable module)."""

PYTHON_TYPES: Final[dict[str, type]] = {
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "bytes": bytes,
    "datetime": datetime.datetime,
    "uuid": uuid.UUID,
    "decimal": decimal.Decimal,
}

_INT64: Final = (-(2**63), 2**63 - 1)
_NUMERIC: Final = frozenset({"gt", "ge", "lt", "le", "multiple_of"})
_NEVER: Final = frozenset({"max_digits", "decimal_places"})


def build_structs(root: MessageShape) -> type[msgspec.Struct]:
    """The Struct for `root`, built after the Structs it nests."""
    built: dict[int, type[msgspec.Struct]] = {}
    for msg in messages(root):
        rename = {f.name: f.alias for f in msg.fields if f.alias}
        built[id(msg)] = msgspec.defstruct(
            msg.name,
            [_field(f, built) for f in msg.fields],
            module=DERIVED_MODULE,
            frozen=True,
            kw_only=True,
            forbid_unknown_fields=msg.forbid_unknown,
            gc=False,
            rename=rename or None,
        )
    return built[id(root)]


def _field(
    f: FieldShape, built: dict[int, type[msgspec.Struct]]
) -> tuple[str, Any] | tuple[str, Any, Any]:
    annotation = _annotation(f.type, built)
    if f.nullable:
        annotation = annotation | None
    if f.default_factory is not None:
        return f.name, annotation, msgspec.field(default_factory=f.default_factory)
    if not f.required:
        return f.name, annotation, f.default
    return f.name, annotation


def _annotation(shape: TypeShape, built: dict[int, type[msgspec.Struct]]) -> Any:
    if isinstance(shape, MessageShape):
        return built[id(shape)]
    if isinstance(shape, Choice):
        return shape.enum or Literal.__getitem__(shape.values)
    if isinstance(shape, ListOf):
        base: Any = GenericAlias(list, (_annotation(shape.item, built),))
    elif isinstance(shape, MapOf):
        key, value = _annotation(shape.key, built), _annotation(shape.value, built)
        base = GenericAlias(dict, (key, value))
    else:
        base = PYTHON_TYPES[shape.kind]
    kind = shape.kind if isinstance(shape, Scalar) else ""
    bounds, _ = msgspec_bounds(shape.constraints, kind)
    return Annotated[base, msgspec.Meta(**bounds)] if bounds else base


def msgspec_bounds(
    constraints: Constraints, kind: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The bounds `msgspec.Meta` checks, and those it cannot (left out).

    Args:
        constraints: the field's bounds.
        kind: the scalar kind ("" for a list or map).
    """
    kept: dict[str, Any] = {}
    skipped: dict[str, Any] = {}
    for key, value in constraints.items().items():
        if key in _NEVER or (key in _NUMERIC and kind == "decimal"):
            skipped[key] = value
        elif kind == "int" and key in _NUMERIC and not _INT64[0] <= value <= _INT64[1]:
            # msgspec checks int bounds within int64 only; its ints stop at uint64.
            skipped[key] = value
        else:
            kept[key] = value
    return kept, skipped
