"""msgspec codecs: typed JSON and MessagePack, decoding straight into Structs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import msgspec

from codec.base import JSON, MSGPACK, as_encode_error, safe_decode

S = TypeVar("S", bound=msgspec.Struct)


class _MsgspecCodec(Generic[S]):
    """Shared conversions; subclasses bind a decoder and an encoder."""

    name: str
    content_type: str
    decode_unchecked: Callable[[bytes], S]

    def __init__(self, struct: type[S]) -> None:
        self._struct = struct
        self.native_type = struct

    def to_builtins(self, obj: S, /) -> dict[str, Any]:
        out: dict[str, Any] = msgspec.to_builtins(obj)
        return out

    def from_builtins(self, data: dict[str, Any], /) -> S:
        return msgspec.convert(data, self._struct)

    def decode(self, data: bytes, /) -> S:
        return safe_decode(self.name, self.decode_unchecked, data)

    def _encode_with(self, encode: Any, obj: S) -> bytes:
        try:
            out: bytes = encode(obj)
        except Exception as exc:
            raise as_encode_error(self.name, exc) from exc
        return out


class MsgspecJsonCodec(_MsgspecCodec[S]):
    """`msgspec.json.Decoder(Struct)`: parse and validate in one pass."""

    name = "msgspec-json"
    content_type = JSON

    def __init__(self, struct: type[S]) -> None:
        super().__init__(struct)
        self.decode_unchecked = msgspec.json.Decoder(struct).decode
        self._encode = msgspec.json.Encoder().encode

    def encode(self, obj: S, /) -> bytes:
        return self._encode_with(self._encode, obj)


class MsgspecMsgpackCodec(_MsgspecCodec[S]):
    """`msgspec.msgpack.Decoder(Struct)`: MessagePack, parsed and validated at once."""

    name = "msgspec-msgpack"
    content_type = MSGPACK

    def __init__(self, struct: type[S]) -> None:
        super().__init__(struct)
        self.decode_unchecked = msgspec.msgpack.Decoder(struct).decode
        self._encode = msgspec.msgpack.Encoder().encode

    def encode(self, obj: S, /) -> bytes:
        return self._encode_with(self._encode, obj)
