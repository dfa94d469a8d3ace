"""The Avro codec: fastavro's schemaless binary, one record per message.

The Avro schema is derived from the message's shape (`schemas.derive.avro_schema`); there is
no container file and no schema registry framing, so a message is the record's
bytes alone (what Kafka producers with a fixed, agreed schema send). fastavro reads
into dicts; the codec converts them into the schema's msgspec Struct, so the
business logic reads attributes as it does on every other codec and `decode`
returns a typed, fully read object (an eager format: nothing is left to read later).
Converting checks what msgspec checks (enum values, bounds, lengths, patterns,
UUID and Decimal values), so Avro skips what msgspec skips (`schemas.user.skipped_checks`).
A UUID is written and read as fastavro's `uuid.UUID`; a Decimal as a `Decimal`
where the schema has the `decimal` logical type, as its text where it has a
`string` (`schemas.derive.avro_schema` says when); a date as fastavro's
`datetime.date` (the `date` logical type). An untagged union's member is written
and read by its record name (`codec.record_names`).
"""

from __future__ import annotations

import datetime
import decimal
import io
import uuid
from typing import Any, Final, Generic, TypeVar

import fastavro
import msgspec

from codec.avro_exact import walker
from codec.base import AVRO, MalformedBuffer, as_encode_error, safe_decode
from codec.record_names import branch_reader, branch_writer
from codec.shape_fixes import Fix, ShapeFixes
from schemas.derive.avro_schema import avro_schema, logical_decimal
from schemas.derive.msgspec_structs import hooks
from schemas.shape import MessageShape, Scalar, TypeShape

S = TypeVar("S", bound=msgspec.Struct)

_KEEP: Final = (bytes, datetime.datetime, datetime.date, uuid.UUID, decimal.Decimal)
"""Types `msgspec.to_builtins` passes through as they are: fastavro writes them."""


class AvroCodec(Generic[S]):
    """`fastavro.schemaless_reader` / `schemaless_writer` on the derived schema."""

    name = "avro"
    content_type = AVRO

    def __init__(self, struct: type[S], shape: MessageShape) -> None:
        self._struct = struct
        self.native_type = struct
        self.shape = shape
        self.schema = avro_schema(shape)
        parsed = fastavro.parse_schema(self.schema)
        read = fastavro.schemaless_reader
        convert = msgspec.convert
        self._hooks = carried = hooks(struct)
        dec_hook = carried.dec_hook
        bytes_io = io.BytesIO
        exact = walker(self.schema)
        names = branch_reader(shape)  # None for a schema with no untagged union

        def decode_unchecked(data: bytes) -> S:
            exact(data)  # fastavro reads malformed varints as wrong values
            stream = bytes_io(data)
            record = read(stream, parsed, None)
            if stream.tell() != len(data):
                raise MalformedBuffer("trailing bytes after the Avro record")
            return convert(record, struct, str_keys=True, dec_hook=dec_hook)

        self.decode_unchecked = decode_unchecked
        if names is not None:
            named = names

            def decode_named(data: bytes) -> S:
                exact(data)
                stream = bytes_io(data)
                record = read(stream, parsed, None, True, True)  # record names
                if stream.tell() != len(data):
                    raise MalformedBuffer("trailing bytes after the Avro record")
                return convert(named(record), struct, str_keys=True, dec_hook=dec_hook)

            self.decode_unchecked = decode_named
        self._branches = branch_writer(shape)
        self._parsed = parsed
        self._text_decimals = _TextDecimals().value(shape)

    def decode(self, data: bytes, /) -> S:
        return safe_decode(self.name, self.decode_unchecked, data)

    def encode(self, obj: S, /) -> bytes:
        try:
            record = msgspec.to_builtins(
                obj, builtin_types=_KEEP, str_keys=True, enc_hook=self._hooks.enc_hook
            )
            if self._text_decimals is not None:
                record = self._text_decimals(record)
            if self._branches is not None:  # an untagged union's member, by name
                record = self._branches(obj, record)
            stream = io.BytesIO()
            fastavro.schemaless_writer(stream, self._parsed, record)
        except Exception as exc:
            raise as_encode_error(self.name, exc) from exc
        return stream.getvalue()

    def to_builtins(self, obj: S, /) -> dict[str, Any]:
        out: dict[str, Any] = msgspec.to_builtins(obj, enc_hook=self._hooks.enc_hook)
        return out

    def from_builtins(self, data: dict[str, Any], /) -> S:
        return msgspec.convert(
            data, self._struct, dec_hook=self._hooks.dec_hook, str_keys=True
        )


class _TextDecimals(ShapeFixes):
    """Turns the Decimals of `string`-typed Decimal fields into their text.

    `value` returns None for a shape without such a field, so the common schema
    (no Decimal, or every Decimal bounded) pays nothing for it on encode.
    """

    in_place = True  # the tree is the encoder's own (`to_builtins`)

    def leaf(self, shape: TypeShape) -> Fix | None:
        if isinstance(shape, Scalar) and shape.kind == "decimal":
            return None if logical_decimal(shape) else str
        return None
