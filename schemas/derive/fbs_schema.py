"""Derive a FlatBuffers schema (.fbs) from a shape: one table per message.

| shape | FlatBuffers |
| --- | --- |
| `str`, `bool`, `float` | `string`, `bool`, `double` |
| `int` | `long`; `int`/`uint`/`ulong` when the bounds fit (as protobuf) |
| `bytes` | `[ubyte]` |
| `datetime` | `long`: microseconds since the epoch, UTC (the Python forms' resolution); a naive-only one (`tz=False`): its wall-clock time, read back naive |
| `uuid`, `decimal` | `string`: the canonical UUID text, the exact Decimal text (as protobuf) |
| `date`, `time`, `timedelta` | `string`: the ISO 8601 text msgspec writes, read back as the value |
| `Choice` | `string` or `long` (the value) |
| `list[X]` | `[X]`; a list of lists or of bytes is refused (no vector of vectors) |
| `dict[K, V]` | `[Entry]`, a table `{key: K; value: V}` per entry |
| `X | None` | a scalar `= null` (optional scalar); other types: an absent field |
| `IPv4Address`, `HttpUrl`... (`Foreign.text`) | `string`: its text, made the value again when read |
| a tagged union of messages (a field's, not in a list or map) | `union <Message><Field>Union { A, B }` of the member tables (a member keeps its tag field); the field takes two slots, its type and its value |

Field names are code identifiers (flatc makes accessors of them), so, as in the
derived `.proto`, they are the attribute names, not the aliases.

A field that is not nullable and not a scalar is `(required)`, so the codec's
verifier refuses a buffer without it. The namespace and the 4-character file
identifier are taken from a hash of the tables' text: two schemas never share
generated modules, and a buffer of another schema is refused by its identifier.
"""

from __future__ import annotations

import hashlib
import keyword
from dataclasses import dataclass, field
from typing import Final

from schemas.formats import Refusals, node_reasons
from schemas.shape import (
    Choice,
    FieldShape,
    Foreign,
    ListOf,
    MapOf,
    MessageShape,
    Scalar,
    TypeShape,
    UnionOf,
    describe,
    int_width,
    messages,
    unique_name,
)

_INTS: Final = {"int32": "int", "uint32": "uint", "int64": "long", "uint64": "ulong"}
_SCALARS: Final = {
    "str": "string",
    "float": "double",
    "bool": "bool",
    "datetime": "long",
    "uuid": "string",
    "decimal": "string",
    "date": "string",
    "time": "string",
    "timedelta": "string",
}
_RESERVED: Final = frozenset(
    (
        *("table", "struct", "enum", "union", "namespace", "root_type", "include"),
        *("attribute", "rpc_service", "file_identifier", "file_extension"),
        *("native_include", "true", "false", "bool", "byte", "ubyte", "short"),
        *("ushort", "int", "uint", "float", "long", "ulong", "double", "int8"),
        *("uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"),
        *("float32", "float64", "string"),
    )
)
"""Words a .fbs file or flatc's Python output cannot take as a field name."""
_METHODS: Final = frozenset({"Init", "GetRootAs"})


@dataclass(frozen=True, slots=True)
class FbsForm:
    """The derived schema and what the codec needs to read and write it.

    Attributes:
        text: the .fbs source (what flatc compiles, what `codec-schema` prints).
        namespace: the tables' namespace (also the generated Python package).
        identifier: the 4-character file identifier.
        tables: message shape id -> its table name (map entries excluded).
        entries: (message shape id, field name) -> the entry table of a map field.
        unions: union shape id -> its FlatBuffers union's name.
    """

    text: str
    namespace: str
    identifier: str
    tables: dict[int, str]
    entries: dict[tuple[int, str], str]
    unions: dict[int, str] = field(default_factory=dict)


def camel(name: str) -> str:
    """flatc's Python accessor name of field `name` (`customer_id` -> `CustomerId`).

    flatc's own rule (ConvertCase to UpperCamel): the first character and each one
    after an `_` are upper-cased and that `_` dropped, except a trailing `_`, which
    stays (`from_` -> `From_`, `a__b` -> `A_b`).
    """
    out, i = [name[:1].upper()], 1
    while i < len(name):
        if name[i] == "_" and i + 1 < len(name):
            i += 1
            out.append(name[i].upper())
        else:
            out.append(name[i])
        i += 1
    return "".join(out)


def scalar_type(shape: Scalar | Choice) -> str:
    """The FlatBuffers type of a scalar or choice."""
    if isinstance(shape, Choice):
        return "string" if isinstance(shape.values[0], str) else "long"
    if shape.kind == "int":
        return _INTS[int_width(shape.constraints)]
    if shape.kind == "bytes":
        return "[ubyte]"
    return _SCALARS.get(shape.kind, "string")  # others are refused (`_type`)


def is_offset(shape: TypeShape) -> bool:
    """True when a field of this shape is stored through an offset (not inline)."""
    if isinstance(shape, Scalar | Choice):
        return scalar_type(shape) in ("string", "[ubyte]")
    return True


def flatbuffers_form(root: MessageShape) -> FbsForm:
    """The .fbs form of `root`.

    Raises:
        ConfigError: naming every field FlatBuffers cannot hold, with its path.
    """
    refusals = Refusals()
    all_msgs = messages(root)
    taken = {m.name for m in all_msgs}
    tables = {id(m): m.name for m in all_msgs}
    entries: dict[tuple[int, str], str] = {}
    unions: dict[int, str] = {}
    blocks: list[str] = []
    for msg in all_msgs:
        lines = []
        for f in msg.fields:
            path = f"{msg.name}.{f.name}"
            _check_name(f, msg, refusals, path)
            if isinstance(f.type, UnionOf) and not node_reasons(f.type, "flatbuffers"):
                name = unique_name(f"{msg.name}{camel(f.name)}Union", taken)
                unions[id(f.type)] = name
                members = ", ".join(tables[id(m)] for m in f.type.members)
                blocks.append(f"union {name} {{ {members} }}\n")
                lines.append(f"  {f.name}:{name};")
                continue
            if isinstance(f.type, MapOf):
                entry = unique_name(f"{msg.name}{camel(f.name)}Entry", taken)
                entries[(id(msg), f.name)] = entry
                key = _type(f.type.key, tables, refusals, path + "{key}")
                value = _type(f.type.value, tables, refusals, path + "{}")
                req = " (required)" if is_offset(f.type.key) else ""
                vreq = " (required)" if is_offset(f.type.value) else ""
                blocks.append(
                    f"table {entry} {{\n  key:{key}{req};\n  value:{value}{vreq};\n}}\n"
                )
                fb = f"[{entry}]"
            else:
                fb = _type(f.type, tables, refusals, path)
            lines.append(f"  {f.name}:{fb}{_suffix(f)};")
        blocks.append(f"table {msg.name} {{\n" + "\n".join(lines) + "\n}\n")
    refusals.raise_any()
    body = "\n".join(blocks)
    digest = hashlib.sha256(body.encode()).hexdigest()
    namespace = f"codecab_{digest[:12]}"
    identifier = digest[12:16]
    text = (
        f"namespace {namespace};\n\n{body}\nroot_type {root.name};\n"
        f'file_identifier "{identifier}";\n'
    )
    return FbsForm(text, namespace, identifier, tables, entries, unions)


def _suffix(f: FieldShape) -> str:
    if f.nullable:
        return "" if is_offset(f.type) else " = null"
    return " (required)" if is_offset(f.type) else ""


def _check_name(
    f: FieldShape, msg: MessageShape, refusals: Refusals, path: str
) -> None:
    if f.name in _RESERVED or keyword.iskeyword(f.name):
        refusals.add(path, f"{f.name!r} is a FlatBuffers keyword or type name")
    elif camel(f.name) in _METHODS or not camel(f.name).isidentifier():
        refusals.add(path, f"flatc's Python accessor {camel(f.name)!r} would clash")
    elif any(
        camel(g.name) in {camel(f.name) + s for s in ("Length", "IsNone", "AsNumpy")}
        for g in msg.fields
    ):
        refusals.add(path, "flatc's Python accessors of two fields would clash")


def _type(
    shape: TypeShape, tables: dict[int, str], refusals: Refusals, path: str
) -> str:
    unmapped = node_reasons(shape, "flatbuffers")
    if unmapped:  # a date, a set, a union...: refused, with the same reason
        refusals.add(path, "; ".join(unmapped))
        return "string"
    if isinstance(shape, MessageShape):
        return tables[id(shape)]
    if isinstance(shape, UnionOf):
        refusals.add(path, "FlatBuffers unions in a vector or map are not read here")
        return "string"
    if isinstance(shape, ListOf):
        item = shape.item
        if isinstance(item, ListOf | MapOf) or (
            isinstance(item, Scalar) and item.kind == "bytes"
        ):
            refusals.add(path, "FlatBuffers has no vector of vectors")
            return "[ubyte]"
        return f"[{_type(item, tables, refusals, path + '[]')}]"
    if isinstance(shape, MapOf):
        refusals.add(path, "FlatBuffers has no map inside a list or map")
        return "[ubyte]"
    if isinstance(shape, Scalar | Choice):
        return scalar_type(shape)
    if isinstance(shape, Foreign):  # one with a text form (others are refused)
        return "string"
    refusals.add(path, f"FlatBuffers has no {describe(shape)} type")
    return "string"
