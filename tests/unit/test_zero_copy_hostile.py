"""Hostile FlatBuffers, Cap'n Proto and Avro buffers: each a DecodeError at decode."""

from __future__ import annotations

import datetime
import subprocess
import sys

import pytest

from codec import CodecName, get_codec
from codec.flatbuffers.layout import EPOCH
from schemas.errors import DecodeError
from schemas.user.loader import load_schema
from tests.fuzz.wire_hostile import wire_hostile

_CODEC = {"fb": "flatbuffers", "ca": "capnp", "av": "avro"}
CASES = sorted(wire_hostile())


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("schema", ["small", "medium"])
def test_hostile_buffer_is_a_decode_error(case: str, schema: str) -> None:
    codec = get_codec(_CODEC[case[:2]], schema)  # type: ignore[arg-type]
    with pytest.raises(DecodeError) as info:
        codec.decode(wire_hostile()[case])
    assert info.value.codec == codec.name and info.value.reason == "decode"


def test_the_large_buffers_own_schema_reads_it_whole() -> None:
    """The `wrong schema` cases are valid `large` messages: only another schema
    refuses them, and their own reads them whole."""
    names: tuple[CodecName, ...] = ("flatbuffers", "capnp")
    for name in names:
        codec = get_codec(name, "large")
        prefix = "fb" if name == "flatbuffers" else "capnp"
        obj = codec.decode(wire_hostile()[f"{prefix}-wrong-schema"])
        assert codec.to_builtins(obj)["vehicles"]


def test_a_datetime_out_of_range_is_refused_by_the_verifier() -> None:
    """Found by the fuzzer: an int64 of microseconds past year 9999 verified, then
    raised OverflowError when the field was read."""
    schema = load_schema("tests.fixtures.usermodels.orders:Order")
    codec = get_codec("flatbuffers", schema)
    valid = codec.decode(codec.encode(codec.from_builtins(_order(schema))))
    at = codec.encode(codec.from_builtins(_order(schema)))
    stamp = int((valid.placed_at - EPOCH) / datetime.timedelta(microseconds=1))
    raw = stamp.to_bytes(8, "little", signed=True)
    assert at.count(raw) == 1
    bad = at.replace(raw, (2**62).to_bytes(8, "little", signed=True))
    with pytest.raises(DecodeError, match="datetime out of range"):
        codec.decode(bad)


def _order(schema: object) -> dict[str, object]:
    from schemas.user.synthetic import make_payloads

    return make_payloads(schema.shape, 1, seed=4)[0]  # type: ignore[attr-defined]


def test_pycapnp_total_size_aborts_on_a_bad_pointer() -> None:
    """Why the capnp codec reads every field instead of verifying with `total_size`:
    on an out-of-bounds pointer it aborts the process (an uncaught C++ exception).
    When this starts to pass a clean exception, the codec could verify that way."""
    script = (
        "from codec import get_codec\n"
        "from codec.capnp_codec import segments\n"
        "c = get_codec('capnp', 'small')\n"
        "p = {'id': 3, 'name': 'xyz', 'tags': ['abc'], 'metrics': []}\n"
        "data = bytearray(c.encode(c.from_builtins(p)))\n"
        "data[8 + 16] = 0xF0  # the first pointer of the root struct: out of bounds\n"
        "reader = c._root.from_segments(segments(bytes(data)))\n"
        "try:\n"
        "    reader.total_size\n"
        "except Exception:\n"
        "    raise SystemExit(3)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, timeout=120, check=False
    )
    assert done.returncode == -6, done.stderr[-500:]  # SIGABRT
    assert b"terminate called" in done.stderr
