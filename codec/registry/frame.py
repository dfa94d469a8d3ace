"""The Confluent wire frame: what precedes a value written through a schema registry.

```
magic 0 | schema id (4 bytes, big-endian) | [protobuf: message indexes] | payload
magic 1 | schema GUID (16 bytes)          | [protobuf: message indexes] | payload
```

Protobuf's message indexes are a zigzag-varint count, then that many zigzag-varint
indexes (the path to the message inside the registered file); the common `[0]` (the
file's first message) is written as a single 0 byte. confluent-kafka 2.x can also
leave the value unframed and put the header (magic, id or GUID, protobuf's indexes) in
a `__value_schema_id` message header (`SCHEMA_ID_HEADER`): the worker reads it only
when a framed decode fails (see `FramedCodec.decode_headed`).
"""

from __future__ import annotations

from typing import Final

from schemas.errors import DecodeError

MAGIC_ID: Final = 0
MAGIC_GUID: Final = 1
ID_HEADER: Final = 5
"""Magic byte plus a 4-byte id."""
GUID_HEADER: Final = 17
"""Magic byte plus a 16-byte GUID."""
SCHEMA_ID_HEADER: Final = "__value_schema_id"
"""The message header confluent-kafka's `header_schema_id_serializer` writes: the
frame's header (magic 1 and a GUID as it writes it; magic 0 and an id read too, as
its `dual_schema_id_deserializer` reads them), protobuf's indexes after it."""
_MAX_INDEXES: Final = 64
"""More message indexes than any real nesting: a garbage count is refused early."""


def frame_error(codec: str, text: str) -> DecodeError:
    """A value that is not a Confluent frame (reason `frame`)."""
    return DecodeError(text, codec=codec, reason="frame")


def schema_ref(data: bytes, codec: str) -> tuple[int | str, int]:
    """The schema reference of a framed value and where the rest starts.

    Returns:
        (the id, or the GUID as 32 hex digits; the offset after the header).

    Raises:
        DecodeError: reason `frame`: too short, or a magic byte other than 0 or 1.
    """
    if len(data) >= ID_HEADER and data[0] == MAGIC_ID:
        return int.from_bytes(data[1:ID_HEADER], "big"), ID_HEADER
    if not data:
        raise frame_error(codec, "empty value: no Confluent frame")
    if data[0] == MAGIC_GUID:
        if len(data) < GUID_HEADER:
            raise frame_error(codec, f"frame too short: {len(data)} bytes, magic 1")
        return data[1:GUID_HEADER].hex(), GUID_HEADER
    if data[0] == MAGIC_ID:
        raise frame_error(codec, f"frame too short: {len(data)} bytes, magic 0")
    raise frame_error(codec, f"wrong magic byte {data[0]} (a frame starts with 0 or 1)")


def _varint(data: bytes, pos: int, codec: str) -> tuple[int, int]:
    shift = result = 0
    while pos < len(data) and shift < 64:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos  # zigzag
        shift += 7
    raise frame_error(codec, "message indexes cut short")


def message_indexes(data: bytes, pos: int, codec: str) -> tuple[tuple[int, ...], int]:
    """Protobuf's message indexes at ``pos``; a single 0 byte means ``(0,)``.

    Raises:
        DecodeError: reason `frame`: cut short, negative or absurd.
    """
    if pos < len(data) and data[pos] == 0:
        return (0,), pos + 1
    count, pos = _varint(data, pos, codec)
    if not 0 < count <= _MAX_INDEXES:
        raise frame_error(codec, f"message index count {count} out of range")
    out = []
    for _ in range(count):
        index, pos = _varint(data, pos, codec)
        if index < 0:
            raise frame_error(codec, f"negative message index {index}")
        out.append(index)
    return tuple(out), pos


def _zigzag(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def id_header(schema_id: int) -> bytes:
    """The magic-0 header of schema ``schema_id``."""
    return bytes([MAGIC_ID]) + schema_id.to_bytes(4, "big")


def indexes_bytes(indexes: tuple[int, ...]) -> bytes:
    """Message indexes as written after the header (``(0,)`` as one 0 byte)."""
    if indexes == (0,):
        return b"\x00"
    return _zigzag(len(indexes)) + b"".join(_zigzag(i) for i in indexes)
