"""Unions: the tag of each member, the members' names, and which formats carry them.

pydantic picks a member of a discriminated union by the field whose one-value
`Literal` names each member; msgspec's tagged Structs, and the comparison of decoded
values, read the same tag. The binary formats carry a union as their own choice of
one member (`union_reasons` says which unions each carries):

| union | msgspec | protobuf | FlatBuffers | Cap'n Proto | Avro |
| --- | --- | --- | --- | --- | --- |
| tagged messages | tagged Structs | a wrapper message, `oneof value` of one message field per member | a `union` of the member tables | a wrapper struct, an unnamed `union` of one field per member | a union of the member records |
| distinct `str`, `int`, `float`, `bool`, `bytes` | native | a wrapper message, `oneof value` | refused (its unions hold tables) | a wrapper struct with a `union` | a union of the primitive types |
| untagged messages (`A | B`, smart mode) | refused (msgspec needs a tag) | as tagged: the member pydantic picks is the oneof case written | a `union` (its type field) | a `union` (its discriminant) | a union (its branch index) |
| `X | None` inside a list or map | native | refused | refused | refused | `["null", X]` |

Each member keeps its tag field (a string or int field; Avro's a one-symbol enum,
one byte), so every codec's decoded member reads its tag by attribute, as a
consumer reads it from pydantic; the format's own choice (the oneof case, the
union type, the branch index) is what the decode follows.
"""

from __future__ import annotations

import re
from typing import Final

from schemas.shape import Choice, MessageShape, Scalar, TypeShape, UnionOf, describe

UNION_ONEOF: Final = "member"
"""The oneof of a union's protobuf wrapper message: one field per member, named by
`member_names` (the tag, `picked_up`, where it is an identifier)."""
_KINDS: Final = {
    "protobuf": "oneof",
    "flatbuffers": "union",
    "capnp": "union",
    "avro": "union",
}
_PRIMITIVE: Final = frozenset({"str", "int", "float", "bool", "bytes"})
"""Scalar kinds a binary format's union of scalars carries (each its own type)."""
_IDENT: Final = re.compile(r"[a-z][a-z0-9_]*")
_AVRO_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def union_reasons(shape: UnionOf, codec: str, fmt: str) -> list[str]:
    """Why `codec`'s format (`fmt`) cannot carry the union `shape` (empty: it can).

    `codec` is a derived codec (a msgspec one or a binary one).
    """
    messages = [m for m in shape.members if isinstance(m, MessageShape)]
    if codec.startswith("msgspec"):
        if len(messages) > 1 and shape.tag_field is None:
            return [
                f"msgspec cannot tell {describe(shape)} apart (it refuses a union "
                "of Structs with no tag): give each member a Literal tag field "
                "with a default (kind: Literal['a'] = 'a'), which pydantic writes "
                "from then on and does not need to read; msgspec dead-letters the "
                "messages written without it"
            ]
        return []
    if shape.nullable and codec != "avro":
        return [
            f"{fmt} holds no None inside a list or map (without the | None, "
            "pydantic and msgspec reject the messages that hold a null there)"
        ]
    if len(shape.members) == 1:
        return []  # `X | None` inside a list or map, in Avro
    if messages and shape.tag_field is None:
        if len(messages) == len(shape.members):
            return []  # the format records the member (`schemas.untagged`)
        return [
            f"{_article(fmt)} {_KINDS[codec]} of {describe(shape)} is not mapped: "
            "messages beside scalars with no Literal tag field are not told apart "
            "on its encode; tag each message with a Literal field"
        ]
    if messages and codec == "avro":
        tags = union_tags(shape)
        if all(isinstance(t, str) and _AVRO_NAME.fullmatch(t) for t in tags):
            return []
        return [
            f"Avro carries each member's tag as an enum symbol, and "
            f"{', '.join(repr(t) for t in tags)} are not all Avro names"
        ]
    if messages:
        return []
    if codec == "flatbuffers":
        return [f"a FlatBuffers union holds tables only, not {describe(shape)}"]
    kinds = [m.kind if isinstance(m, Scalar) else "" for m in shape.members]
    if all(k in _PRIMITIVE for k in kinds) and len(set(kinds)) == len(kinds):
        return []
    return [
        f"{_article(fmt)} {_KINDS[codec]} of {describe(shape)} is not mapped: "
        "members other than distinct str, int, float, bool and bytes are not "
        "told apart on its encode"
    ]


def member_names(shape: UnionOf) -> list[str]:
    """An identifier per member (a oneof field, a union field): its tag when the tag
    is one (`picked_up`), else its message name or scalar kind in snake case."""
    tags = union_tags(shape)
    out: list[str] = []
    for i, member in enumerate(shape.members):
        tag = tags[i] if tags else None
        if isinstance(tag, str) and _IDENT.fullmatch(tag):
            name = tag
        elif isinstance(member, MessageShape):
            name = re.sub(r"(?<!^)(?=[A-Z])", "_", member.name).lower()
        else:
            name = describe(member).lower()
        if not _IDENT.fullmatch(name) or name in out:
            name = f"member{i}"
        out.append(name)
    return out


def _article(fmt: str) -> str:
    return f"an {fmt}" if fmt[0] in "AEIOU" else f"a {fmt}"


def union_tags(shape: UnionOf) -> list[str | int]:
    """The tag value of each member of a tagged union, in order (empty: untagged)."""
    out: list[str | int] = []
    for member in shape.members if shape.tag_field else ():
        assert isinstance(member, MessageShape)  # noqa: S101  (tagged: messages)
        tag = next(f for f in member.fields if f.name == shape.tag_field)
        assert isinstance(tag.type, Choice)  # noqa: S101  (tagged: a Literal)
        out.append(tag.type.values[0])
    return out


def tag_field_of(members: tuple[TypeShape, ...]) -> str | None:
    """The field every member (all messages) holds a distinct one-value Literal in.

    pydantic picks such a member by that field, discriminator declared or not (the
    Literal fails for every other member); msgspec's tagged unions do the same.
    """
    if len(members) < 2 or not all(isinstance(m, MessageShape) for m in members):
        return None
    first = members[0]
    assert isinstance(first, MessageShape)  # noqa: S101  (checked just above)
    for candidate in first.fields:
        tags = []
        for member in members:
            assert isinstance(member, MessageShape)  # noqa: S101
            found = [f for f in member.fields if f.name == candidate.name]
            kind = found[0].type if found and not found[0].nullable else None
            if not (isinstance(kind, Choice) and len(kind.values) == 1):
                break
            if kind.enum is not None or (found[0].wire != candidate.wire):
                break
            tags.append(kind.values[0])
        else:
            if len(set(tags)) == len(tags):
                return candidate.name
    return None
