"""Derive msgspec Structs from a shape, with the built-in Structs' options.

Like `schemas.models`: `frozen`, `kw_only`, `forbid_unknown_fields` (a typo in a
producer's field name fails loudly) and `gc=False` (a decoded message is a tree of
values that cannot form a reference cycle). msgspec is strict: "42" is not an int.
"""

from __future__ import annotations

import datetime
from types import GenericAlias
from typing import Annotated, Any, Final, Literal

import msgspec

from schemas.shape import (
    Choice,
    FieldShape,
    ListOf,
    MapOf,
    MessageShape,
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
}


def build_structs(root: MessageShape) -> type[msgspec.Struct]:
    """The Struct for `root`, built after the Structs it nests."""
    built: dict[int, type[msgspec.Struct]] = {}
    for msg in messages(root):
        built[id(msg)] = msgspec.defstruct(
            msg.name,
            [_field(f, built) for f in msg.fields],
            module=DERIVED_MODULE,
            frozen=True,
            kw_only=True,
            forbid_unknown_fields=True,
            gc=False,
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
    bounds = shape.constraints.items()
    return Annotated[base, msgspec.Meta(**bounds)] if bounds else base
