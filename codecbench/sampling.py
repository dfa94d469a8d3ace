"""Timed samples, pyperf-style: calibrate the loop count, discard warm-ups, keep N.

A sample runs one loop of `loops` messages between two reads of the thread's CPU
clock (`time.thread_time_ns`, the clock the worker's decode and handle figures use),
so time the machine spends on other processes is not counted. The loop bodies are
written out per operation: no per-message wrapper call, no setup inside the clock,
the pool cycled by a C iterator (`itertools.cycle` + `islice`, ~10 ns a message,
reported as `loop_overhead_us`). The garbage collector stays on: its pauses are part
of what a codec costs, and the collections per generation are counted around each
sample, outside the clock.
"""

from __future__ import annotations

import gc
import statistics
from collections.abc import Callable, Iterator
from itertools import islice
from time import thread_time_ns
from typing import Any, Final

from codecbench.results import GcRate, Spread

Sample = Callable[[int], int]
"""Runs one sample of `loops` messages; returns the CPU nanoseconds it took."""

_MAX_LOOPS: Final = 1 << 30
"""Calibration stops doubling here even if a sample is still short (a broken clock)."""


def time_calls(fn: Callable[[Any], object], source: Iterator[Any]) -> Sample:
    """A sample calling `fn` on each of the next `loops` items of `source`.

    Performance note: the call is an expression statement. CPython has no
    dead-code elimination, so the object is built in full, and the interpreter
    drops it (reference count to zero) before the next call: a decoded object is
    never kept, as in the design's "dropped at once" figure.
    """

    def sample(loops: int) -> int:
        items = islice(source, loops)
        t0 = thread_time_ns()
        for item in items:
            fn(item)
        return thread_time_ns() - t0

    return sample


def time_decode_read(
    decode: Callable[[bytes], Any],
    step: Callable[[Any, dict[int, float]], None],
    totals: dict[int, float],
    source: Iterator[bytes],
) -> Sample:
    """A sample decoding each message and running the schema's logic on it.

    `totals` is the sink: the logic adds every message's figures into it, as the
    worker's handler does, so the reads cannot be skipped.
    """

    def sample(loops: int) -> int:
        items = islice(source, loops)
        t0 = thread_time_ns()
        for data in items:
            step(decode(data), totals)
        return thread_time_ns() - t0

    return sample


def time_empty(source: Iterator[Any]) -> Sample:
    """A sample of the bare loop: what every figure pays to reach the next message."""

    def sample(loops: int) -> int:
        items = islice(source, loops)
        t0 = thread_time_ns()
        for _ in items:
            pass
        return thread_time_ns() - t0

    return sample


def calibrate(sample: Sample, min_time_ns: int) -> int:
    """The loop count, doubled from 1 until a sample takes at least `min_time_ns`.

    Doubling (pyperf's rule) lands the samples between `min_time_ns` and twice
    that: 50-100 ms with the default `--min-time`.
    """
    loops = 1
    while sample(loops) < min_time_ns and loops < _MAX_LOOPS:
        loops *= 2
    return loops


def _collections() -> list[int]:
    return [generation["collections"] for generation in gc.get_stats()]


def measure(
    sample: Sample, *, min_time_s: float, warmups: int, repeats: int
) -> tuple[Spread, int, GcRate]:
    """Calibrate `sample`, run `warmups` discarded samples, then keep `repeats`.

    The heap is collected first, so garbage left by the previous figure does not
    trigger a collection charged to this one.

    Returns:
        The time per message, the loop count, and the collections per 1,000
        messages over the kept samples.
    """
    gc.collect()
    loops = calibrate(sample, int(min_time_s * 1e9))
    for _ in range(warmups):
        sample(loops)
    per_msg_us: list[float] = []
    collected = [0, 0, 0]
    for _ in range(repeats):
        before = _collections()
        elapsed_ns = sample(loops)
        after = _collections()
        per_msg_us.append(elapsed_ns / loops / 1e3)
        collected = [
            c + a - b for c, a, b in zip(collected, after, before, strict=True)
        ]
    per_1k = 1e3 / (loops * repeats)
    gc_rate = GcRate(
        gen0=collected[0] * per_1k,
        gen1=collected[1] * per_1k,
        gen2=collected[2] * per_1k,
    )
    return spread(per_msg_us), loops, gc_rate


def spread(values: list[float]) -> Spread:
    """Median, extremes and standard deviation of `values` (at least one)."""
    return Spread(
        median=statistics.median(values),
        min=min(values),
        max=max(values),
        stdev=statistics.stdev(values) if len(values) > 1 else 0.0,
        samples=len(values),
    )
