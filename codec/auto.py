"""The `auto` codec: one decoder per message, chosen by its `content-type` header.

For a topic that holds several encodings while producers migrate (zero-downtime codec
rollout). A message with no `content-type` decodes as JSON with the configured JSON
codec: producers that predate the migration are JSON producers that set no header.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from codec.base import (
    AVRO,
    CAPNP,
    FLATBUFFERS,
    JSON,
    MSGPACK,
    PROTOBUF,
    Codec,
    as_encode_error,
    safe_decode,
)
from codec.convert import native_to_builtins
from schemas.errors import DecodeError

_ALIASES: Final[dict[str, str]] = {
    "application/json": JSON,
    "text/json": JSON,
    "application/vnd.msgpack": MSGPACK,
    "application/msgpack": MSGPACK,
    "application/x-msgpack": MSGPACK,
    "application/x-protobuf": PROTOBUF,
    "application/protobuf": PROTOBUF,
    "application/vnd.google.protobuf": PROTOBUF,
    "application/x-flatbuffers": FLATBUFFERS,
    "application/flatbuffers": FLATBUFFERS,
    "application/x-capnp": CAPNP,
    "application/capnp": CAPNP,
    "application/avro": AVRO,
    "avro/binary": AVRO,
    "application/vnd.apache.avro+binary": AVRO,
}


class AutoCodec:
    """Decode with the codec the `content-type` header names; encode with one codec.

    Args:
        by_content_type: the codec for each canonical content type (JSON,
            MessagePack, protobuf, and FlatBuffers, Cap'n Proto and Avro when the
            schema has their forms).
        output: the codec `encode` writes with; objects of another codec's native
            type are converted first.
    """

    name = "auto"

    def __init__(self, by_content_type: Mapping[str, Codec[Any]], output: Codec[Any]):
        self._json = by_content_type[JSON]
        self._output = output
        self.content_type = output.content_type
        self.native_type = output.native_type
        self.decode_unchecked = self._json.decode_unchecked
        self._exact: dict[bytes, Codec[Any]] = {
            alias.encode(): by_content_type[canonical]
            for alias, canonical in _ALIASES.items()
            if canonical in by_content_type  # a format the schema cannot take: left out
        }

    @property
    def output(self) -> Codec[Any]:
        """The codec `encode` writes with."""
        return self._output

    def codec_for(self, content_type: bytes | None) -> Codec[Any]:
        """The codec for a header value (None: no header); raise `DecodeError`."""
        if content_type is None:
            return self._json
        codec = self._exact.get(content_type)
        if codec is not None:
            return codec
        # Slow path: parameters (`; charset=utf-8`), case, spaces.
        base = content_type.split(b";", 1)[0].strip().lower()
        codec = self._exact.get(base)
        if codec is None:
            raise DecodeError(
                "unknown content-type", codec=self.name, reason="content_type"
            )
        return codec

    def decode(self, data: bytes, /) -> Any:
        return safe_decode(self.name, self.decode_unchecked, data)

    def decode_for(self, content_type: bytes | None, data: bytes) -> Any:
        """Decode `data` with the codec for `content_type`; raise `DecodeError`."""
        codec = self.codec_for(content_type)
        return safe_decode(codec.name, codec.decode_unchecked, data)

    def encode(self, obj: Any, /) -> bytes:
        """Encode with the output codec, converting another codec's object first.

        Raises:
            EncodeError: the object does not fit the output codec's type (a
                protobuf enum's 0 where the struct wants a named value) or does
                not encode.
        """
        try:
            native = self._convert(obj)
        except Exception as exc:
            raise as_encode_error(self.name, exc) from exc
        return self._output.encode(native)

    def to_builtins(self, obj: Any, /) -> dict[str, Any]:
        return native_to_builtins(obj)

    def from_builtins(self, data: dict[str, Any], /) -> Any:
        return self._output.from_builtins(data)

    def _convert(self, obj: Any) -> Any:
        if type(obj) is self.native_type:
            return obj
        return self._output.from_builtins(self.to_builtins(obj))
