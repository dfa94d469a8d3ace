"""A value that is not a valid encoding never decodes to a value, per binary codec.

The fuzz stage (test_codec_fuzz.py) checks that any input gives a value or a
`DecodeError`; it cannot say which, since a mutation may well be valid. Here each
input is invalid by construction, from a valid message of the project's payload
generators (`tests.fuzz.inputs`) and one rule of its format, drawn by Hypothesis,
so the only right outcome is a `DecodeError`:

| codec | invalid by construction |
| --- | --- |
| avro, msgspec-msgpack, capnp | a strict prefix (the parse is deterministic and self-delimiting, or framed); the message with bytes after it |
| avro | also: a long as a varint the specification refuses (test_avro_exact.py) |
| protobuf | a field appended with a wire type of 6 or 7, field number 0, a length past the end, a varint of 11 bytes or more, or invalid UTF-8 in a string field |
| flatbuffers | an offset set to 0, past the buffer, unaligned, or at 2**31 and more; a string's terminator overwritten |
| capnp | also: the root pointer aimed past its segment |
"""

from __future__ import annotations

import functools
import struct
from typing import Final

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from codec import CodecName
from schemas.errors import DecodeError
from tests.fuzz.inputs import codec, samples

INVALID: Final = settings(
    max_examples=150,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILES: Final = ("small", "medium", "events")


@functools.cache
def valid(key: CodecName, profile: str) -> list[bytes]:
    return [s.data for s in samples(key, profile, 4, seed=23)]


def refused(key: CodecName, profile: str, data: bytes) -> None:
    with pytest.raises(DecodeError) as info:
        codec(key, profile).decode(data)
    assert info.value.codec == key and info.value.reason == "decode"


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes([*out, n])


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("key", ["avro", "msgspec-msgpack", "capnp"])
@INVALID
@given(data=st.data())
def test_a_prefix_or_trailing_bytes_are_refused(
    key: CodecName, profile: str, data: st.DataObject
) -> None:
    message = data.draw(st.sampled_from(valid(key, profile)))
    if data.draw(st.booleans(), label="prefix"):
        bad = message[: data.draw(st.integers(0, len(message) - 1), label="cut")]
    else:
        bad = message + data.draw(st.binary(min_size=1, max_size=16), label="tail")
    refused(key, profile, bad)


@st.composite
def invalid_protobuf_field(draw: st.DrawFn) -> bytes:
    """One field that no protobuf parser may accept."""
    number = draw(st.integers(1, 2**29 - 1))
    kind = draw(st.sampled_from(["wire-6-7", "field-0", "length", "varint", "utf8"]))
    if kind == "wire-6-7":
        return _varint(number << 3 | draw(st.sampled_from([6, 7])))
    if kind == "field-0":
        return _varint(draw(st.integers(0, 5)))
    if kind == "length":  # announces more bytes than follow
        body = draw(st.binary(max_size=8))
        return _varint(number << 3 | 2) + _varint(len(body) + 1) + body
    if kind == "varint":  # 11 bytes or more: past 64 bits
        return _varint(number << 3) + b"\xff" * draw(st.integers(10, 16)) + b"\x01"
    # invalid UTF-8 in the `small` and `medium` string fields numbered 2
    junk = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"a\x80"]))
    return b"\x12" + _varint(len(junk)) + junk


@pytest.mark.parametrize("profile", ["small", "medium"])
@INVALID
@given(data=st.data())
def test_an_invalid_protobuf_field_is_refused(
    profile: str, data: st.DataObject
) -> None:
    message = data.draw(st.sampled_from(valid("protobuf", profile)))
    refused("protobuf", profile, message + data.draw(invalid_protobuf_field()))


def flatbuffers_offsets(buf: bytes) -> list[tuple[int, int]]:
    """Where a `small` Payload stores its offsets, with the position each points
    at: the root offset, `name`, `tags`, `metrics` and every tag."""
    root = struct.unpack_from("<I", buf, 0)[0]
    vtable = root - struct.unpack_from("<i", buf, root)[0]
    found = [(0, root)]
    for slot in (1, 2, 3):
        at = root + struct.unpack_from("<H", buf, vtable + 4 + 2 * slot)[0]
        found.append((at, at + struct.unpack_from("<I", buf, at)[0]))
    tags = found[2][1]
    for i in range(struct.unpack_from("<I", buf, tags)[0]):
        at = tags + 4 + 4 * i
        found.append((at, at + struct.unpack_from("<I", buf, at)[0]))
    return found


@INVALID
@given(data=st.data())
def test_an_invalid_flatbuffers_offset_is_refused(data: st.DataObject) -> None:
    message = data.draw(st.sampled_from(valid("flatbuffers", "small")))
    offsets = flatbuffers_offsets(message)
    at, target = data.draw(st.sampled_from(offsets), label="offset")
    bad = bytearray(message)
    kind = data.draw(st.sampled_from(["zero", "past", "unaligned", "huge", "nul"]))
    if kind == "nul":  # a string's terminator: `name`, or a tag
        strings = [
            t for a, t in offsets[1:] if a != offsets[2][0] and a != offsets[3][0]
        ]
        string = data.draw(st.sampled_from(strings))
        end = string + 4 + struct.unpack_from("<I", message, string)[0]
        bad[end] = data.draw(st.integers(1, 255))
    else:
        value = {
            "zero": 0,
            "past": len(message) - at + data.draw(st.integers(-3, 64)),
            "unaligned": target - at + data.draw(st.sampled_from([1, 2, 3])),
            "huge": data.draw(st.integers(2**31, 2**32 - 1)),
        }[kind]
        struct.pack_into("<I", bad, at, max(value, 0) % 2**32)
    refused("flatbuffers", "small", bytes(bad))


@pytest.mark.parametrize("profile", PROFILES)
@INVALID
@given(data=st.data())
def test_a_capnp_root_pointer_past_its_segment_is_refused(
    profile: str, data: st.DataObject
) -> None:
    message = data.draw(st.sampled_from(valid("capnp", profile)))
    segments = struct.unpack_from("<I", message, 0)[0] + 1
    words = struct.unpack_from("<I", message, 4)[0]
    root = 8 * ((segments + 2) // 2)  # after the segment table, 8-aligned
    pointer = struct.unpack_from("<Q", message, root)[0]
    beyond = words + data.draw(st.integers(0, 2**20))  # in words, from the pointer
    bad = bytearray(message)
    struct.pack_into("<Q", bad, root, (pointer & ~0xFFFFFFFC) | (beyond << 2))
    refused("capnp", profile, bytes(bad))
