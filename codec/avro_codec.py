"""The Avro codec: fastavro's schemaless binary, one record per message.

The Avro schema is derived from the message's shape (`schemas.to_avro`); there is
no container file and no schema registry framing, so a message is the record's
bytes alone (what Kafka producers with a fixed, agreed schema send). fastavro reads
into dicts; the codec converts them into the schema's msgspec Struct, so the
business logic reads attributes as it does on every other codec and `decode`
returns a typed, fully read object (an eager format: nothing is left to read later).
"""

from __future__ import annotations

import datetime
import io
from typing import Any, Final, Generic, TypeVar

import fastavro
import msgspec

from codec.base import AVRO, MalformedBuffer, as_encode_error, safe_decode
from schemas.shape import MessageShape
from schemas.to_avro import avro_schema

S = TypeVar("S", bound=msgspec.Struct)

_KEEP: Final = (bytes, datetime.datetime)
"""Types `msgspec.to_builtins` passes through as they are: fastavro writes them."""


class AvroCodec(Generic[S]):
    """`fastavro.schemaless_reader` / `schemaless_writer` on the derived schema."""

    name = "avro"
    content_type = AVRO

    def __init__(self, struct: type[S], shape: MessageShape) -> None:
        self._struct = struct
        self.native_type = struct
        self.schema = avro_schema(shape)
        parsed = fastavro.parse_schema(self.schema)
        read = fastavro.schemaless_reader
        convert = msgspec.convert
        bytes_io = io.BytesIO

        def decode_unchecked(data: bytes) -> S:
            stream = bytes_io(data)
            record = read(stream, parsed, None)
            if stream.tell() != len(data):
                raise MalformedBuffer("trailing bytes after the Avro record")
            return convert(record, struct, str_keys=True)

        self.decode_unchecked = decode_unchecked
        self._parsed = parsed

    def decode(self, data: bytes, /) -> S:
        return safe_decode(self.name, self.decode_unchecked, data)

    def encode(self, obj: S, /) -> bytes:
        try:
            record = msgspec.to_builtins(obj, builtin_types=_KEEP, str_keys=True)
            stream = io.BytesIO()
            fastavro.schemaless_writer(stream, self._parsed, record)
        except Exception as exc:
            raise as_encode_error(self.name, exc) from exc
        return stream.getvalue()

    def to_builtins(self, obj: S, /) -> dict[str, Any]:
        out: dict[str, Any] = msgspec.to_builtins(obj)
        return out

    def from_builtins(self, data: dict[str, Any], /) -> S:
        return msgspec.convert(data, self._struct)
