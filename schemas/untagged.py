"""Untagged unions of messages (`A | B`, no tag field): which member a value is.

pydantic's smart mode picks the member of an untagged union by trying each one;
nothing on the JSON or MessagePack wire says which it took, so msgspec refuses such
a union of Structs (`schemas.unions`). The binary formats record the member they
wrote (protobuf's oneof case, Avro's branch index, the FlatBuffers union type,
Cap'n Proto's discriminant), so they carry it: their encoders write the member
pydantic picks for a JSON-shaped value (`member_picker`: pydantic's own
validation, so the load generator's bytes hold what json+pydantic decodes from the
same payload), or the member a native object is by its class (`member_index`), and
their decoders give back the member the format recorded.

The derived Structs (`schemas.derive.msgspec_structs`) type such a field as an
`UntaggedUnion` subclass: a class with no slots that every member Struct inherits
too, so a decoded member is an instance of the field's type, and msgspec's
`dec_hook` makes it (`UntaggedUnion.make`) from a JSON-shaped dict, a member
Struct, or Avro's `(record name, record)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Union

import msgspec
from pydantic import BaseModel, TypeAdapter

from schemas.shape import MessageShape, UnionOf

Pick = Callable[[Any], int]


def is_untagged(shape: UnionOf) -> bool:
    """Two or more members, all messages, no tag field (pydantic's smart mode)."""
    return (
        shape.tag_field is None
        and len(shape.members) > 1
        and all(isinstance(m, MessageShape) for m in shape.members)
    )


def member_picker(shape: UnionOf) -> Pick:
    """The index of the member pydantic validates a JSON-shaped dict as.

    The members' own pydantic classes (`MessageShape.source`) validate the value
    as json+pydantic does (`validate_json`, smart mode). Members with no pydantic
    class (none come from a Struct or a `.proto` today) are picked as the first
    whose fields hold every key of the value and every required key.

    Raises (from the returned function):
        ValueError: no member reads the value.
    """
    members = [m for m in shape.members if isinstance(m, MessageShape)]
    sources = [m.source for m in members]
    if not all(isinstance(s, type) and issubclass(s, BaseModel) for s in sources):
        return _by_keys(members)
    adapters: list[TypeAdapter[Any]] = []
    encode = msgspec.json.encode

    def pick(value: Any) -> int:
        if not adapters:  # built once, on first use (a few ms)
            union: Any = Union.__getitem__(tuple(sources))
            adapters.append(TypeAdapter(union))
        try:
            got = adapters[0].validate_json(encode(value))
        except ValueError as exc:  # pydantic's ValidationError is one
            raise ValueError(f"no member of {_names(members)} reads it") from exc
        return next(i for i, s in enumerate(sources) if type(got) is s)

    return pick


def _by_keys(members: list[MessageShape]) -> Pick:
    def pick(value: Any) -> int:
        keys = set(value) if isinstance(value, dict) else set()
        for i, m in enumerate(members):
            wires = {f.wire for f in m.fields}
            if keys <= wires and {f.wire for f in m.fields if f.required} <= keys:
                return i
        raise ValueError(f"no member of {_names(members)} has the keys {sorted(keys)}")

    return pick


def member_index(shape: UnionOf, value: Any) -> int:
    """The member a native object (a Struct, a view, a pydantic model) is, by the
    name of its class (every form names a message's class after it)."""
    name = type(value).__name__
    for i, m in enumerate(shape.members):
        if isinstance(m, MessageShape) and m.name == name:
            return i
    raise ValueError(f"{name} is not a member of {_names(shape.members)}")


def _names(members: Any) -> str:
    return " | ".join(getattr(m, "name", "?") for m in members)


class UntaggedUnion:
    """The type of a derived Struct's untagged-union field (one subclass a union).

    Every member Struct inherits the subclass (it has no slots), so msgspec takes
    the member `make` returns as the field's value.
    """

    __slots__ = ()
    shape: ClassVar[UnionOf]
    members: ClassVar[tuple[type[msgspec.Struct], ...]] = ()
    pick: ClassVar[Pick]

    @classmethod
    def make(cls, obj: Any, dec_hook: Callable[[type, Any], Any]) -> Any:
        """The member Struct for `obj`: a dict (the member pydantic picks), an
        instance already, or `(name, record)` (Avro's record name)."""
        if isinstance(obj, cls):
            return obj
        if isinstance(obj, tuple):  # fastavro's `return_record_name`
            name, obj = obj
            short = str(name).rsplit(".", 1)[-1]
            i = next(i for i, m in enumerate(cls.members) if m.__name__ == short)
        else:
            i = cls.pick(obj)
        return msgspec.convert(obj, cls.members[i], dec_hook=dec_hook, str_keys=True)


def untagged_class(shape: UnionOf) -> type[UntaggedUnion]:
    """A new `UntaggedUnion` subclass for `shape` (its members set once built)."""
    name = "Or".join(m.name for m in shape.members if isinstance(m, MessageShape))
    namespace = {
        "__slots__": (),
        "shape": shape,
        "pick": staticmethod(member_picker(shape)),
    }
    return type(name, (UntaggedUnion,), namespace)
