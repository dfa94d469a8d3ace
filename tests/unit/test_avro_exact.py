"""Avro decodes exactly as the specification bounds it: an invalid encoding is a
`DecodeError`, never a value (fastavro alone reads a 20-byte long as 16)."""

from __future__ import annotations

import io
from typing import Any, Final

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from codec import get_codec
from codec.avro_exact import walker
from codec.base import MalformedBuffer
from schemas.errors import DecodeError

EXACT: Final = settings(
    max_examples=300,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

SMALL_TAIL: Final = b"\x02x\x00\x00"
"""A `small` Payload after its `id`: name "x", no tags, no metrics."""


def zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def varint_value(raw: bytes) -> int:
    """The unsigned value of a varint in infinite precision (the oracle)."""
    return sum((b & 0x7F) << (7 * i) for i, b in enumerate(raw))


@st.composite
def varints(draw: st.DrawFn) -> bytes:
    """A varint's bytes: canonical ones of int64 values, the same padded with
    zero groups (overlong), and arbitrary groups of 1 to 14 bytes."""
    how = draw(st.sampled_from(["canonical", "padded", "arbitrary"]))
    if how == "arbitrary":
        groups = draw(st.lists(st.integers(0, 0x7F), min_size=1, max_size=14))
    else:
        value = draw(st.integers(-(2**63), 2**63 - 1))
        n = (value << 1) ^ (value >> 63)
        groups = []
        while True:
            groups.append(n & 0x7F)
            n >>= 7
            if not n:
                break
        if how == "padded":
            groups += [0] * draw(st.integers(1, 10))
    return bytes(g | 0x80 for g in groups[:-1]) + bytes([groups[-1]])


def read(schema: dict[str, Any], data: bytes) -> Any:
    """Exact walk, then fastavro: what the codec does."""
    walker(schema)(data)
    return fastavro.schemaless_reader(
        io.BytesIO(data), fastavro.parse_schema(schema), None
    )


def record(*types: Any) -> dict[str, Any]:
    fields = [{"name": f"f{i}", "type": t} for i, t in enumerate(types)]
    return {"type": "record", "name": "R", "namespace": "t", "fields": fields}


class TestVarints:
    """A long is at most 10 bytes and 64 bits, an int 5 bytes and 32 bits."""

    @pytest.mark.parametrize(
        ("raw", "label"),
        [
            (b"\x80" * 19 + b"\x01", "20 bytes, read as 16 by fastavro"),
            (b"\x80" * 10 + b"\x01", "11 bytes"),
            (b"\xff" * 9 + b"\x7f", "10 bytes, bits past 64"),
            (b"\x80" * 9 + b"\x02", "zig-zag 2**64, read as 0"),
        ],
    )
    def test_the_issues_longs_are_decode_errors(self, raw: bytes, label: str) -> None:
        codec = get_codec("avro", "small")
        with pytest.raises(DecodeError, match="Avro long over 10 bytes or 64 bits"):
            codec.decode(raw + SMALL_TAIL)

    def test_the_longest_valid_longs_decode(self) -> None:
        codec = get_codec("avro", "small")
        assert (
            codec.decode(b"\xfe" + b"\xff" * 8 + b"\x01" + SMALL_TAIL).id == 2**63 - 1
        )
        assert codec.decode(b"\xff" * 9 + b"\x01" + SMALL_TAIL).id == -(2**63)
        assert codec.decode(b"\x80" * 9 + b"\x00" + SMALL_TAIL).id == 0  # overlong

    @EXACT
    @given(raw=varints())
    def test_a_long_decodes_exactly_or_not_at_all(self, raw: bytes) -> None:
        codec = get_codec("avro", "small")
        n = varint_value(raw)
        if len(raw) <= 10 and n < 2**64:
            assert codec.decode(raw + SMALL_TAIL).id == zigzag(n)
        else:
            with pytest.raises(DecodeError, match="long over"):
                codec.decode(raw + SMALL_TAIL)

    @EXACT
    @given(raw=varints())
    def test_an_int_decodes_exactly_or_not_at_all(self, raw: bytes) -> None:
        n = varint_value(raw)
        if len(raw) <= 5 and n < 2**32:
            assert read(record("int"), raw) == {"f0": zigzag(n)}
        else:
            with pytest.raises(MalformedBuffer, match="int over"):
                read(record("int"), raw)


class TestOtherValues:
    """Booleans, union and enum indexes, lengths and blocks are checked too."""

    @pytest.mark.parametrize(
        ("types", "data", "reason"),
        [
            (["boolean"], b"\x02", "boolean neither 0 nor 1"),
            ([["null", "string"]], b"\x01\x02x", "union index out of range"),
            ([["null", "string"]], b"\x04", "union index out of range"),
            (
                [{"type": "enum", "name": "E", "symbols": ["A", "B"]}],
                b"\x04",
                "enum index out of range",
            ),
            (["string"], b"\x01x", "negative length"),
            (["bytes"], b"\x0a" + b"x", "truncated"),
            (["bytes"], b"\x80\x01" + b"x", "past the buffer's end"),
            ([{"type": "array", "items": "long"}], b"\x03\x10\x02\x04\x00", "size"),
            ([{"type": "array", "items": "long"}], b"\x03\x01\x02\x04\x00", "negat"),
            ([{"type": "array", "items": "long"}], b"\xfe\xff\xff\x7f\x02", "items"),
            ([{"type": "map", "values": "long"}], b"\x02\x02k", "truncated"),
            (["long"], b"\x02\x00", "trailing bytes"),
            (["double"], b"\x00" * 7, "truncated"),
        ],
    )
    def test_an_invalid_value_is_refused(
        self, types: list[Any], data: bytes, reason: str
    ) -> None:
        with pytest.raises(MalformedBuffer, match=reason):
            read(record(*types), data)

    def test_fastavro_alone_reads_them_as_values(self) -> None:
        """Why the walk exists: each of these is a value to fastavro."""
        cases: list[tuple[list[Any], bytes]] = [
            (["boolean"], b"\x02"),
            ([["null", "string"]], b"\x01\x02x"),
            ([{"type": "array", "items": "long"}], b"\x03\x10\x02\x04\x00"),
            (["int"], b"\x80\x80\x80\x80\x80\x00"),
        ]
        for types, data in cases:
            parsed = fastavro.parse_schema(record(*types))
            assert fastavro.schemaless_reader(io.BytesIO(data), parsed, None)

    @pytest.mark.parametrize(
        ("types", "data", "value"),
        [
            ([{"type": "array", "items": "long"}], b"\x03\x04\x02\x04\x00", [1, 2]),
            ([{"type": "array", "items": "long"}], b"\x02\x02\x02\x04\x00", [1, 2]),
            ([["null", "string"]], b"\x82\x80\x00\x02x", "x"),  # overlong index
            ([{"type": "fixed", "name": "F", "size": 3}], b"abc", b"abc"),
            ([{"type": "map", "values": "boolean"}], b"\x02\x02k\x01\x00", {"k": True}),
        ],
    )
    def test_a_valid_value_reads(
        self, types: list[Any], data: bytes, value: Any
    ) -> None:
        assert read(record(*types), data) == {"f0": value}

    def test_empty_records_are_bounded_by_the_buffer(self) -> None:
        """An array of empty records takes no bytes per item: 2**62 of them from
        10 bytes would be a work bomb; up to the buffer's length they are valid."""
        empty = {"type": "record", "name": "E", "fields": []}
        schema = record({"type": "array", "items": empty}, "string")
        assert read(schema, b"\x06\x00\x00") == {"f0": [{}] * 3, "f1": ""}
        with pytest.raises(MalformedBuffer, match="more items than bytes"):
            read(schema, b"\xfe\xff\xff\xff\xff\xff\xff\xff\x7f\x00\x00")

    def test_a_recursive_record_walks(self) -> None:
        node = {
            "type": "record",
            "name": "Node",
            "namespace": "t",
            "fields": [
                {"name": "v", "type": "long"},
                {"name": "next", "type": ["null", "Node"]},
            ],
        }
        assert read(node, b"\x02\x02\x04\x00") == {
            "v": 1,
            "next": {"v": 2, "next": None},
        }
        with pytest.raises(MalformedBuffer, match="union index"):
            read(node, b"\x02\x02\x04\x04")
