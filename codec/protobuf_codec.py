"""The protobuf codec: generated classes on the upb backend.

upb parses lazily: `FromString` is cheap and reading fields costs the rest, so the
business logic must touch the fields it needs for a fair comparison (DESIGN.md).
The codec returns the generated message itself, never a `MessageToDict` copy.
"""

from __future__ import annotations

import base64
import datetime
from typing import Any, Generic, TypeVar

import msgspec
from google.protobuf import descriptor_pb2, json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.internal import api_implementation
from google.protobuf.message import Message

from codec.base import PROTOBUF, as_encode_error, safe_decode
from codec.protobuf_unions import Wrapping, is_wrapper, member_of
from schemas.shape import MessageShape, messages

P = TypeVar("P", bound=Message)


def protobuf_backend() -> str:
    """The protobuf runtime in use (`upb` for the wheels from the package index)."""
    return str(api_implementation.Type())


def _value_to_builtins(field: Any, value: Any) -> Any:
    """One value as JSON carries it: bytes as base64, a Timestamp as RFC 3339."""
    message_type = field.message_type
    if message_type is None:
        if field.type == FieldDescriptor.TYPE_BYTES:
            return base64.b64encode(value).decode()
        return value
    if message_type.full_name == "google.protobuf.Timestamp":
        return msgspec.to_builtins(value.ToDatetime(tzinfo=datetime.UTC))
    if is_wrapper(message_type):  # a union: its member, as the other codecs hold it
        name, member = member_of(value)
        if name is None:
            return None
        return _value_to_builtins(message_type.fields_by_name[name], member)
    return message_to_builtins(value)


def _field_to_builtins(msg: Message, field: Any) -> Any:
    value = getattr(msg, field.name)
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        value_field = field.message_type.fields_by_name["value"]
        return {k: _value_to_builtins(value_field, v) for k, v in value.items()}
    if field.is_repeated:
        return [_value_to_builtins(field, v) for v in value]
    if field.containing_oneof is not None and not msg.HasField(field.name):
        return None  # an unset `optional` field
    return _value_to_builtins(field, value)


def message_to_builtins(msg: Message) -> dict[str, Any]:
    """Every field of `msg` (defaults included) as dicts, lists and scalars.

    Unlike `MessageToDict`, 64-bit integers stay `int` and names stay as declared
    (a `json_name` given in the file, a derived alias, is the key instead), so the
    output compares equal to msgspec's and pydantic's. Maps become dicts, an unset
    `optional` field None, bytes standard base64 and a Timestamp RFC 3339 text
    (what `msgspec.to_builtins` gives for the same values).
    """
    descriptor = msg.DESCRIPTOR
    keys = _KEYS.get(descriptor)
    if keys is None:
        keys = _KEYS[descriptor] = _wire_keys(descriptor)
    return {
        key: _field_to_builtins(msg, f)
        for key, f in zip(keys, descriptor.fields, strict=True)
    }


_KEYS: dict[Any, tuple[str, ...]] = {}
"""Each message descriptor's wire keys, in field order (computed once)."""


def _wire_keys(descriptor: Any) -> tuple[str, ...]:
    """The field names, or the `json_name` where the file sets one explicitly."""
    proto = descriptor_pb2.DescriptorProto()
    descriptor.CopyToProto(proto)
    return tuple(
        f.json_name if f.HasField("json_name") else f.name for f in proto.field
    )


class ProtobufCodec(Generic[P]):
    """`Message.FromString` / `SerializeToString` of one generated class.

    `shape`, when given, is the message's shape: its unions are wrapped into their
    oneof messages by `from_builtins` (`codec.protobuf_unions`).
    """

    name = "protobuf"
    content_type = PROTOBUF

    def __init__(self, message: type[P], shape: MessageShape | None = None) -> None:
        self._message = message
        self._wrap = None if shape is None else Wrapping().value(shape)
        # Unknown keys (an `extra="allow"` model writes its extras) are read past
        # and dropped, as the derived message's decoder does, unless the schema
        # forbids them.
        self._lenient = shape is not None and not all(
            m.forbid_unknown for m in messages(shape)
        )
        self.native_type = message
        self.decode_unchecked = message.FromString

    def decode(self, data: bytes, /) -> P:
        return safe_decode(self.name, self.decode_unchecked, data)

    def encode(self, obj: P, /) -> bytes:
        try:
            return obj.SerializeToString()
        except Exception as exc:
            raise as_encode_error(self.name, exc) from exc

    def to_builtins(self, obj: P, /) -> dict[str, Any]:
        return message_to_builtins(obj)

    def from_builtins(self, data: dict[str, Any], /) -> P:
        if self._wrap is not None:
            data = self._wrap(data)
        return json_format.ParseDict(
            data, self._message(), ignore_unknown_fields=self._lenient
        )
