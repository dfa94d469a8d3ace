"""Derive pydantic v2 models from a shape (for a msgspec Struct or `.proto` source).

Derived models are strict like `schemas.builtin.pydantic_forms` (frozen when the
source's objects are), and forbid unknown fields when the source does. Aliases are the wire keys (`Field(alias=...)`).
One exception keeps the two-pass codecs (`model_validate(json.loads(data))`)
working: values that JSON can only carry as a string or a number of another kind
(datetimes, base64 bytes, UUIDs, Decimals, enum values, int map keys) are validated
leniently (`Strict(False)`) so that Python-mode validation accepts them as
`json.loads` returns them; everything JSON types natively stays strict.
"""

from __future__ import annotations

import warnings
from types import GenericAlias
from typing import Annotated, Any, Final, ForwardRef, Literal, Union

import pydantic
from pydantic import BaseModel, ConfigDict, Field, Strict

from schemas.derive.msgspec_structs import DERIVED_MODULE, PYTHON_TYPES
from schemas.formats import Refusals
from schemas.shape import (
    Choice,
    FieldShape,
    Foreign,
    ListOf,
    MapOf,
    MessageShape,
    Scalar,
    TupleOf,
    TypeShape,
    UnionOf,
    messages,
)

_LENIENT: Final = Strict(False)
_CONTAINERS: Final[dict[str, type]] = {"list": list, "set": set, "frozenset": frozenset}


def build_models(root: MessageShape) -> type[BaseModel]:
    """The model for `root`, built after the models it nests.

    Each model forbids unknown fields when its message shape does.

    Raises:
        ConfigError: when a field name collides with a `BaseModel` attribute.
    """
    refusals = Refusals()
    built: dict[int, type[BaseModel]] = {}
    ahead: list[type[BaseModel]] = []
    for msg in messages(root):
        config = ConfigDict(
            strict=True,
            extra="forbid" if msg.forbid_unknown else "ignore",
            frozen=msg.frozen,
            protected_namespaces=(),
            allow_inf_nan=False,  # JSON has no NaN or Infinity; 1e999 overflows
        )
        fields: dict[str, Any] = {f.name: _field(f, built) for f in msg.fields}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                model = pydantic.create_model(
                    msg.name, __config__=config, __module__=DERIVED_MODULE, **fields
                )
            except (NameError, TypeError, pydantic.PydanticUserError) as exc:
                refusals.add(msg.name, f"no pydantic model can hold it ({exc})")
                refusals.raise_any()
        for warning in caught:
            refusals.add(msg.name, f"pydantic: {warning.message}")
        refusals.raise_any()
        built[id(msg)] = model
        if not model.__pydantic_complete__:  # names a message built after it
            ahead.append(model)
    names = {m.__name__: m for m in built.values()}
    for waiting in ahead:  # a message that holds itself: resolved once all are built
        waiting.model_rebuild(_types_namespace=names)
    return built[id(root)]


def _field(f: FieldShape, built: dict[int, type[BaseModel]]) -> tuple[Any, Any]:
    annotation = annotation_of(f.type, built)
    if f.nullable:
        annotation = Union.__getitem__((annotation, None))
    if f.default_factory is not None:
        return annotation, Field(default_factory=f.default_factory, alias=f.alias)
    default = ... if f.required else f.default
    return annotation, (Field(default, alias=f.alias) if f.alias else default)


def annotation_of(shape: TypeShape, built: dict[int, type[BaseModel]]) -> Any:
    """The pydantic annotation of a shape (nested models from `built`, by id)."""
    if isinstance(shape, MessageShape):  # its name: not built yet (holds itself)
        return built.get(id(shape), ForwardRef(shape.name))
    if isinstance(shape, Choice):
        if shape.enum is None:
            return Literal.__getitem__(shape.values)
        return Annotated[shape.enum, _LENIENT]
    if isinstance(shape, Foreign):
        return shape.annotation
    if isinstance(shape, TupleOf):
        items = tuple(annotation_of(s, built) for s in shape.items)
        return GenericAlias(tuple, items)
    if isinstance(shape, UnionOf):
        members = [annotation_of(s, built) for s in shape.members]
        return Union.__getitem__((*members, *([None] if shape.nullable else [])))
    if isinstance(shape, ListOf):
        item = annotation_of(shape.item, built)
        if shape.container == "tuple":
            base: Any = GenericAlias(tuple, (item, ...))
        else:
            base = GenericAlias(_CONTAINERS[shape.container], (item,))
    elif isinstance(shape, MapOf):
        key = annotation_of(shape.key, built)
        if isinstance(shape.key, Scalar) and shape.key.kind == "int":
            key = Annotated[key, _LENIENT]
        base = GenericAlias(dict, (key, annotation_of(shape.value, built)))
    else:
        base = _scalar(shape)
    bounds = {k: v for k, v in shape.constraints.items().items() if k != "tz"}
    return Annotated[base, Field(**bounds)] if bounds else base


def _scalar(shape: Scalar) -> Any:
    if shape.kind == "bytes":
        return Annotated[pydantic.Base64Bytes, _LENIENT]
    if shape.kind == "datetime":
        base = (
            pydantic.AwareDatetime if shape.constraints.tz else PYTHON_TYPES["datetime"]
        )
        return Annotated[base, _LENIENT]
    if shape.kind in ("uuid", "decimal", "date", "time", "timedelta"):
        return Annotated[PYTHON_TYPES[shape.kind], _LENIENT]
    return PYTHON_TYPES[shape.kind]
