"""`codec-schema show`: each field of a user's schema and how every form holds it."""

from __future__ import annotations

from typing import Any, Final

import msgspec
from pydantic import BaseModel, Strict

from schemas.formats import MSGSPEC_CODECS as MSGSPEC, PYDANTIC_CODECS
from schemas.shape import (
    Choice,
    FieldShape,
    ListOf,
    MapOf,
    MessageShape,
    Scalar,
    TypeShape,
    describe,
    messages,
)
from schemas.user.loader import UserSchema
from schemas.user.skipped_checks import skipped_checks
from schematool.codecs import WIRE_CODECS
from schematool.protosource import field_declaration, find_message
from schematool.wireforms import form_status

_HEADERS: Final = ("field", "type", "protobuf", "notes")
_STRING_CARRIED: Final = "json-stdlib+pydantic and orjson+pydantic"


def render_show(schema: UserSchema) -> str:
    """The summary: which form is the user's, then one row per field."""
    lines = [f"schema {schema.name}", *_forms(schema), ""]
    mine = schema.source
    rows: list[tuple[str, ...]] = [_HEADERS]
    seen: set[int] = set()
    skips: dict[str, list[str]] = {}
    for skip in skipped_checks(schema.shape, schema.source):
        skips.setdefault(skip.path, []).append(f"{skip.who()} {skip.check}")
    _rows(schema, schema.shape, schema.shape.name, rows, seen, skips)
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEADERS) - 1)]
    for row in rows:
        cells = [cell.ljust(w) for cell, w in zip(row, widths, strict=False)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    own = {"pydantic": PYDANTIC_CODECS, "msgspec": MSGSPEC, "proto": ("protobuf",)}
    lines.extend(
        f"{name}: {form_status(name, schema)}"
        for name in WIRE_CODECS
        if name not in own[mine]
    )
    return "\n".join(lines)


def _forms(schema: UserSchema) -> list[str]:
    model, struct = schema.model, schema.struct
    strict = "strict" if model.model_config.get("strict") else "lax: '42' is an int"
    yours = {
        "pydantic": f"{_qualified(model)}, yours ({strict})",
        "msgspec": f"{_qualified(struct)}, yours ({_struct_options(struct)})",
        "proto": f"{schema.shape.proto_name} in {schema.proto_file.name}, yours",
    }
    derived = {
        "pydantic": f"{model.__name__}, derived (strict; JSON-string values lenient)",
        "msgspec": f"{struct.__name__}, derived (strict, "
        f"{'frozen' if struct.__struct_config__.frozen else 'mutable'}, "
        f"{_struct_options(struct)}{_renamed(schema)})",
        "proto": f"{schema.shape.proto_name}, derived proto3, built in memory (no "
        f"file written; `codec-schema derive {schema.name} --form proto > "
        f"{schema.proto_file.name}` writes it)",
    }
    label = {"pydantic": "pydantic", "msgspec": "msgspec", "proto": "protobuf"}
    return [
        f"  {label[form]:<9} {(yours if form == schema.source else derived)[form]}"
        for form in ("pydantic", "msgspec", "proto")
    ]


def _renamed(schema: UserSchema) -> str:
    aliased = any(f.alias for m in messages(schema.shape) for f in m.fields)
    return "; your aliases are its wire keys" if aliased else ""


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _rows(
    schema: UserSchema,
    msg: MessageShape,
    path: str,
    rows: list[tuple[str, ...]],
    seen: set[int],
    skips: dict[str, list[str]],
) -> None:
    seen.add(id(msg))
    desc = find_message(schema.proto_file, msg.proto_name)
    by_name = {f.name: f for f in desc.field}
    for f in msg.fields:
        typ = describe(f.type) + (" | None" if f.nullable else "")
        bounds = _bounds(f.type)
        if bounds:
            typ += f" ({bounds})"
        proto = field_declaration(by_name[f.name], desc, schema.proto_file)
        where = f"{path}.{f.name}"
        notes = [*_notes(msg, f), *skips.get(where, [])]
        rows.append((where, typ, proto, "; ".join(notes)))
        for inner, suffix in _nested(f.type):
            if id(inner) not in seen:
                _rows(schema, inner, where + suffix, rows, seen, skips)


def _nested(shape: TypeShape) -> list[tuple[MessageShape, str]]:
    if isinstance(shape, MessageShape):
        return [(shape, "")]
    if isinstance(shape, ListOf) and isinstance(shape.item, MessageShape):
        return [(shape.item, "[]")]
    if isinstance(shape, MapOf) and isinstance(shape.value, MessageShape):
        return [(shape.value, "{}")]
    return []


def _bounds(shape: TypeShape) -> str:
    if isinstance(shape, Scalar | ListOf | MapOf):
        items = shape.constraints.items()
        items.pop("tz", None)
        return ", ".join(f"{k}={v!r}" for k, v in items.items())
    return ""


def _notes(msg: MessageShape, f: FieldShape) -> list[str]:
    shape, notes = f.type, []
    leaf = shape.item if isinstance(shape, ListOf) else shape
    if f.nullable:
        notes.append("None <-> unset (field presence)")
    if isinstance(leaf, Scalar) and leaf.kind == "datetime" and not leaf.constraints.tz:
        notes.append("a Timestamp is an instant: send timezone-aware datetimes")
    if isinstance(leaf, Scalar) and leaf.kind == "bytes":
        notes.append("standard base64 in JSON")
    if isinstance(leaf, Scalar) and leaf.kind in ("uuid", "decimal"):
        notes.append("protobuf carries its text, converted back when read")
    if f.alias:
        notes.append(f"wire key {f.alias!r} (protobuf json_name)")
    if f.read_key:
        notes.append(f"your model reads it under {f.read_key!r}, not its wire key")
    if isinstance(leaf, Scalar) and leaf.holds == "json":
        notes.append("the JSON text is carried; your model holds it parsed")
    elif isinstance(leaf, Scalar) and leaf.holds is not None:
        notes.append("the secret's text is carried, never printed")
    if f.serializer:
        notes.append(f"written by {f.serializer}")
    if isinstance(leaf, Choice) and leaf.enum is not None and not leaf.generated:
        notes.append(
            f"protobuf holds the value, which == the {leaf.enum.__name__} member"
        )
    if _string_carried(shape) and _strict_pydantic(msg.source, f.name):
        notes.append(
            f"strict model: {_STRING_CARRIED} read it as a JSON string and reject "
            "it (annotate it Strict(False))"
        )
    return notes


def _string_carried(shape: TypeShape) -> bool:
    """JSON carries it as a string, which a strict model refuses in Python mode."""
    if isinstance(shape, ListOf):
        return _string_carried(shape.item)
    if isinstance(shape, MapOf):
        key_int = isinstance(shape.key, Scalar) and shape.key.kind == "int"
        return key_int or _string_carried(shape.value)
    if isinstance(shape, Choice):
        return shape.enum is not None
    return isinstance(shape, Scalar) and shape.kind in ("datetime", "bytes")


def _strict_pydantic(source: Any, name: str) -> bool:
    """A strict user model whose field `name` was not made lax on its own."""
    if not (isinstance(source, type) and issubclass(source, BaseModel)):
        return False
    lenient = any(
        isinstance(m, Strict) and not m.strict
        for m in source.model_fields[name].metadata
    )
    return bool(source.model_config.get("strict")) and not lenient


def _struct_options(struct: type[msgspec.Struct]) -> str:
    config = struct.__struct_config__
    return (
        "forbids unknown fields"
        if config.forbid_unknown_fields
        else "ignores unknown fields"
    )
