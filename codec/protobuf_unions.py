"""protobuf unions: a union's value wrapped in its oneof message, and read out of it.

A union is a wrapper message with `oneof member` (`schemas.derive.proto_file`). The
JSON-shaped values every codec's `from_builtins` takes hold the member itself (a
tagged member with its tag, a scalar as it is), so `wrapping` makes the one-entry
object `ParseDict` reads (`{"picked_up": {...}}`), chosen by the tag or by the
value's type; `member_of` reads the set member back out of a decoded wrapper, as
the field reader and the comparison of decoded values do.
"""

from __future__ import annotations

from typing import Any, Final

from google.protobuf.message import Message

from codec.shape_fixes import Fix, ShapeFixes
from schemas.shape import MessageShape, Scalar, TypeShape, UnionOf
from schemas.unions import UNION_ONEOF, member_names, union_tags
from schemas.untagged import is_untagged, member_picker

_BY_TYPE: Final = ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"))
"""A JSON value's Python type -> the scalar member that holds it (bool before int)."""


def is_wrapper(descriptor: Any) -> bool:
    """True for a union's wrapper message (every field in `oneof member`)."""
    oneofs = descriptor.oneofs
    return (
        len(oneofs) == 1
        and oneofs[0].name == UNION_ONEOF
        and len(oneofs[0].fields) == len(descriptor.fields)
    )


def member_of(wrapper: Message) -> tuple[str | None, Any]:
    """The set member's field name and value (None, None: nothing set)."""
    name = wrapper.WhichOneof(UNION_ONEOF)
    return (None, None) if name is None else (name, getattr(wrapper, name))


class Wrapping(ShapeFixes):
    """Builds, once per shape, what wraps each union value of a builtins tree.

    `value` returns None for a shape without a union, so a schema without one
    pays nothing on `from_builtins`.
    """

    def leaf(self, shape: TypeShape) -> Fix | None:
        return self._union(shape) if isinstance(shape, UnionOf) else None

    def _union(self, shape: UnionOf) -> Fix:
        names = member_names(shape)
        if shape.tag_field is not None:
            key = _tag_key(shape)
            by_tag = {
                tag: (name, self.value(member) or _same)
                for tag, name, member in zip(
                    union_tags(shape), names, shape.members, strict=True
                )
            }

            def wrap_tagged(v: Any) -> Any:
                name, fix = by_tag[v[key]]  # KeyError: not a member's tag
                return {name: fix(v)}

            return wrap_tagged
        if is_untagged(shape):  # the member pydantic picks (`schemas.untagged`)
            pick = member_picker(shape)
            fixes = [self.value(m) or _same for m in shape.members]

            def wrap_untagged(v: Any) -> Any:
                i = pick(v)
                return {names[i]: fixes[i](v)}

            return wrap_untagged
        kinds = {
            m.kind: n
            for m, n in zip(shape.members, names, strict=True)
            if isinstance(m, Scalar)
        }
        if "bytes" in kinds and "str" not in kinds:
            kinds["str"] = kinds["bytes"]  # bytes arrive as their base64 text

        def wrap_scalar(v: Any) -> Any:
            for kind, key in _BY_TYPE:
                if isinstance(v, kind) and key in kinds:
                    return {kinds[key]: v}
            return v  # not a member's type: ParseDict says why

        return wrap_scalar


def _tag_key(shape: UnionOf) -> str:
    first = shape.members[0]
    assert isinstance(first, MessageShape)  # noqa: S101  (tagged: messages)
    return next(f.wire for f in first.fields if f.name == shape.tag_field)


def _same(value: Any) -> Any:
    return value
