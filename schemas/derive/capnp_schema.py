"""Derive a Cap'n Proto schema (.capnp) from a shape: one struct per message.

| shape | Cap'n Proto |
| --- | --- |
| `str`, `bytes`, `bool`, `float` | `Text`, `Data`, `Bool`, `Float64` |
| `int` | `Int64`; `Int32`/`UInt32`/`UInt64` when the bounds fit (as protobuf) |
| `datetime` | `Int64`: microseconds since the epoch, UTC; a naive-only one (`tz=False`): its wall-clock time, read back naive |
| `uuid`, `decimal` | `Text`: the canonical UUID text, the exact Decimal text (as protobuf) |
| `date`, `time`, `timedelta` | `Text`: the ISO 8601 text msgspec writes, made the value again by msgspec at decode |
| `Choice` | `Text` or `Int64` (the value) |
| `list[X]` | `List(X)` |
| `dict[K, V]` | `List(Entry)`, a struct `{key :K; value :V}` per entry |
| `X | None` | a union `{none :Void; value :X}` |
| a union the format carries (`schemas.unions`) | a wrapper struct `<Message><Field>Union` holding an unnamed `union` of one field per member (a message member keeps its tag field) |
| `IPv4Address`, `HttpUrl`... (`Foreign.text`) | `Text`: its text, made the value again at decode |

Cap'n Proto names are camelCase without underscores: `customer_id` is written
`customerId` (`capnp_name`). Like protobuf's, the names are code identifiers, so
they come from the attribute names, not the aliases (`event_id` is `eventId` even
when its alias is `eventID`). Two fields that give the same name, or a name that
does not start with a letter, are refused. The file id is taken from a hash of the
text, so the same shape always gives the same file.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

from schemas.formats import Refusals, node_reasons
from schemas.shape import (
    Choice,
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
    parts,
    unique_name,
)
from schemas.unions import member_names

_INTS: Final = {
    "int32": "Int32",
    "uint32": "UInt32",
    "int64": "Int64",
    "uint64": "UInt64",
}
_SCALARS: Final = {
    "str": "Text",
    "bytes": "Data",
    "bool": "Bool",
    "float": "Float64",
    "datetime": "Int64",
    "uuid": "Text",
    "decimal": "Text",
    "date": "Text",
    "time": "Text",
    "timedelta": "Text",
}


def capnp_name(name: str, upper: bool = False) -> str:
    """`customer_id` -> `customerId` (`CustomerId` with `upper`)."""
    parts = [p for p in name.split("_") if p]
    text = parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:]) if parts else ""
    if upper:
        return text[:1].upper() + text[1:]
    return text[:1].lower() + text[1:]


@dataclass(frozen=True, slots=True)
class CapnpForm:
    """The derived schema text and the names the codec reads it by.

    Attributes:
        text: the .capnp source (what `capnp.load` parses).
        structs: message shape id -> its struct name.
        entries: (message shape id, field name) -> the entry struct of a map field.
        unions: union shape id -> its wrapper struct.
    """

    text: str
    structs: dict[int, str]
    entries: dict[tuple[int, str], str]
    unions: dict[int, str]


def capnp_form(root: MessageShape) -> CapnpForm:
    """The .capnp form of `root`.

    Raises:
        ConfigError: naming every field or message Cap'n Proto cannot name.
    """
    refusals = Refusals()
    all_msgs = messages(root)
    taken: set[str] = set()
    structs = {}
    for msg in all_msgs:
        name = capnp_name(msg.name, upper=True)
        if not name[:1].isalpha() or name in taken:
            refusals.add(msg.name, "no distinct Cap'n Proto struct name")
        taken.add(name)
        structs[id(msg)] = name
    entries: dict[tuple[int, str], str] = {}
    blocks: list[str] = []
    unions = _unions(all_msgs, taken)
    structs_and_unions = structs | unions
    for shape, name in _union_shapes(all_msgs, unions):
        members = [
            f"    {capnp_name(n)} @{i} :{_type(m, structs_and_unions, refusals, name)};"
            for i, (m, n) in enumerate(
                zip(shape.members, member_names(shape), strict=True)
            )
        ]
        blocks.append(
            f"struct {name} {{\n  union {{\n" + "\n".join(members) + "\n  }\n}\n"
        )
    for msg in all_msgs:
        lines, number, names = [], 0, set()
        for f in msg.fields:
            path = f"{msg.name}.{f.name}"
            fname = capnp_name(f.name)
            if not fname[:1].isalpha() or fname in names:
                refusals.add(path, f"no distinct Cap'n Proto field name ({fname!r})")
            names.add(fname)
            if isinstance(f.type, MapOf):
                entry = unique_name(
                    f"{structs[id(msg)]}{capnp_name(f.name, True)}Entry", taken
                )
                entries[(id(msg), f.name)] = entry
                key = _type(f.type.key, structs_and_unions, refusals, path)
                value = _type(f.type.value, structs_and_unions, refusals, path + "{}")
                blocks.append(
                    f"struct {entry} {{\n  key @0 :{key};\n  value @1 :{value};\n}}\n"
                )
                ctype = f"List({entry})"
            else:
                ctype = _type(f.type, structs_and_unions, refusals, path)
            if f.nullable:
                lines.append(
                    f"  {fname} :union {{\n    none @{number} :Void;\n"
                    f"    value @{number + 1} :{ctype};\n  }}"
                )
                number += 2
            else:
                lines.append(f"  {fname} @{number} :{ctype};")
                number += 1
        blocks.append(f"struct {structs[id(msg)]} {{\n" + "\n".join(lines) + "\n}\n")
    refusals.raise_any()
    body = "\n".join(blocks)
    file_id = int(hashlib.sha256(body.encode()).hexdigest()[:16], 16) | (1 << 63)
    return CapnpForm(f"@{file_id:#x};\n\n{body}", structs, entries, unions)


def _unions(all_msgs: list[MessageShape], taken: set[str]) -> dict[int, str]:
    """A wrapper struct name per union in a field, list or map (by union id)."""
    out: dict[int, str] = {}
    for msg in all_msgs:
        for f in msg.fields:
            for shape in _inner_unions(f.type):
                if id(shape) not in out:
                    base = capnp_name(msg.name, True) + capnp_name(f.name, True)
                    out[id(shape)] = unique_name(f"{base}Union", taken)
    return out


def _union_shapes(
    all_msgs: list[MessageShape], unions: dict[int, str]
) -> list[tuple[UnionOf, str]]:
    """Each union with its wrapper struct's name, in name order."""
    found = {
        id(u): (u, unions[id(u)])
        for m in all_msgs
        for f in m.fields
        for u in _inner_unions(f.type)
    }
    return sorted(found.values(), key=lambda pair: pair[1])


def _inner_unions(shape: TypeShape) -> list[UnionOf]:
    """The unions in a field's type, not inside a nested message."""
    if isinstance(shape, MessageShape):
        return []
    inner = [u for p in parts(shape) for u in _inner_unions(p)]
    return [shape, *inner] if isinstance(shape, UnionOf) else inner


def _type(
    shape: TypeShape, structs: dict[int, str], refusals: Refusals, path: str
) -> str:
    unmapped = node_reasons(shape, "capnp")
    if unmapped:  # a date, a set, a union...: refused, with the same reason
        refusals.add(path, "; ".join(unmapped))
        return "Text"
    if isinstance(shape, MessageShape | UnionOf) and id(shape) in structs:
        return structs[id(shape)]
    if isinstance(shape, ListOf):
        return f"List({_type(shape.item, structs, refusals, path + '[]')})"
    if isinstance(shape, MapOf):
        refusals.add(path, "Cap'n Proto has no map inside a list or map here")
        return "Void"
    if isinstance(shape, Choice):
        return "Text" if isinstance(shape.values[0], str) else "Int64"
    if isinstance(shape, Foreign):  # one with a text form (others are refused)
        return "Text"
    if not isinstance(shape, Scalar) or shape.kind not in (*_SCALARS, "int"):
        refusals.add(path, f"Cap'n Proto has no {describe(shape)} type")
        return "Text"
    if shape.kind == "int":
        return _INTS[int_width(shape.constraints)]
    return _SCALARS[shape.kind]
