"""A case's figures from three snapshots of its worker and the samples between.

`s0` opens the window (the first measured message handled), `s1` closes the load
window (the load generator stopped), `s2` ends the drain. Rates per second use
`s0`-`s1`; figures per message use `s0`-`s2`, so the messages still queued when
the load stopped are counted with the CPU, collections and decodes they cost.
The counts of messages (`processed`, `dead_lettered`) are the measured run's
whole: from the snapshot taken once the warm-up was handled (`start`) to `s2`, the
same messages the load generator acknowledged and the dead-letter topic holds for
the run, so the table's DLQ column, report.json and the rejections text agree. A
wire size is the load generator's: the bytes it sent over the messages it sent
(`CaseResult.wire_bytes`), the same for every codec that sends the same bytes,
whatever each one dead-letters.
"""

from __future__ import annotations

import statistics

from abrunner.lab.worker_probe import Histogram, Snapshot
from abrunner.plan import Case
from abrunner.results import CaseResult

GC_COLLECTIONS = "worker_gc_collections_total"
GC_SECONDS = "worker_gc_seconds_total"
"""The worker's cyclic-GC counters, one sample per generation (summed here)."""
DEAD_LETTERS = "worker_dead_letters_total"
"""Messages the worker wrote to the dead-letter topic, by reason (summed here)."""
E2E_INVALID = "worker_e2e_latency_invalid_total"
"""Sampled latencies the worker did not observe (bad or skewed `x-sent-ns`)."""


def figures(
    case: Case,
    s0: Snapshot,
    s1: Snapshot,
    s2: Snapshot,
    rss: list[int],
    lags: list[float],
    *,
    start: Snapshot | None = None,
    wire_bytes: float | None = None,
) -> CaseResult:
    """The figures of window `s0`-`s1` (load) and `s0`-`s2` (load and drain).

    Args:
        start: the worker once the warm-up was handled, before the measured load
            began: `processed` and `dead_lettered` count from it to `s2`, and its
            dead letters are the warm-up's (`warmup_dead_lettered`). None: the
            worker's start (a max-mode backlog, which has no warm-up).
        wire_bytes: the load generator's bytes per message sent (its summary's
            `bytes_per_message`); None when it gave none.
    """
    window = max(s1.at - s0.at, 1e-9)
    done_all = max(s2.processed - s0.processed, 1.0)
    e2e = _delta(s0, s2, "worker_e2e_latency_seconds")
    decode = _delta(s0, s2, "worker_decode_seconds")
    dead = s2.metrics.total(DEAD_LETTERS)
    before = 0.0 if start is None else start.metrics.total(DEAD_LETTERS)
    half = rss[len(rss) // 2 :] or [s1.rss]
    # A worker older than its GC counters exports none: no figure, not a zero.
    gc_known = s2.metrics.has(GC_COLLECTIONS)
    gc_s = _counted(s0, s1, GC_SECONDS)
    gc_n = _counted(s0, s2, GC_COLLECTIONS)
    return CaseResult(
        codec=case.codec,
        profile=case.profile.label,
        repeat=case.repeat,
        throughput=(s1.processed - s0.processed) / window,
        cpu_pct=100 * (s1.cpu_s - s0.cpu_s) / window,
        cpu_us_per_msg=1e6 * (s2.cpu_s - s0.cpu_s) / done_all,
        e2e_p50_ms=_scaled(e2e.quantile(0.5), 1e3),
        e2e_p99_ms=_scaled(e2e.quantile(0.99), 1e3),
        e2e_p999_ms=_scaled(e2e.quantile(0.999), 1e3),
        decode_us=_scaled(decode.mean(), 1e6),
        decode_p50_us=_scaled(decode.quantile(0.5), 1e6),
        handle_us=_scaled(_delta(s0, s2, "worker_handle_seconds").mean(), 1e6),
        handle_cpu_us=_scaled(_delta(s0, s2, "worker_handle_cpu_seconds").mean(), 1e6),
        gc_ms_per_s=1e3 * gc_s / window if gc_known else None,
        gc_per_1k_msgs=1e3 * gc_n / done_all if gc_known else None,
        rss_peak_mb=max([*rss, s1.rss]) / 2**20,
        rss_steady_mb=statistics.median(half) / 2**20,
        wire_bytes=wire_bytes or None,
        lag_end=s1.lag,
        lag_max=max([*lags, s1.lag]),
        dead_lettered=int(dead - before),
        warmup_dead_lettered=None if start is None else int(before),
        e2e_invalid=int(_counted(s0, s2, E2E_INVALID))
        if s2.metrics.has(E2E_INVALID)
        else None,
        processed=int(s2.processed - (0 if start is None else start.processed)),
    )


def _delta(s0: Snapshot, s2: Snapshot, name: str) -> Histogram:
    return s2.metrics.histogram(name).minus(s0.metrics.histogram(name))


def _counted(s0: Snapshot, s2: Snapshot, name: str, **labels: str) -> float:
    return s2.metrics.total(name, **labels) - s0.metrics.total(name, **labels)


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def window_rate(
    s0: Snapshot, points: list[tuple[float, float]], window_s: float
) -> float | None:
    """Messages handled per second over the producer's own load window.

    The window opens at `s0` (the first measured message handled) and lasts as
    long as the load generator's schedule (`window_s`), not until its process
    has exited: flushing, printing its summary and exiting take it a second
    more, which a short run's rate would otherwise count as idle time.
    `points` are (monotonic time, messages handled) samples after `s0`; the
    count at the window's end is interpolated between the two around it. None
    when the samples end before the window does (the figure over s0-s1 stands).
    """
    if window_s <= 0:
        return None
    end = s0.at + window_s
    before = (s0.at, s0.processed)
    for at, done in points:
        if at >= end:
            share = (end - before[0]) / (at - before[0]) if at > before[0] else 1.0
            handled = before[1] + share * (done - before[1])
            return (handled - s0.processed) / window_s
        before = (at, done)
    return None


def fell_behind(
    *, lag_end: float | None, throughput: float | None, produced: float, rate: float
) -> bool:
    """Whether a worker could not keep pace with the load.

    Behind: more than half a second of traffic (at least 1000 messages) still
    queued when the load stopped, or under 90 % of the rate actually produced.
    Dead letters are handled messages (the throughput counts every outcome), so
    a worker that rejects most of its input is not behind for that.
    """
    queued = (lag_end or 0) > max(0.5 * rate, 1000)
    slow = (throughput or 0) < 0.9 * (produced or rate)
    return queued or slow
