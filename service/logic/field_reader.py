"""The business logic of a user's schema: read every field of a decoded object.

A generic consumer of any schema cannot know what its fields mean, so it reads all
of them, by attribute, the way business logic reads the fields it needs: the same
step runs on a pydantic model, a msgspec Struct and a protobuf message. protobuf's
upb backend decodes lazily (a string becomes a Python `str` when read, a nested
message when entered), so reading is where protobuf pays, as on the built-in
schemas (DESIGN.md). Values are fetched, not copied into new dicts: a copy would
add the same cost to every codec and blur the differences being measured.

What each form pays for, so that no codec skips a step the others take:

| field | pydantic / msgspec | protobuf |
| --- | --- | --- |
| scalar, enum, Literal | the attribute | the attribute (upb converts it) |
| `X | None` | the attribute (None or X) | `HasField`, then the attribute |
| datetime | the attribute (parsed when decoded) | `Timestamp.ToDatetime(tzinfo=UTC)` |
| UUID, Decimal | the attribute (parsed when decoded) | `UUID(text)`, `Decimal(text)` |
| address, URL (`Foreign.text`) | the attribute (made when decoded) | the type made from its text |
| list, map | every item / entry | every item / entry |
| nested message | every field of it | every field of it |
| union | the member, by its tag (else its class) | the oneof's set member (`WhichOneof`) |

The step returns how many values it read (None counts as one), which is the same
number for every form of one message: the tests check that it read them all.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from decimal import Decimal
from operator import attrgetter
from typing import Any, Final, TypeAlias
from uuid import UUID

from google.protobuf.message import Message

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
)
from schemas.unions import UNION_ONEOF, member_names, union_tags

Read: TypeAlias = Callable[[Any], int]
"""Reads one value (a message, a list, a map, a scalar); returns the values read."""

_UTC: Final = datetime.UTC


def read_every_field(shape: MessageShape) -> Read:
    """The step that reads every field of a decoded `shape` message, of any form.

    Built once: one reader per form, chosen per message by its type (`auto` hands
    the step objects of several forms).
    """
    python, proto = _Compiler(proto=False), _Compiler(proto=True)
    read_python, read_proto = python.message(shape), proto.message(shape)

    def read(obj: Any) -> int:
        if isinstance(obj, Message):
            return read_proto(obj)
        return read_python(obj)

    return read


def _one(_value: Any) -> int:
    return 1


def _timestamp(value: Any) -> int:
    value.ToDatetime(tzinfo=_UTC)  # what the other forms hold already
    return 1


def _uuid(value: Any) -> int:
    try:  # noqa: SIM105  (cheaper than contextlib.suppress, per value)
        UUID(value)  # what the other forms hold already
    except ValueError:
        pass  # not a UUID: protobuf does not check it (codec-schema check says so)
    return 1


def _decimal(value: Any) -> int:
    try:  # noqa: SIM105  (cheaper than contextlib.suppress, per value)
        Decimal(value)  # what the other forms hold already
    except ArithmeticError:
        pass  # not a number: protobuf does not check it (codec-schema check says so)
    return 1


def _from_text(make: Callable[[str], Any]) -> Read:
    """An address or URL carried as its text, made the user's type again."""

    def read(value: Any) -> int:
        try:  # noqa: SIM105  (cheaper than contextlib.suppress, per value)
            make(value)  # what the other forms hold already
        except ValueError:
            pass  # not one: protobuf does not check it (codec-schema check says so)
        return 1

    return read


def _count(values: Any) -> int:
    return len(list(values))  # iterating converts each item (upb) or touches it


def _count_entries(entries: Any) -> int:
    return len(dict(entries))  # every key and every value


class _Compiler:
    """Builds the readers of one form; each message's reader is built once."""

    def __init__(self, *, proto: bool) -> None:
        self._proto = proto
        self._messages: dict[int, Read] = {}

    def message(self, shape: MessageShape) -> Read:
        """The reader of a message: plain fields in one C call, then the rest."""
        known = self._messages.get(id(shape))
        if known is not None:
            return known
        slot: list[Read] = []
        # A recursive type reaches itself before it is built: go through the slot.
        self._messages[id(shape)] = lambda obj: slot[0](obj)
        plain = [f.name for f in shape.fields if self._plain(f)]
        rest = [
            (f.name, f.nullable and self._proto, self.value(f.type))
            for f in shape.fields
            if not self._plain(f)
        ]
        fetch = attrgetter(*plain) if plain else None
        counted = len(plain)

        def read(obj: Any) -> int:
            if fetch is not None:
                fetch(obj)
            n = counted
            for name, has_presence, read_value in rest:
                if has_presence and not obj.HasField(name):
                    n += 1  # None, as the other forms read it
                    continue
                value = getattr(obj, name)
                n += 1 if value is None else read_value(value)
            return n

        slot.append(read)
        self._messages[id(shape)] = read
        return read

    def _plain(self, f: FieldShape) -> bool:
        """A field read by its attribute alone: no presence check, nothing inside."""
        if self._proto and f.nullable:
            return False
        return isinstance(f.type, Choice) or (
            isinstance(f.type, Scalar) and self._converter(f.type) is None
        )

    def _converter(self, shape: TypeShape) -> Read | None:
        """What turns a protobuf value into the other forms' (None: nothing)."""
        if self._proto and isinstance(shape, Foreign) and shape.text is not None:
            return _from_text(shape.text)
        if not (self._proto and isinstance(shape, Scalar)):
            return None
        return _CONVERTERS.get(shape.kind)

    def value(self, shape: TypeShape) -> Read:
        """The reader of one value of `shape` (not None)."""
        if isinstance(shape, MessageShape):
            return self.message(shape)
        if isinstance(shape, ListOf):
            item = self.value(shape.item)
            if item is _one:
                return _count
            return lambda values: sum(map(item, values))
        if isinstance(shape, MapOf):
            entry = self.value(shape.value)
            if entry is _one:
                return _count_entries
            return lambda entries: sum(map(entry, dict(entries).values()))
        if isinstance(shape, UnionOf):
            return self._union(shape)
        return self._converter(shape) or _one

    def _union(self, shape: UnionOf) -> Read:
        """The reader of a union's value: the member it is, read as that member."""
        readers = [self.value(m) for m in shape.members]
        if self._proto:  # the oneof wrapper (`schemas.derive.proto_file`)
            by_name = dict(zip(member_names(shape), readers, strict=True))

            def read_case(wrapper: Any) -> int:
                name = wrapper.WhichOneof(UNION_ONEOF)
                return 1 if name is None else by_name[name](getattr(wrapper, name))

            return read_case
        if shape.tag_field is not None:
            by_tag = dict(zip(union_tags(shape), readers, strict=True))
            tag = attrgetter(shape.tag_field)
            return lambda value: by_tag[tag(value)](value)
        by_class = {
            m.name: r
            for m, r in zip(shape.members, readers, strict=True)
            if isinstance(m, MessageShape)
        }
        if not by_class:
            return _one
        return lambda value: by_class.get(type(value).__name__, _one)(value)


_CONVERTERS: Final[dict[str, Read]] = {
    "datetime": _timestamp,
    "uuid": _uuid,
    "decimal": _decimal,
}
