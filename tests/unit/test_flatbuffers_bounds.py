"""FlatBuffers decode and read work is bounded by the message's size, whatever it
shares, and offsets are checked as flatc's verifier checks them.

Work is counted, not timed: the bytes passed to `bytes.decode` (UTF-8 checks and
string reads) while a call runs, seen through `sys.setprofile`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any, Final

import pytest

from codec import get_codec
from codec.flatbuffers import verifier
from schemas.errors import DecodeError
from service.logic.builtin import Handler
from tests.fuzz.wire_hostile import shared_string_message, wire_hostile

MIB: Final = 1 << 20


def decoded_bytes(call: Callable[[], Any]) -> tuple[int, Any]:
    """The bytes `bytes.decode` was given while `call` ran, and its result (or
    the exception it raised)."""
    total = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal total
        owner = getattr(arg, "__self__", None)
        if (
            event == "c_call"
            and isinstance(owner, bytes | bytearray | memoryview)
            and arg.__name__ == "decode"
        ):
            total += len(owner)

    sys.setprofile(profile)
    try:
        result = call()
    except Exception as exc:
        result = exc
    finally:
        sys.setprofile(None)
    return total, result


class TestSharedStrings:
    """Many offsets to one string cost that string's bytes once, not per offset."""

    def test_the_issues_message_is_refused_after_reading_its_string_once(
        self,
    ) -> None:
        """500,000 offsets to one 2 MiB string in 4.0 MB: ~1 TB to a reader that
        decodes per offset (~2,300 s of CPU before); refused by the byte budget."""
        data = shared_string_message(500_000, 2 * MIB)
        assert 4_000_000 < len(data) < 4_200_000
        work, result = decoded_bytes(
            lambda: get_codec("flatbuffers", "small").decode(data)
        )
        assert isinstance(result, DecodeError)
        assert "references more bytes than 16x the buffer's size" in str(result)
        assert work <= 2 * MIB + 64  # the string's UTF-8 check, once

    def test_a_proportionally_smaller_one_is_refused_the_same_way(self) -> None:
        """20,000 offsets to 64 KiB: 1.3 GB decoded by the verifier before (seen)."""
        data = wire_hostile()["fb-shared-string"]
        work, result = decoded_bytes(
            lambda: get_codec("flatbuffers", "small").decode(data)
        )
        assert isinstance(result, DecodeError)
        assert work <= len(data)

    def test_shared_strings_within_the_budget_are_read_once(self) -> None:
        """2,000 offsets to one 100-byte string verify (within 16x the size), and
        the view and the logic that reads `tags` decode the string once."""
        data = shared_string_message(2_000, 100)
        codec = get_codec("flatbuffers", "small")
        work, obj = decoded_bytes(lambda: codec.decode(data))
        assert not isinstance(obj, Exception) and work <= 100 + 8  # "x", the string
        work, tags = decoded_bytes(lambda: obj.tags)
        assert tags == ["a" * 100] * 2_000 and work == 100
        step = Handler("small", "aggregate").step  # what the worker runs per message
        assert step is not None
        work, done = decoded_bytes(lambda: step(obj))
        assert done is None and work == 100

    def test_the_budget_is_proportional_to_the_buffer(self) -> None:
        """Just under the budget verifies, just over it is refused."""
        codec = get_codec("flatbuffers", "small")
        size = 4_096
        for refs, ok in [(260, True), (1_000, False)]:
            data = shared_string_message(refs, size)
            charged = refs * (4 + size)
            budget = verifier.BYTES_PER_BYTE * len(data) + verifier.BYTES_FLOOR
            assert (charged < budget) is ok
            if ok:
                assert len(codec.decode(data).tags) == refs
            else:
                with pytest.raises(DecodeError, match="more bytes than"):
                    codec.decode(data)


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("fb-zero-offset", "offset of 0"),
        ("fb-root-zero-offset", "offset of 0"),
        ("fb-unaligned-field", "unaligned"),
        ("fb-unaligned-vector", "unaligned"),
    ],
)
def test_offsets_are_checked_as_flatc_checks_them(case: str, reason: str) -> None:
    with pytest.raises(DecodeError, match=reason):
        get_codec("flatbuffers", "small").decode(wire_hostile()[case])
