"""msgspec codecs: typed JSON and MessagePack, decoding straight into Structs.

A user's Struct that carries a type as text (`IPv4Address`, `HttpUrl`...) gets
msgspec's `dec_hook`/`enc_hook` (`schemas.derive.msgspec_structs.hooks`): the value
is made at decode, as pydantic makes it; every other Struct gets none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import msgspec

from codec.base import JSON, MSGPACK, as_encode_error, safe_decode
from schemas.derive.msgspec_structs import hooks

S = TypeVar("S", bound=msgspec.Struct)


class _MsgspecCodec(Generic[S]):
    """Shared conversions; subclasses bind a decoder and an encoder."""

    name: str
    content_type: str
    decode_unchecked: Callable[[bytes], S]

    def __init__(self, struct: type[S]) -> None:
        self._struct = struct
        self.native_type = struct
        self._hooks = hooks(struct)

    def to_builtins(self, obj: S, /) -> dict[str, Any]:
        out: dict[str, Any] = msgspec.to_builtins(obj, enc_hook=self._hooks.enc_hook)
        return out

    def from_builtins(self, data: dict[str, Any], /) -> S:
        # str_keys: builtins as JSON has them hold an int or enum map key as text.
        return msgspec.convert(
            data, self._struct, dec_hook=self._hooks.dec_hook, str_keys=True
        )

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
        enc, dec = self._hooks
        self.decode_unchecked = msgspec.json.Decoder(struct, dec_hook=dec).decode
        self._encode = msgspec.json.Encoder(enc_hook=enc).encode

    def encode(self, obj: S, /) -> bytes:
        return self._encode_with(self._encode, obj)


class MsgspecMsgpackCodec(_MsgspecCodec[S]):
    """`msgspec.msgpack.Decoder(Struct)`: MessagePack, parsed and validated at once."""

    name = "msgspec-msgpack"
    content_type = MSGPACK

    def __init__(self, struct: type[S]) -> None:
        super().__init__(struct)
        enc, dec = self._hooks
        self.decode_unchecked = msgspec.msgpack.Decoder(struct, dec_hook=dec).decode
        self._encode = msgspec.msgpack.Encoder(enc_hook=enc).encode

    def encode(self, obj: S, /) -> bytes:
        return self._encode_with(self._encode, obj)
