"""The clock's own cost, taken off each timed decode and logic call."""

from __future__ import annotations

from time import perf_counter_ns


def clock_overhead_ns(samples: int = 2001) -> int:
    """What a pair of `perf_counter_ns` readings adds to the interval between them.

    The median of `samples` empty brackets (`t0 = clock(); t1 = clock()`), the shape
    `timed` uses: ~70-100 ns here, 7-10 % of a protobuf decode, so the worker
    subtracts it from each timed decode and logic call (and exports it as
    `worker_timer_overhead_seconds`). ~0.2 ms, once at start-up."""
    clock = perf_counter_ns
    gaps = []
    for _ in range(samples):
        t0 = clock()
        t1 = clock()
        gaps.append(t1 - t0)
    gaps.sort()
    return gaps[len(gaps) // 2]
