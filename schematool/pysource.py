"""Derived msgspec Structs and pydantic models as Python source a user can commit.

The text defines the same classes `schemas.user.loader` builds at run time, with the
same options and annotations (a unit test executes it and compares), nested classes
first; a message that holds itself is a forward reference, which `from __future__
import annotations` lets msgspec and pydantic resolve in the module. A type msgspec
carries as text (an address, a URL) keeps its class, and the module defines the
`dec_hook` and `enc_hook` that make it from its text and write it back, as the
codecs do: decode with `msgspec.json.Decoder(Root, dec_hook=dec_hook)`.
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

from schemas.derive.msgspec_structs import msgspec_bounds, tagged_members
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
    nested,
    parts,
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
_STRUCT_OPTIONS: Final = "frozen={}, kw_only=True, forbid_unknown_fields={}, gc=False"
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
    if isinstance(shape, Foreign):  # msgspec has none but its text (else refused)
        if flavor == "msgspec" and shape.text is None:
            return "Any"
        return _class_text(shape.annotation) if shape.text is not None else shape.name
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
    tags = tagged_members(schema.shape)
    return _module(
        schema, "msgspec", "msgspec Structs", lambda m: _struct_class(m, tags)
    )


def pydantic_source(schema: UserSchema) -> str:
    """The pydantic models of `schema` as a module."""

    def model_class(msg: MessageShape) -> list[str]:
        extra = "forbid" if msg.forbid_unknown else "ignore"
        return [
            f"class {msg.name}(BaseModel):",
            f'    model_config = ConfigDict(strict=True, extra="{extra}", '
            f"frozen={msg.frozen}, protected_namespaces=())",
            *(f"    {field_text(f, 'pydantic')}" for f in msg.fields),
        ]

    return _module(schema, "pydantic", "pydantic models", model_class)


def _struct_class(
    msg: MessageShape, tags: dict[int, tuple[str, str, str | int]]
) -> list[str]:
    """A Struct; a member of a tagged union is tagged (msgspec reads the member
    its tag names), its tag readable as a property, as the run-time Struct's."""
    tag = tags.get(id(msg))
    kept = [f for f in msg.fields if tag is None or f.name != tag[0]]
    body = [f"    {field_text(f, 'msgspec')}" for f in kept]
    options = _STRUCT_OPTIONS.format(msg.frozen, msg.forbid_unknown)
    if tag is not None:
        name, wire, value = tag
        options = f"tag_field={_literal(wire)}, tag={_literal(value)}, {options}"
        kind = "str" if isinstance(value, str) else "int"
        body += [
            "",
            "    @property",
            f"    def {name}(self) -> {kind}:",
            f"        return {_literal(value)}",
        ]
    return [f"class {msg.name}(msgspec.Struct, {options}):", *(body or ["    pass"])]


def _module(
    schema: UserSchema,
    flavor: Flavor,
    what: str,
    render_class: Callable[[MessageShape], list[str]],
) -> str:
    ordered = messages(schema.shape)
    chunks = [*_enum_classes(ordered), *("\n".join(render_class(m)) for m in ordered)]
    texts = _text_types(ordered) if flavor == "msgspec" else {}
    if texts:
        chunks.append(_hooks(texts))
    body = "\n\n\n".join(chunks)
    header = _HEADER.format(what=what, spec=schema.name)
    future = "from __future__ import annotations\n\n" if _holds_itself(ordered) else ""
    imports = _imports(ordered, body, flavor)
    return f"{header}\n{future}{imports}\n\n\n{body}\n"


def _holds_itself(ordered: list[MessageShape]) -> bool:
    """A message refers to one printed after it (a message that holds itself)."""
    seen: set[int] = set()
    for msg in ordered:
        if any(id(m) not in seen for f in msg.fields for m in nested(f.type)):
            return True
        seen.add(id(msg))  # after: a class naming itself is a forward reference
    return False


def _text_types(ordered: list[MessageShape]) -> dict[str, str]:
    """Class text -> the text of what makes it from its text (`Foreign.text`)."""
    out: dict[str, str] = {}
    for msg in ordered:
        for f in msg.fields:
            pending: list[TypeShape] = [f.type]
            while pending:
                shape = pending.pop()
                if isinstance(shape, Foreign) and shape.text is not None:
                    cls = _class_text(shape.annotation)
                    module = getattr(shape.annotation, "__module__", "")
                    maker = (
                        cls
                        if module == "ipaddress"
                        else (f"pydantic.TypeAdapter({cls}).validate_python")
                    )
                    if cls in ("pydantic.IPvAnyAddress", "pydantic.IPvAnyNetwork"):
                        kind = "address" if "Address" in cls else "network"
                        maker = f"ipaddress.ip_{kind}"
                    out[cls] = maker
                elif not isinstance(shape, MessageShape):
                    pending.extend(parts(shape))
    return out


def _hooks(texts: dict[str, str]) -> str:
    makers = "".join(f"    {cls}: {maker},\n" for cls, maker in texts.items())
    return (
        "_FROM_TEXT: dict[Any, Any] = {\n" + makers + "}\n"
        '"""The types carried as their text, and what makes each from it."""\n\n\n'
        "def dec_hook(kind: Any, obj: Any) -> Any:\n"
        '    """Makes a type msgspec has no form of from its text, as pydantic does."""\n'
        "    if kind in _FROM_TEXT and isinstance(obj, str):\n"
        "        return _FROM_TEXT[kind](obj)\n"
        '    raise NotImplementedError(f"{kind} is not carried")\n\n\n'
        "def enc_hook(obj: Any) -> Any:\n"
        '    """Writes a type carried as its text."""\n'
        "    return str(obj)"
    )


def _class_text(cls: Any) -> str:
    """How the module names a class: `ipaddress.IPv4Address`, `pydantic.HttpUrl`."""
    module = getattr(cls, "__module__", "builtins")
    if module.startswith("pydantic"):
        module = "pydantic"
    return f"{module}.{getattr(cls, '__qualname__', cls)}"


def _imports(ordered: list[MessageShape], body: str, flavor: Flavor) -> str:
    """Only what `body` uses, so that the file passes a linter as written."""
    modules = {*_MODULES, *_factory_modules(ordered)}
    if re.search(r"\bipaddress\.", body):
        modules.add("ipaddress")
    stdlib = [f"import {m}" for m in sorted(modules) if re.search(rf"\b{m}\.", body)]
    typing = [n for n in ("Annotated", "Literal") if f"{n}[" in body]
    if re.search(r"\bAny\b", body):
        typing = sorted([*typing, "Any"])
    if typing:
        stdlib.append(f"from typing import {', '.join(typing)}")
    if flavor == "msgspec":
        third = ["import msgspec"]
        if re.search(r"\bpydantic\.", body):
            third.append("import pydantic")
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
        if re.search(r"\bpydantic\.", body):
            third.insert(0, "import pydantic")
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
