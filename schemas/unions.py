"""Tagged unions: the field whose one-value `Literal` names each member, and the tags.

pydantic picks a member of a discriminated union by such a field; msgspec's tagged
Structs, and the comparison of decoded values, read the same tag.
"""

from __future__ import annotations

from schemas.shape import Choice, MessageShape, TypeShape, UnionOf


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
