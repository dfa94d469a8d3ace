"""Derived msgspec Structs and pydantic models as Python source a user can commit.

The text defines the same classes `schemas.user.loader` builds at run time, with the
same options and annotations (a unit test executes it and compares), nested classes
first so that no annotation is a forward reference.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import json
import re
import uuid
from collections.abc import Callable
from typing import Any, Final, Literal

from schemas.derive.msgspec_structs import msgspec_bounds
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
from schemas.user.loader import UserSchema

Flavor = Literal["msgspec", "pydantic"]

_BASES: Final[dict[str, str]] = {
    "str": "str",
    "int": "int",
    "float": "float",
    "bool": "bool",
    "bytes": "bytes",
    "datetime": "datetime.datetime",
    "uuid": "uuid.UUID",
    "decimal": "decimal.Decimal",
    "date": "datetime.date",
    "time": "datetime.time",
    "timedelta": "datetime.timedelta",
}
_HEADER: Final = '"""{what} derived by codec-schema from {spec}."""\n'
_STRUCT_OPTIONS: Final = "frozen=True, kw_only=True, forbid_unknown_fields={}, gc=False"
_MODULES: Final = ("datetime", "decimal", "enum", "uuid")


def annotation_text(shape: TypeShape, flavor: Flavor) -> str:
    """A shape's annotation as the derived source writes it."""
    if isinstance(shape, MessageShape):
        return shape.name
    if isinstance(shape, Choice):
        if shape.enum is None:
            return "Literal[" + ", ".join(_literal(v) for v in shape.values) + "]"
        name = shape.enum.__qualname__
        return f"Annotated[{name}, Strict(False)]" if flavor == "pydantic" else name
    if isinstance(shape, Foreign):  # msgspec has no such type (refused)
        return "Any" if flavor == "msgspec" else shape.name
    if isinstance(shape, TupleOf):
        return f"tuple[{', '.join(annotation_text(s, flavor) for s in shape.items)}]"
    if isinstance(shape, UnionOf):
        members = [annotation_text(s, flavor) for s in shape.members]
        return " | ".join(members + (["None"] if shape.nullable else []))
    if isinstance(shape, ListOf):
        item = annotation_text(shape.item, flavor)
        tuple_of = shape.container == "tuple"
        base = f"tuple[{item}, ...]" if tuple_of else f"{shape.container}[{item}]"
    elif isinstance(shape, MapOf):
        key = annotation_text(shape.key, flavor)
        if flavor == "pydantic" and getattr(shape.key, "kind", "") == "int":
            key = f"Annotated[{key}, Strict(False)]"
        base = f"dict[{key}, {annotation_text(shape.value, flavor)}]"
    else:
        base = _scalar(shape, flavor)
    bounds = shape.constraints.items()
    if flavor == "pydantic":
        bounds.pop("tz", None)
    else:
        kind = shape.kind if isinstance(shape, Scalar) else ""
        bounds, _ = msgspec_bounds(shape.constraints, kind)
    if not bounds:
        return base
    args = ", ".join(f"{k}={v!r}" for k, v in bounds.items())
    meta = f"msgspec.Meta({args})" if flavor == "msgspec" else f"Field({args})"
    return f"Annotated[{base}, {meta}]"


def field_text(f: FieldShape, flavor: Flavor) -> str:
    """`name: annotation[ = default]` of one field."""
    text = f"{f.name}: {annotation_text(f.type, flavor)}"
    if f.nullable:
        text += " | None"
    maker = "msgspec.field" if flavor == "msgspec" else "Field"
    named = "name" if flavor == "msgspec" else "alias"
    alias = f"{named}={_literal(f.alias)}" if f.alias else ""
    if f.default_factory is not None:
        factory = f"default_factory={_callable(f.default_factory)}"
        return f"{text} = {maker}({', '.join(filter(None, [factory, alias]))})"
    if not f.required:
        default = _value(f.default)
        if not alias:
            return f"{text} = {default}"
        # msgspec.field takes keywords only; pydantic's Field the default first.
        keyword = "default=" if flavor == "msgspec" else ""
        return f"{text} = {maker}({keyword}{default}, {alias})"
    return f"{text} = {maker}({alias})" if alias else text


def _callable(factory: Any) -> str:
    """How source text names a default factory (`list`, `uuid.uuid4`)."""
    module = getattr(factory, "__module__", "builtins")
    name = getattr(factory, "__qualname__", repr(factory))
    return name if module == "builtins" else f"{module}.{name}"


def msgspec_source(schema: UserSchema) -> str:
    """The msgspec Structs of `schema` as a module."""
    return _module(schema, "msgspec", "msgspec Structs", _struct_class)


def pydantic_source(schema: UserSchema) -> str:
    """The pydantic models of `schema` as a module."""

    def model_class(msg: MessageShape) -> list[str]:
        extra = "forbid" if msg.forbid_unknown else "ignore"
        return [
            f"class {msg.name}(BaseModel):",
            f'    model_config = ConfigDict(strict=True, extra="{extra}", frozen=True, '
            "protected_namespaces=())",
            *(f"    {field_text(f, 'pydantic')}" for f in msg.fields),
        ]

    return _module(schema, "pydantic", "pydantic models", model_class)


def _struct_class(msg: MessageShape) -> list[str]:
    body = [f"    {field_text(f, 'msgspec')}" for f in msg.fields] or ["    pass"]
    options = _STRUCT_OPTIONS.format(msg.forbid_unknown)
    return [f"class {msg.name}(msgspec.Struct, {options}):", *body]


def _module(
    schema: UserSchema,
    flavor: Flavor,
    what: str,
    render_class: Callable[[MessageShape], list[str]],
) -> str:
    ordered = messages(schema.shape)
    chunks = [*_enum_classes(ordered), *("\n".join(render_class(m)) for m in ordered)]
    body = "\n\n\n".join(chunks)
    header = _HEADER.format(what=what, spec=schema.name)
    return f"{header}\n{_imports(ordered, body, flavor)}\n\n\n{body}\n"


def _imports(ordered: list[MessageShape], body: str, flavor: Flavor) -> str:
    """Only what `body` uses, so that the file passes a linter as written."""
    modules = {*_MODULES, *_factory_modules(ordered)}
    stdlib = [f"import {m}" for m in sorted(modules) if re.search(rf"\b{m}\.", body)]
    typing = [n for n in ("Annotated", "Literal") if f"{n}[" in body]
    if typing:
        stdlib.append(f"from typing import {', '.join(typing)}")
    if flavor == "msgspec":
        third = ["import msgspec"]
    else:
        names = [
            "AwareDatetime",
            "Base64Bytes",
            "BaseModel",
            "ConfigDict",
            "Field",
            "Strict",
        ]
        used = [n for n in names if re.search(rf"\b{n}\b", body)]
        third = [f"from pydantic import {', '.join(used)}"]
    shapes = [s for msg in ordered for f in msg.fields for s in _leaves(f.type)]
    own = sorted(
        {
            f"from {cls.__module__} import {cls.__qualname__.split('.')[0]}"
            for cls in _enums(ordered)
            if not _choice_of(cls, shapes).generated
        }
    )
    groups = [stdlib, third, own]
    return "\n\n".join("\n".join(g) for g in groups if g)


def _factory_modules(ordered: list[MessageShape]) -> set[str]:
    factories = [f.default_factory for m in ordered for f in m.fields]
    names = {getattr(f, "__module__", "builtins") for f in factories if f is not None}
    return names - {"builtins"}


def _enum_classes(ordered: list[MessageShape]) -> list[str]:
    shapes = [s for msg in ordered for f in msg.fields for s in _leaves(f.type)]
    out = []
    for cls in _enums(ordered):
        if _choice_of(cls, shapes).generated:
            members = [f"    {m.name} = {m.value!r}" for m in cls.__members__.values()]
            out.append("\n".join([f"class {cls.__name__}(enum.IntEnum):", *members]))
    return out


def _enums(ordered: list[MessageShape]) -> list[type[enum.Enum]]:
    found: dict[type[enum.Enum], None] = {}
    for msg in ordered:
        for f in msg.fields:
            for s in _leaves(f.type):
                if isinstance(s, Choice) and s.enum is not None:
                    found[s.enum] = None
    return list(found)


def _choice_of(cls: type[enum.Enum], shapes: list[TypeShape]) -> Choice:
    return next(s for s in shapes if isinstance(s, Choice) and s.enum is cls)


def _leaves(shape: TypeShape) -> list[TypeShape]:
    if isinstance(shape, ListOf):
        return _leaves(shape.item)
    if isinstance(shape, MapOf):
        return [shape.key, *_leaves(shape.value)]
    return [shape]


def _scalar(shape: Scalar, flavor: Flavor) -> str:
    if flavor == "msgspec":
        return _BASES[shape.kind]
    if shape.kind == "bytes":
        return "Annotated[Base64Bytes, Strict(False)]"
    if shape.kind == "datetime":
        base = "AwareDatetime" if shape.constraints.tz else "datetime.datetime"
        return f"Annotated[{base}, Strict(False)]"
    if shape.kind in ("uuid", "decimal", "date", "time", "timedelta"):
        return f"Annotated[{_BASES[shape.kind]}, Strict(False)]"
    return _BASES[shape.kind]


def _literal(value: str | int) -> str:
    """A str in double quotes (as formatters write it), an int as is."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _value(value: Any) -> str:
    if isinstance(value, enum.Enum):
        return f"{type(value).__qualname__}.{value.name}"
    if isinstance(value, datetime.datetime):
        return repr(value).replace("datetime.timezone.utc", "datetime.UTC")
    if isinstance(value, str):
        return _literal(value)
    if isinstance(value, uuid.UUID | decimal.Decimal):
        return f"{type(value).__module__}.{type(value).__name__}({str(value)!r})"
    return repr(value)
