"""Poison per codec (RELIABILITY P1-P3): bad bytes, hostile structures, oversize."""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from codec import Codec, CodecName, get_codec
from loadgen.payloads import make_payloads
from tests.faults.producer import Payload, Plan

MARKER: Final = "PII-M4RK3R-7f3a"
"""A payload value that must never reach a DLQ header, a log line or a label."""
DEPTH: Final = 100_000
BIG_BYTES: Final = 8 * 1024 * 1024
"""Twice the worker's default `max_payload_bytes`, under the broker's and the
topics' 16 MiB and the DLQ producer's limit (`fetch_max_bytes` + 64 KiB, 50 MiB
by default): dead-lettered whole, or (were a limit lower) without its value,
naming its size and sha256. P3 drives the dropped path on purpose."""
JSON_CODECS: Final = frozenset(
    {"json+pydantic", "json-stdlib+pydantic", "orjson+pydantic", "msgspec-json"}
)
_PROTOBUF_UNKNOWN_FIELD: Final = b"\xc0\x3e\x01"
"""Field 1000, varint 1: not in OrderEvent. protobuf keeps unknown fields
(forward compatibility), so this one is a good message for the protobuf codec."""


@dataclass(frozen=True, slots=True)
class Case:
    """One kind of poison and what the worker must do with it."""

    name: str
    value: bytes | None
    poison: bool = True
    """False: the codec accepts it by design (handled, not dead-lettered)."""
    droppable: bool = False
    reason: str | None = None
    """The `x-dlq-reason` its letter must carry (None: any)."""


def _encoded(codec: Codec[Any], data: dict[str, Any]) -> bytes:
    return codec.encode(codec.from_builtins(data))


def _rejects(codec: Codec[Any], value: bytes) -> bool:
    try:
        codec.decode(value)
    except Exception:  # any rejection will do: it is what makes the bytes poison
        return True
    return False


def _random_bytes(codec: Codec[Any], name: str) -> bytes:
    """Seeded random bytes the codec's own decoder rejects (the first of 100 seeds).

    Random bytes can happen to parse (protobuf reads many as unknown fields): a
    seed whose bytes parse would make a good message, not poison.
    """
    for seed in range(100):
        value = random.Random(f"{name}-{seed}").randbytes(300)
        if _rejects(codec, value):
            return value
    raise AssertionError(f"{name}: no seed gave undecodable random bytes")


def random_bytes(name: CodecName) -> bytes:
    """300 seeded random bytes codec `name` rejects."""
    return _random_bytes(get_codec(name, "medium"), name)


def _truncated(codec: Codec[Any], good: bytes) -> bytes:
    """The good encoding cut short where the codec rejects it (from the middle down)."""
    for cut in range(len(good) // 2, 0, -1):
        if _rejects(codec, good[:cut]):
            return good[:cut]
    raise AssertionError(f"{codec.name}: every prefix decodes")


def _deep(name: str) -> bytes:
    if name in JSON_CODECS:
        return b"[" * DEPTH + b"]" * DEPTH
    if name == "msgspec-msgpack":
        return b"\x91" * DEPTH + b"\xc0"  # fixarray of 1, 100k deep, then nil
    return b"\x0b" * DEPTH  # protobuf: start-group of field 1, 100k deep


def _wire_variants(name: str, codec: Codec[Any], data: dict[str, Any]) -> list[Case]:
    """Wrong type and unknown field, in the codec's own wire format."""
    if name == "protobuf":
        good = _encoded(codec, data)
        return [
            # Field 9 (customer) sent as a varint: upb keeps a wire-type mismatch as
            # an unknown field, so it decodes to an order without items: the
            # logic rejects it.
            Case("wrong type", b"\x48\x01"),
            Case("unknown field", good + _PROTOBUF_UNKNOWN_FIELD, poison=False),
        ]
    if name in _ZERO_COPY_LIES:
        good = _encoded(codec, data)
        small = get_codec(codec.name, "small")  # type: ignore[arg-type]
        other = small.encode(small.from_builtins(make_payloads("small", 1)[0]))
        return [
            Case("another schema's message", other),
            Case(_ZERO_COPY_LIES[name][0], _ZERO_COPY_LIES[name][1](good)),
            *_inexact(name, good),
        ]
    # Built from builtins: the codec's own types could not hold these shapes.
    raw = msgspec.msgpack.encode if name == "msgspec-msgpack" else msgspec.json.encode
    wrong = {**data, "customer": MARKER}
    unknown = {**data, "zz_unknown": MARKER}
    cases = [Case("wrong type", raw(wrong)), Case("unknown field", raw(unknown))]
    if name in JSON_CODECS:
        utf8 = raw(data).replace(b'"EUR"', b'"\xff\xfe"', 1)
        cases.append(Case("invalid UTF-8", utf8))
    return cases


def _lie(at: int, fmt: str, value: int) -> Callable[[bytes], bytes]:
    def lie(good: bytes) -> bytes:
        out = bytearray(good)
        struct.pack_into(fmt, out, at, value)
        return bytes(out)

    return lie


_ZERO_COPY_LIES: Final[dict[str, tuple[str, Callable[[bytes], bytes]]]] = {
    "flatbuffers": ("root offset out of range", _lie(0, "<I", 0xFFFFFFF0)),
    "capnp": ("root pointer out of bounds", _lie(8, "<Q", 0x1000 << 2 | 1 << 32)),
    "avro": ("string length past the end", lambda good: b"\xfe\xff\xff\xff\x0f" + good),
}
"""For the formats read by offset or length: one lie in a valid message each."""


def _inexact(name: str, good: bytes) -> list[Case]:
    """Issue 30's encodings that are not valid but decoded to a value before the
    exact checks: Avro longs past 10 bytes or 64 bits (in `occurred_at_ms`, the
    third field), a FlatBuffers offset of 0 (the first field's, pointing at itself).
    """
    if name == "flatbuffers":
        root = struct.unpack_from("<I", good, 0)[0]
        vtable = root - struct.unpack_from("<i", good, root)[0]
        first = root + struct.unpack_from("<H", good, vtable + 4)[0]
        return [Case("offset of 0", _lie(first, "<I", 0)(good))]
    if name != "avro":
        return []
    at = 0
    for _ in range(2):  # event_id, event_type: a zig-zag length, then the bytes
        length, at = _zigzag(good, at)
        at += length
    _, end = _zigzag(good, at)
    longs = {
        "long of 20 bytes": b"\x80" * 19 + b"\x01",
        "long of 11 bytes": b"\x80" * 10 + b"\x01",
        "long past 64 bits": b"\xff" * 9 + b"\x7f",
        "zig-zag 2^64": b"\x80" * 9 + b"\x02",
    }
    return [Case(what, good[:at] + bad + good[end:]) for what, bad in longs.items()]


def _zigzag(data: bytes, at: int) -> tuple[int, int]:
    """The zig-zag varint at `at` and where it ends."""
    value = shift = 0
    while True:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), at


def cases(name: CodecName, *, max_payload_bytes: int = 4 * 1024 * 1024) -> list[Case]:
    """Every poison case for codec `name`, with the worker's payload limit."""
    codec = get_codec(name, "medium")
    data = make_payloads("medium", 1, seed=7)[0]
    good = _encoded(codec, data)
    return [
        Case("random bytes", _random_bytes(codec, name)),
        Case("truncated", _truncated(codec, good)),
        *_wire_variants(name, codec, data),
        Case("empty value", b"", reason="empty"),
        Case("tombstone", None, reason="empty"),
        Case(f"{DEPTH // 1000}k-deep nesting", _deep(name)),
        Case("just over --max-payload-bytes", b"x" * (max_payload_bytes + 1)),
        Case("8 MiB", b"y" * BIG_BYTES, droppable=True),
    ]


def interleaved(good: Plan, poison: list[Case], every: int) -> Plan:
    """Good traffic with poison case i at seq `every * (i + 1)`."""
    at = {every * (i + 1): case for i, case in enumerate(poison)}

    def plan(seq: int) -> Payload:
        case = at.get(seq)
        if case is None:
            return good(seq)
        return Payload(case.value, poison=case.poison, droppable=case.droppable)

    return plan
