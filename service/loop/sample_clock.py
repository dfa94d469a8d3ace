"""The clocks of the timed messages: a decode's or a logic call's CPU time, kept
only when its thread stayed on the CPU.

The batch loop times every k-th message's decode and logic (`MessagePath.timed`,
`service.loop.batch_loop.DECODE_SAMPLE_EVERY`) on the CPU clock of the worker's
thread (`cpu_clock`: `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`, a system call,
~0.23 us here), read inside a wall-clock bracket (`wall_clock`: `perf_counter_ns`,
a vDSO read, ~0.05 us). CPU time, because a decode preempted by the broker, the
load generator or another worker counts no wait: the samples are a part of the
process's CPU, and the decode's share of it is at most all of it. The wall
bracket, because the CPU clock's system call is where a pending switch takes
place: a call resumed there runs on cold caches and costs more than the calls it
stands for (on this 2-core machine under a load average of 30, such samples
put the mean of 1,875 msgspec-json decodes at 6.2 us against a true 2.6 us; left
out, 2.6 us), so a sample whose wall time passes its CPU time by
`DESCHEDULED_NS` is left out. The bracket's own cost (`clock_overhead_ns`) is
taken off each sample (`less_clock`).
"""

from __future__ import annotations

from time import perf_counter_ns as wall_clock, thread_time_ns as cpu_clock
from typing import Final

__all__ = [
    "DESCHEDULED_NS",
    "clock_overhead_ns",
    "cpu_clock",
    "less_clock",
    "wall_clock",
]

DESCHEDULED_NS: Final = 20_000
"""A timed call whose wall time passes its CPU time by 20 us saw its thread taken off
the CPU (another process's time slice lasts far longer), at the CPU clock's system
call, where a pending switch takes place: resumed on cold caches, it costs more than
the calls it stands for, so it is left out (`service.loop.batch_loop`)."""


def clock_overhead_ns(samples: int = 2001) -> int:
    """What a pair of `thread_time_ns` readings adds to the interval between them.

    The median of `samples` empty brackets (`t0 = clock(); t1 = clock()`), the shape
    `timed` uses: ~250 ns here, a quarter of a protobuf decode, so the worker
    subtracts it from each timed decode and logic call (and exports it as
    `worker_timer_overhead_seconds`). ~1 ms, once at start-up."""
    clock = cpu_clock
    gaps = []
    for _ in range(samples):
        t0 = clock()
        t1 = clock()
        gaps.append(t1 - t0)
    gaps.sort()
    return gaps[len(gaps) // 2]


def less_clock(samples_ns: list[int], clock_ns: int) -> list[float]:
    """Seconds of each timed sample less the clock's own cost (`clock_overhead_ns`);
    a sample shorter than that cost counts as 0, never negative."""
    return [(t - clock_ns) * 1e-9 if t > clock_ns else 0.0 for t in samples_ns]
