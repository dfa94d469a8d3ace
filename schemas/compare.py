"""Decoded objects of any form read field by field, and their differences by path.

`read_native` reads a decoded msgspec Struct, pydantic model or protobuf message the
way business logic does, by attribute, guided by the schema's shape, into plain
values: a dict per message, lists, dicts, and the leaves as decoded. Two codecs agree
when those compare equal leaf by leaf (`diff`): an enum member equals its value only
if it is a str or int Enum, which is why plain Enums are refused. protobuf's own
wrappers are the only values converted: a Timestamp becomes an aware UTC datetime, an
unset `optional` field None, a repeated field a list, a map a dict, and the strings
that carry UUIDs, Decimals, addresses and URLs become `uuid.UUID`, `Decimal` and
the user's type again (text that is not one stays text, so it differs from the
other codecs' value). A set decodes to a set, compared as one; a tuple reads as a
list; a union's value is read with the member it is (by the tag, else by class
name); protobuf's is the member its oneof wrapper holds.
"""

from __future__ import annotations

import datetime
import decimal
import json
import uuid
from collections.abc import Callable
from typing import Any, Final

import msgspec
import pydantic_core
from google.protobuf.message import Message

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
)
from schemas.unions import UNION_ONEOF, member_names

_MAX_REPR: Final = 60


def read_native(obj: Any, shape: MessageShape) -> dict[str, Any]:
    """The fields of a decoded object as plain values (see the module docstring)."""
    proto = isinstance(obj, Message)
    return {f.name: _read_field(obj, f, proto) for f in shape.fields}


def wire_keyed(values: dict[str, Any], shape: MessageShape) -> dict[str, Any]:
    """`read_native` output keyed as the wires key it (aliases), for `from_builtins`;
    a type carried as text (`IPv4Address`, `HttpUrl`...) as its text."""
    return {f.wire: _rekey(values.get(f.name), f.type) for f in shape.fields}


def _rekey(value: Any, shape: TypeShape) -> Any:
    if value is None:
        return None
    if isinstance(shape, MessageShape):
        return wire_keyed(value, shape)
    if isinstance(shape, UnionOf):
        member = _member_of_read(value, shape)
        return value if member is None else _rekey(value, member)
    if isinstance(shape, TupleOf):
        return [_rekey(v, s) for v, s in zip(value, shape.items, strict=False)]
    if isinstance(shape, ListOf):
        return [_rekey(v, shape.item) for v in value]
    if isinstance(shape, MapOf):
        return {k: _rekey(v, shape.value) for k, v in value.items()}
    if isinstance(shape, Foreign) and shape.text is not None:
        return str(value)  # its text, as the wires carry it (`schemas.carried`)
    if isinstance(shape, Scalar) and shape.holds is not None:
        return held_text(value, shape)
    return value


def _read_field(obj: Any, f: FieldShape, proto: bool) -> Any:
    if proto and f.nullable and not obj.HasField(f.name):
        return None
    value = getattr(obj, f.name)
    return None if value is None else _read(value, f.type, proto)


def _read(value: Any, shape: TypeShape, proto: bool) -> Any:
    if isinstance(shape, MessageShape):
        return read_native(value, shape)
    if proto and isinstance(shape, UnionOf):  # the oneof wrapper: its set member
        name = value.WhichOneof(UNION_ONEOF)
        if name is None:
            return None
        case = shape.members[member_names(shape).index(name)]
        return _read(getattr(value, name), case, proto)
    if isinstance(shape, UnionOf):
        member = _member_of(value, shape)
        return value if member is None else _read(value, member, proto)
    if isinstance(shape, TupleOf):
        return [_read(v, s, proto) for v, s in zip(value, shape.items, strict=False)]
    if isinstance(shape, ListOf) and shape.container in ("set", "frozenset"):
        return frozenset(_read(v, shape.item, proto) for v in value)
    if isinstance(shape, ListOf):
        return [_read(v, shape.item, proto) for v in value]
    if isinstance(shape, MapOf):
        return {k: _read(v, shape.value, proto) for k, v in value.items()}
    if isinstance(shape, Scalar) and shape.holds is not None:
        return held_value(value, shape)
    if proto and isinstance(shape, Foreign) and shape.text is not None:
        try:
            return shape.text(value)
        except ValueError:
            return value
    if proto and isinstance(shape, Scalar):
        if shape.kind == "datetime":
            return value.ToDatetime(tzinfo=datetime.UTC)
        convert = FROM_TEXT.get(shape.kind)
        if convert is not None:
            try:
                return convert(value)
            except (ValueError, ArithmeticError):
                return value
    return value


def _member_of(value: Any, shape: UnionOf) -> TypeShape | None:
    """The message member a decoded union value is (None: not a message)."""
    messages = [m for m in shape.members if isinstance(m, MessageShape)]
    if not messages or value is None:
        return None
    if shape.tag_field is not None:
        tag = getattr(value, shape.tag_field, None)
        for member, value_tag in _tags(shape):
            if tag == value_tag or getattr(tag, "value", None) == value_tag:
                return member
    name = type(value).__name__
    return next((m for m in messages if m.name == name), None)


def _tags(shape: UnionOf) -> list[tuple[MessageShape, Any]]:
    """Each member of a tagged union with its tag value (`schemas.unions.union_tags`)."""
    out = []
    for member in shape.members if shape.tag_field else ():
        if isinstance(member, MessageShape):
            tag = next(f.type for f in member.fields if f.name == shape.tag_field)
            if isinstance(tag, Choice):
                out.append((member, tag.values[0]))
    return out


def _member_of_read(value: Any, shape: UnionOf) -> TypeShape | None:
    """The message member a `read_native` dict of a union value was read with."""
    if not isinstance(value, dict):
        return None
    for member, tag in _tags(shape):
        if value.get(shape.tag_field) == tag:
            return member
    messages = [m for m in shape.members if isinstance(m, MessageShape)]
    keys = set(value)
    return next((m for m in messages if {f.name for f in m.fields} == keys), None)


def _same_keys(value: Any, shape: UnionOf, first: TypeShape) -> list[MessageShape]:
    """The other message members a read dict's keys fit (an untagged union's
    members may share field names: the values tell them apart)."""
    keys = set(value) if isinstance(value, dict) else set()
    return [
        m
        for m in shape.members
        if isinstance(m, MessageShape)
        and m is not first
        and {f.name for f in m.fields} == keys
    ]


def held_value(value: Any, shape: Scalar) -> Any:
    """What a text the wire carries (a derived form's `str`) and the model's value
    (a parsed `Json[X]`, a `SecretStr`) have in common: the JSON value parsed, as
    JSON holds it, or the secret's text."""
    if shape.holds == "json":
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                return value
        return pydantic_core.to_jsonable_python(value)
    secret = getattr(value, "get_secret_value", None)
    if secret is not None:
        value = secret()
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def held_text(value: Any, shape: Scalar) -> str:
    """The text the wire carries for a value `read_native` read (`held_value`)."""
    if isinstance(value, str):
        return value
    if shape.holds == "json":
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _timedelta(text: str) -> datetime.timedelta:
    try:
        return msgspec.convert(text, datetime.timedelta)
    except msgspec.ValidationError as exc:
        raise ValueError(str(exc)) from None


FROM_TEXT: Final[dict[str, Callable[[str], Any]]] = {
    "uuid": uuid.UUID,
    "decimal": decimal.Decimal,
    "date": datetime.date.fromisoformat,
    "time": datetime.time.fromisoformat,
    "timedelta": _timedelta,
}
"""The Python value of a string carrying a UUID, a Decimal or a date, time or
timedelta (the ISO 8601 text msgspec writes), by shape kind.

protobuf's strings are converted here; FlatBuffers' views convert theirs with the
same functions when a field is read; Cap'n Proto's and Avro's are converted into
the Struct by msgspec at decode (Avro's logical types read as the values already).
"""


def diff(
    expected: Any, actual: Any, shape: TypeShape | None, path: str
) -> list[tuple[str, str]]:
    """Every leaf where two read values differ, as (path, what differs).

    Args:
        expected: `read_native` output (or a part of it) of the reference codec.
        actual: the same of another codec.
        shape: the shape both were read with (None for a map's key set).
        path: the dotted path of this part (`Order.items[2].price`).
    """
    if isinstance(shape, MessageShape) and isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [(path, _pair(expected, actual))]
        return [
            d
            for f in shape.fields
            for d in diff(
                expected.get(f.name), actual.get(f.name), f.type, f"{path}.{f.name}"
            )
        ]
    if isinstance(shape, UnionOf):
        member = _member_of_read(expected, shape)
        if member is not None:
            found = diff(expected, actual, member, path)
            for other in _same_keys(expected, shape, member) if found else ():
                if not diff(expected, actual, other, path):
                    return []  # an untagged member with the same fields
            return found
    if isinstance(shape, TupleOf) and isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [(path, f"{_length(expected)} != {_length(actual)}")]
        return [
            d
            for i, (e, a, s) in enumerate(
                zip(expected, actual, shape.items, strict=True)
            )
            for d in diff(e, a, s, f"{path}[{i}]")
        ]
    if isinstance(shape, ListOf) and isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [(path, f"{_length(expected)} != {_length(actual)}")]
        return [
            d
            for i, (e, a) in enumerate(zip(expected, actual, strict=True))
            for d in diff(e, a, shape.item, f"{path}[{i}]")
        ]
    if isinstance(shape, MapOf) and isinstance(expected, dict):
        if not isinstance(actual, dict) or set(actual) != set(expected):
            return [(path, "keys " + _pair(_keys(expected), _keys(actual)))]
        return [
            d
            for k in expected
            for d in diff(expected[k], actual[k], shape.value, f"{path}[{k!r}]")
        ]
    if _same(expected, actual, shape):
        return []
    if isinstance(shape, Scalar) and shape.holds in ("secret", "secret-bytes"):
        return [(path, "the secret differs (not shown)")]
    return [(path, _pair(expected, actual))]


def _same(expected: Any, actual: Any, shape: TypeShape | None) -> bool:
    if isinstance(expected, bool) != isinstance(actual, bool):
        return False  # True == 1 in Python, but a bool field that decodes to 1 is wrong
    if isinstance(shape, MessageShape | MapOf | TupleOf):
        return expected is None and actual is None
    return bool(expected == actual)  # a leaf, a set, a union of leaves


def _keys(value: Any) -> Any:
    return sorted(value, key=repr) if isinstance(value, dict) else value


def _length(value: Any) -> str:
    return f"{len(value)} items" if isinstance(value, list) else _short(value)


def _pair(expected: Any, actual: Any) -> str:
    return f"{_short(expected)} != {_short(actual)}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_REPR else text[: _MAX_REPR - 3] + "..."
