"""The protobuf codec: generated classes on the upb backend.

upb parses lazily: `FromString` is cheap and reading fields costs the rest, so the
business logic must touch the fields it needs for a fair comparison (DESIGN.md).
The codec returns the generated message itself, never a `MessageToDict` copy.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from google.protobuf import json_format
from google.protobuf.internal import api_implementation
from google.protobuf.message import Message

from service.codecs.base import PROTOBUF, safe_decode
from service.errors import EncodeError

P = TypeVar("P", bound=Message)


def protobuf_backend() -> str:
    """The protobuf runtime in use (`upb` for the wheels from the package index)."""
    return str(api_implementation.Type())


def _field_to_builtins(field: Any, value: Any) -> Any:
    if field.message_type is None:
        return list(value) if field.is_repeated else value
    if field.is_repeated:
        return [message_to_builtins(v) for v in value]
    return message_to_builtins(value)


def message_to_builtins(msg: Message) -> dict[str, Any]:
    """Every field of `msg` (defaults included) as dicts, lists and scalars.

    Unlike `MessageToDict`, 64-bit integers stay `int` and names stay snake_case, so
    the output compares equal to msgspec's and pydantic's.
    """
    return {
        f.name: _field_to_builtins(f, getattr(msg, f.name))
        for f in msg.DESCRIPTOR.fields
    }


class ProtobufCodec(Generic[P]):
    """`Message.FromString` / `SerializeToString` of one generated class."""

    name = "protobuf"
    content_type = PROTOBUF

    def __init__(self, message: type[P]) -> None:
        self._message = message
        self.native_type = message
        self.decode_unchecked = message.FromString

    def decode(self, data: bytes, /) -> P:
        return safe_decode(self.name, self.decode_unchecked, data)

    def encode(self, obj: P, /) -> bytes:
        try:
            return obj.SerializeToString()
        except Exception as exc:
            raise EncodeError(
                type(exc).__name__, codec=self.name, reason="encode"
            ) from exc

    def to_builtins(self, obj: P, /) -> dict[str, Any]:
        return message_to_builtins(obj)

    def from_builtins(self, data: dict[str, Any], /) -> P:
        return json_format.ParseDict(data, self._message())
