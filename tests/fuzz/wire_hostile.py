"""Hostile FlatBuffers, Cap'n Proto and Avro buffers: valid messages with one lie each.

A zero-copy reader trusts offsets inside the buffer, so each case starts from a
valid `small` or `large` message of its format and breaks one thing: an offset
out of range, a vtable or segment table that lies, a length past the end, a
shared sub-object that would multiply the work, another schema's buffer. Every
one must be a `DecodeError` (never a garbage value, a hang or a crash).
"""

from __future__ import annotations

import functools
import struct

from codec import get_codec
from loadgen.payloads import make_payloads


def _valid(codec: str, schema: str) -> bytes:
    c = get_codec(codec, schema)  # type: ignore[arg-type]
    payload = make_payloads(schema, 1, seed=1, large_bytes=4_000)[0]  # type: ignore[arg-type]
    return c.encode(c.from_builtins(payload))


def _put(data: bytes, at: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


def _flatbuffers() -> dict[str, bytes]:
    small = _valid("flatbuffers", "small")
    root = struct.unpack_from("<I", small, 0)[0]
    vtable = root - struct.unpack_from("<i", small, root)[0]
    name_at = root + struct.unpack_from("<H", small, vtable + 6)[0]
    name = name_at + struct.unpack_from("<I", small, name_at)[0]
    tags_at = root + struct.unpack_from("<H", small, vtable + 8)[0]
    tags = tags_at + struct.unpack_from("<I", small, tags_at)[0]
    large = _valid("flatbuffers", "large")
    return {
        "fb-root-out-of-range": _put(small, 0, "<I", 0xFFFFFFF0),
        "fb-root-negative-table": _put(small, 0, "<I", len(small) - 2),
        "fb-vtable-out-of-range": _put(small, root, "<i", -0x7FFFFFFF),
        "fb-vtable-huge-size": _put(small, vtable, "<H", 0xFFFF),
        "fb-table-huge-size": _put(small, vtable + 2, "<H", 0xFFFF),
        "fb-field-past-table": _put(small, vtable + 4, "<H", 0xFFF0),
        "fb-string-huge-length": _put(small, name, "<I", 0xFFFFFFFF),
        "fb-string-no-nul": _put(small, name, "<I", len(small) - name - 4),
        "fb-string-bad-utf8": _put(small, name + 4, "<B", 0xFF),
        "fb-vector-huge-length": _put(small, tags, "<I", 0x3FFFFFFF),
        "fb-offset-past-end": _put(small, tags_at, "<I", 0x7FFFFFFF),
        "fb-required-missing": _put(small, vtable + 6, "<H", 0),
        "fb-wrong-schema": large,
        "fb-wrong-schema-spoofed": large[:4] + small[4:8] + large[8:],
        "fb-truncated": small[: len(small) // 2],
        "fb-shared-tables": _shared_tables(),
        "fb-shared-string": shared_string_message(20_000, 64 << 10),
        "fb-zero-offset": _put(small, tags_at, "<I", 0),
        "fb-root-zero-offset": _put(small, 0, "<I", 0),
        "fb-unaligned-field": _put(small, vtable + 8, "<H", tags_at - root + 2),
        "fb-unaligned-vector": _put(small, tags_at, "<I", tags - tags_at + 2),
    }


def shared_string_message(refs: int, size: int) -> bytes:
    """A `small` FlatBuffers Payload whose `tags` vector holds `refs` offsets to one
    string of `size` bytes: valid per flatc, and `refs * size` bytes to a reader
    that decodes per reference (issue 30: 500,000 x 2 MiB in 4.0 MB)."""
    import numpy as np

    identifier = get_codec("flatbuffers", "small").form.identifier.encode()  # type: ignore[attr-defined]
    table, vtable = 24, 8  # a vtable of 4 slots at 8, the table at 24 (id 8-aligned)
    tags = 60  # after the table (24 bytes), name "x" (8) and empty metrics (4)
    string = tags + 4 + 4 * refs
    out = bytearray()
    out += struct.pack("<I4s", table, identifier)
    out += struct.pack("<6H", 12, 24, 8, 4, 16, 20)  # vtable: id, name, tags, metrics
    out += b"\0" * 4
    out += struct.pack("<iIqII", table - vtable, 48 - 28, 3, tags - 40, 56 - 44)
    out += struct.pack("<I2s2x", 1, b"x")  # name at 48
    out += struct.pack("<I", 0)  # metrics at 56
    out += struct.pack("<I", refs)  # tags at 60
    items = tags + 4 + 4 * np.arange(refs, dtype=np.int64)
    out += (string - items).astype("<u4").tobytes()
    out += struct.pack("<I", size) + b"a" * size + b"\0"
    out += b"\0" * (-len(out) % 4)
    return bytes(out)


def _shared_tables() -> bytes:
    """A `large` plan whose vehicles all point at one vehicle whose stops all point
    at one stop: k*k tables reachable from ~8k bytes (the verifier's budget)."""
    import flatbuffers

    from schemas.derive.fbs_schema import flatbuffers_form
    from schemas.registry import SCHEMAS
    from schemas.wire_shape import shape_of

    form = flatbuffers_form(shape_of(SCHEMAS["large"]))
    b = flatbuffers.Builder(1024)
    k = 2_000
    kind = b.CreateString("drop")
    b.StartObject(3)
    b.PrependUOffsetTRelativeSlot(2, kind, 0)
    stop = b.EndObject()
    b.StartVector(4, k, 4)
    for _ in range(k):
        b.PrependUOffsetTRelative(stop)
    stops = b.EndVector()
    shift, path = (
        b.CreateString("am"),
        b.CreateNumpyVector(__import__("numpy").zeros(1)),
    )
    b.StartObject(5)
    b.PrependUOffsetTRelativeSlot(1, shift, 0)
    b.PrependUOffsetTRelativeSlot(3, path, 0)
    b.PrependUOffsetTRelativeSlot(4, stops, 0)
    vehicle = b.EndObject()
    b.StartVector(4, k, 4)
    for _ in range(k):
        b.PrependUOffsetTRelative(vehicle)
    vehicles = b.EndVector()
    plan_id, costs = (
        b.CreateString("p"),
        b.CreateNumpyVector(__import__("numpy").zeros(1)),
    )
    b.StartObject(7)
    b.PrependUOffsetTRelativeSlot(0, plan_id, 0)
    b.PrependUOffsetTRelativeSlot(5, costs, 0)
    b.PrependUOffsetTRelativeSlot(6, vehicles, 0)
    b.Finish(b.EndObject(), file_identifier=form.identifier.encode())
    return bytes(b.Output())


def _capnp() -> dict[str, bytes]:
    small = _valid("capnp", "small")
    large = _valid("capnp", "large")
    root = 8  # one segment: the root pointer is the segment's first word
    zero_sized = (
        small[:8]
        # a root struct whose `tags` list says 2**29 - 1 elements of zero size
        + _put(
            small[8:], 8 + 8 * 3, "<Q", (((2**29 - 1) << 35) | (7 << 32) | 1 << 2) | 1
        )
    )
    return {
        "capnp-too-many-segments": _put(small, 0, "<I", 0xFFFFFFFF),
        "capnp-segment-size-lies": _put(small, 4, "<I", 0x7FFFFFFF),
        "capnp-segment-size-short": _put(small, 4, "<I", 1),
        "capnp-root-out-of-bounds": _put(small, root, "<Q", 0x1000 << 2 | 1 << 32),
        "capnp-root-far-nowhere": _put(small, root, "<Q", 2 | (7 << 32)),
        # offset -1, 0 data words, 2 pointers: the struct's pointers are its own
        "capnp-root-self-cycle": _put(small, root, "<Q", 0xFFFFFFFC | 2 << 48),
        "capnp-root-is-a-list": _put(small, root, "<Q", 1 | (5 << 32) | (1000 << 35)),
        "capnp-lying-list": zero_sized,
        "capnp-wrong-schema": large,
        "capnp-truncated": small[: len(small) // 2],
    }


_SMALL_TAIL = b"\x02x\x00\x00"
"""A `small` Avro Payload after its `id`: name "x", no tags, no metrics."""


def _avro() -> dict[str, bytes]:
    small = _valid("avro", "small")
    return {
        "avro-huge-string": b"\x02" + b"\xfe\xff\xff\xff\x0f" + b"x",
        "avro-negative-string": b"\x02\x01x",
        "avro-huge-array": b"\x02\x00" + b"\xfe\xff\xff\xff\xff\xff\xff\xff\x7f",
        "avro-negative-block": b"\x02\x00\x01\xfe\xff\xff\xff\x0f\x00",
        "avro-overlong-varint": b"\xff" * 20,
        # the issue's longs (`small`'s id), each a value to fastavro alone
        "avro-long-20-bytes": b"\x80" * 19 + b"\x01" + _SMALL_TAIL,
        "avro-long-11-bytes": b"\x80" * 10 + b"\x01" + _SMALL_TAIL,
        "avro-long-past-64-bits": b"\xff" * 9 + b"\x7f" + _SMALL_TAIL,
        "avro-long-zigzag-2-64": b"\x80" * 9 + b"\x02" + _SMALL_TAIL,
        "avro-trailing-bytes": small + b"\x00",
        "avro-truncated": small[:-2],
    }


@functools.cache
def wire_hostile() -> dict[str, bytes]:
    """Every hostile buffer of the three formats, by name."""
    return {**_flatbuffers(), **_capnp(), **_avro()}
