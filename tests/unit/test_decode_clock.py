"""The worker's sampled decode and logic times are its thread's CPU time, taken
only from calls its thread was not descheduled in.

A paired A/B read "decode % of CPU: 655 %" for json-stdlib+pydantic: its sampled
decodes were wall time, and with four workers on two cores a decode preempted by
the others counted their turn. A part of the process's CPU cannot exceed it. And a
call timed on the thread's CPU clock right after its thread was switched back in
runs on cold caches: under a load average of 30 such samples tripled the mean of a
tight loop's decodes, so they are left out.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest

from codec import get_codec
from loadgen.payloads import make_payloads
from service.loop import hotpath
from service.loop.hotpath import MessagePath, Tally
from service.loop.sample_clock import DESCHEDULED_NS, clock_overhead_ns
from tests.fakes import FakeMessage

WAIT_S = 0.05
"""What the decode below waits for, off the CPU: 50 ms, many time slices."""

CODEC = get_codec("msgspec-msgpack", "medium")
VALUE = CODEC.encode(CODEC.from_builtins(make_payloads("medium", 1)[0]))


class _Waiting:
    """msgspec-msgpack's codec whose decode waits `WAIT_S` first, as a decode
    preempted for another process's turn does."""

    name = CODEC.name

    @property
    def decode_unchecked(self) -> Any:
        decode = CODEC.decode_unchecked

        def waited(data: bytes) -> Any:
            time.sleep(WAIT_S)
            return decode(data)

        return waited


def _path(codec: Any, step: Any) -> MessagePath:
    return MessagePath(
        codec,
        step=step,
        emit=None,
        max_payload_bytes=1 << 20,
        consumer_error=lambda err: None,
        retried=lambda: None,
    )


def _timed(path: MessagePath) -> tuple[list[int], list[int]]:
    decode_ns: list[int] = []
    handle_ns: list[int] = []
    assert path.timed(FakeMessage(VALUE), Tally(), decode_ns, handle_ns) == len(VALUE)
    return decode_ns, handle_ns


def _ticks(*steps_ns: int) -> Iterator[int]:
    """A fake clock: each reading advances by the next step."""
    return itertools.accumulate(steps_ns, initial=1_000_000)


def test_a_decode_its_thread_waited_in_is_left_out_not_counted_as_cpu() -> None:
    started = time.perf_counter_ns()
    decode_ns, handle_ns = _timed(_path(_Waiting(), lambda obj: None))
    assert time.perf_counter_ns() - started >= WAIT_S * 1e9  # it did wait
    assert decode_ns == [] and handle_ns == []


def test_calls_on_the_cpu_throughout_are_kept_in_cpu_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Readings in order: wall w0, cpu c0, (decode), cpu c1, wall w1, (logic), cpu c2,
    # wall w2. The decode: 4 us of CPU in 5 us of wall time; the logic: 3 us of CPU
    # in 3 us + DESCHEDULED_NS of wall time (its thread was switched out).
    wall = _ticks(5_000, 3_000 + DESCHEDULED_NS)
    cpu = _ticks(4_000, 3_000)
    monkeypatch.setattr(hotpath, "wall_clock", lambda: next(wall))
    monkeypatch.setattr(hotpath, "cpu_clock", lambda: next(cpu))
    decode_ns, handle_ns = _timed(_path(CODEC, lambda obj: None))
    assert decode_ns == [4_000]
    assert handle_ns == []


def test_a_logic_call_after_a_decode_left_out_is_left_out_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A switch at the decode's last CPU reading resumes the logic on cold caches."""
    wall = _ticks(4_000 + DESCHEDULED_NS, 3_000)
    cpu = _ticks(4_000, 3_000)
    monkeypatch.setattr(hotpath, "wall_clock", lambda: next(wall))
    monkeypatch.setattr(hotpath, "cpu_clock", lambda: next(cpu))
    assert _timed(_path(CODEC, lambda obj: None)) == ([], [])


def test_the_clock_bracket_is_measured_on_the_cpu_clock() -> None:
    """The cost taken off each sample: a bracket of the thread's CPU clock, a
    system call, never zero and far under the threshold of a switch."""
    assert 0 < clock_overhead_ns(201) < DESCHEDULED_NS
