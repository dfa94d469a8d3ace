"""What a load-generation run reports: per-tick deltas, their totals, the summary.

Producer processes send a `Tick` every ~100 ms (sent, acknowledged, failed, latency
histogram deltas); `Aggregator` merges them (from one process or many) into running
totals for the progress display and the metrics, and into the final `Summary`.
Latencies live in a log histogram with 64 buckets per doubling (1.1 % wide) from
1 us to ~268 s, so percentiles cost nothing per message and merge across processes.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, Final, TextIO

import msgspec
import numpy as np

from service.telemetry.histogram import quantile

BUCKETS_PER_DOUBLING: Final = 64
N_BUCKETS: Final = 28 * BUCKETS_PER_DOUBLING
_LOW_S: Final = 1e-6


def bucketize(
    values: Sequence[float], weights: Sequence[int] | None = None
) -> tuple[list[int], list[int]]:
    """Sparse log-histogram counts of `values` (seconds): (bucket indexes, counts)."""
    if not values:
        return [], []
    arr = np.maximum(np.asarray(values, dtype=np.float64), _LOW_S)
    idx = np.log2(arr / _LOW_S) * BUCKETS_PER_DOUBLING
    idx = np.minimum(idx.astype(np.int64), N_BUCKETS - 1)
    counts = np.bincount(idx, weights=weights, minlength=N_BUCKETS)
    nonzero = np.flatnonzero(counts)
    return nonzero.tolist(), counts[nonzero].astype(np.int64).tolist()


def upper_edge(index: int) -> float:
    """The upper bound, in seconds, of log-histogram bucket `index`."""
    return float(_LOW_S * 2.0 ** ((index + 1) / BUCKETS_PER_DOUBLING))


_BOUNDS: Final = (_LOW_S, *(upper_edge(i) for i in range(N_BUCKETS - 1)))
"""`quantile` bounds: an empty bucket below 1 us (`bucketize` raises smaller
values to 1 us), then every bucket's upper edge; the last bucket is the overflow."""


class LogHistogram:
    """Merged latency counts (thread-safe: the metrics server reads it)."""

    def __init__(self) -> None:
        self.counts = np.zeros(N_BUCKETS, dtype=np.int64)
        self.total = 0.0
        self.maximum = 0.0
        self._lock = threading.Lock()

    def add(self, idx: list[int], cnt: list[int], total: float, maximum: float) -> None:
        """Add sparse counts from `bucketize`, their sum and their maximum."""
        with self._lock:
            np.add.at(self.counts, idx, cnt)
            self.total += total
            self.maximum = max(self.maximum, maximum)

    def snapshot(self) -> tuple[np.ndarray[Any, np.dtype[np.int64]], float]:
        """A consistent copy of (counts, sum)."""
        with self._lock:
            return self.counts.copy(), self.total

    def quantile(self, q: float) -> float | None:
        """The `q` quantile in seconds, as `service.telemetry.histogram.quantile` computes it.

        Interpolated within its 1.1 % bucket and capped at the observed maximum; a
        rank in the overflow bucket (above ~265 s), which has no upper edge,
        reports the maximum. None when nothing was observed.
        """
        counts, _ = self.snapshot()
        value = quantile(_BOUNDS, [0, *counts.tolist()], q)
        if value is None:
            return None
        return min(value, self.maximum)


class Tick(msgspec.Struct, array_like=True, omit_defaults=True):
    """What one producer process did since its previous tick."""

    shard: int
    elapsed_s: float = 0.0
    sent: int = 0
    acked: int = 0
    failed: int = 0
    value_bytes: int = 0
    due: int = 0
    target_rate: float = 0.0
    last_send_s: float = 0.0
    per_second: dict[int, int] = {}
    ack_idx: list[int] = []
    ack_cnt: list[int] = []
    ack_sum: float = 0.0
    ack_max: float = 0.0
    lag_idx: list[int] = []
    lag_cnt: list[int] = []
    lag_max: float = 0.0
    errors: dict[str, int] = {}
    main_cpu_s: float = 0.0
    process_cpu_s: float = 0.0
    done: bool = False
    fatal: str = ""


class Latency(msgspec.Struct):
    """Percentiles of one latency, in milliseconds (None: nothing measured)."""

    basis: str
    p50_ms: float | None
    p99_ms: float | None
    p999_ms: float | None
    max_ms: float | None


class Summary(msgspec.Struct):
    """The final figures of a run (`--json` prints exactly this)."""

    run_id: str
    topic: str
    codec: str
    profile: str
    pattern: str
    processes: int
    target_rate: float
    achieved_rate: float
    rate_error_pct: float | None
    window_s: float
    sent: int
    acked: int
    failed: int
    errors: dict[str, int]
    bytes_per_message: float
    ack_latency: Latency
    send_lag: Latency
    per_second_min: int | None
    per_second_max: int | None
    per_second: list[int]
    main_thread_cpu_s: float
    process_cpu_s: float
    interrupted: bool
    recorded: int | None = None
    """A replay: the messages in the recording."""
    replayed_as_recorded: int | None = None
    """A replay: recorded messages sent byte for byte (the rest were transcoded)."""
    not_carried: dict[str, int] = {}
    """A replay: recorded messages left out, by `"<field path>: <reason>"`."""

    @property
    def exit_code(self) -> int:
        """0 when every message was acknowledged, 1 if any delivery failed."""
        return 1 if self.failed else 0


class Progress(msgspec.Struct):
    """A running snapshot for progress displays and `on_progress` callbacks."""

    elapsed_s: float
    sent: int
    acked: int
    failed: int
    due: int
    target_rate: float
    last_second_rate: float


def _latency(hist: LogHistogram, basis: str) -> Latency:
    def ms(q: float) -> float | None:
        value = hist.quantile(q)
        return None if value is None else round(value * 1e3, 3)

    top = round(hist.maximum * 1e3, 3) if hist.counts.any() else None
    return Latency(basis, ms(0.5), ms(0.99), ms(0.999), top)


class Aggregator:
    """Running totals of every process's ticks.

    Args:
        shards: the number of producer processes.
        planned_window_s: the schedule's span (duration, or the intended time of
            the last message); 0 when unknown (unthrottled count runs).
        planned_total: the number of messages the schedule holds; None when
            unthrottled (the target rate is then reported as 0: "maximum").
    """

    def __init__(
        self, shards: int, planned_window_s: float, planned_total: int | None
    ) -> None:
        self.shards = shards
        self.planned_window_s = planned_window_s
        self.planned_total = planned_total
        self.ack = LogHistogram()
        self.lag = LogHistogram()
        self.sent = self.acked = self.failed = self.value_bytes = 0
        self.main_cpu_s = self.process_cpu_s = 0.0
        self.errors: dict[str, int] = {}
        self.fatal: list[str] = []
        self.per_second: dict[int, int] = {}
        self._due = [0] * shards
        self._target = [0.0] * shards
        self._elapsed = [0.0] * shards
        self._last_send = 0.0
        self._done: set[int] = set()

    @property
    def done(self) -> bool:
        """Every process has sent its last tick."""
        return len(self._done) == self.shards

    def merge(self, tick: Tick) -> None:
        """Fold one tick into the totals."""
        self.sent += tick.sent
        self.acked += tick.acked
        self.failed += tick.failed
        self.value_bytes += tick.value_bytes
        self.main_cpu_s += tick.main_cpu_s
        self.process_cpu_s += tick.process_cpu_s
        for second, n in tick.per_second.items():
            self.per_second[second] = self.per_second.get(second, 0) + n
        for error, n in tick.errors.items():
            self.errors[error] = self.errors.get(error, 0) + n
        if tick.ack_idx:
            self.ack.add(tick.ack_idx, tick.ack_cnt, tick.ack_sum, tick.ack_max)
        if tick.lag_idx:
            self.lag.add(tick.lag_idx, tick.lag_cnt, 0.0, tick.lag_max)
        i = tick.shard
        self._due[i], self._target[i] = tick.due, tick.target_rate
        self._elapsed[i] = max(self._elapsed[i], tick.elapsed_s)
        self._last_send = max(self._last_send, tick.last_send_s)
        if tick.fatal:
            self.fatal.append(f"process {i}: {tick.fatal}")
        if tick.done:
            self._done.add(i)

    def progress(self) -> Progress:
        """The current running snapshot."""
        elapsed = max(self._elapsed)
        last = self.per_second.get(int(elapsed) - 1, 0) if elapsed >= 1 else 0
        return Progress(
            elapsed_s=elapsed,
            sent=self.sent,
            acked=self.acked,
            failed=self.failed,
            due=sum(self._due),
            target_rate=sum(self._target),
            last_second_rate=float(last),
        )

    def summary(self, meta: dict[str, Any], *, interrupted: bool) -> Summary:
        """The final figures; `meta` holds run_id, topic, codec, profile, pattern."""
        window = max(self.planned_window_s, self._last_send)
        if interrupted:
            window = self._last_send
        target = 0.0
        if self.planned_total and self.planned_window_s > 0:
            target = self.planned_total / self.planned_window_s
        achieved = self.sent / window if window > 0 else 0.0
        full = [self.per_second.get(s, 0) for s in range(int(window + 1e-6))]
        error = None if not target else round((achieved / target - 1) * 100, 4)
        return Summary(
            **meta,
            processes=self.shards,
            target_rate=round(target, 3),
            achieved_rate=round(achieved, 3),
            rate_error_pct=error,
            window_s=round(window, 6),
            sent=self.sent,
            acked=self.acked,
            failed=self.failed,
            errors=dict(self.errors),
            bytes_per_message=round(self.value_bytes / self.sent, 1)
            if self.sent
            else 0,
            ack_latency=_latency(self.ack, "produce() call to delivery report"),
            send_lag=_latency(self.lag, "intended send time to produce() call"),
            per_second_min=min(full) if full else None,
            per_second_max=max(full) if full else None,
            per_second=full,
            main_thread_cpu_s=round(self.main_cpu_s, 3),
            process_cpu_s=round(self.process_cpu_s, 3),
            interrupted=interrupted,
        )


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def render_table(summary: Summary) -> str:
    """The human-readable summary."""
    s = summary
    target = "unthrottled" if not s.target_rate else f"{s.target_rate:,.1f} msg/s"
    err = "" if s.rate_error_pct is None else f" ({s.rate_error_pct:+.3f} %)"
    rows = [
        f"run {s.run_id}: {s.codec} {s.profile} -> {s.topic} "
        f"({s.pattern}, {s.processes} process(es)){' INTERRUPTED' if s.interrupted else ''}",
        f"  target rate     {target}",
        f"  achieved rate   {s.achieved_rate:,.1f} msg/s{err} over {s.window_s:.3f} s",
        f"  per second      min {s.per_second_min} / max {s.per_second_max}",
        f"  sent            {s.sent:,}   acked {s.acked:,}   failed {s.failed:,}",
        f"  bytes/message   {s.bytes_per_message:,.1f}",
        f"  producer CPU    {s.process_cpu_s:.2f} s (sending thread {s.main_thread_cpu_s:.2f} s)",
    ]
    rows += [
        f"  {lat.basis} (ms): p50 {_ms(lat.p50_ms)}  p99 {_ms(lat.p99_ms)}  "
        f"p99.9 {_ms(lat.p999_ms)}  max {_ms(lat.max_ms)}"
        for lat in (s.ack_latency, s.send_lag)
    ]
    rows += [f"  error {name}: {n:,}" for name, n in sorted(s.errors.items())]
    if s.replayed_as_recorded is not None:
        rows.append(f"  as recorded     {s.replayed_as_recorded:,} recorded messages")
    rows += [
        f"  not carried     {n:,} recorded messages: {why}"
        for why, n in sorted(s.not_carried.items(), key=lambda kv: -kv[1])
    ]
    return "\n".join(rows)


def to_json(summary: Summary) -> str:
    """The summary as one JSON object on one line."""
    return msgspec.json.encode(summary).decode()


class ProgressDisplay:
    """A live status line on stderr (rich), shown only on a terminal.

    Args:
        mode: `auto` (only when stdout and stderr are terminals), `always`, `never`.
        stream: where to draw (default: stderr).
    """

    def __init__(self, mode: str = "auto", stream: TextIO | None = None) -> None:
        stream = stream or sys.stderr
        tty = stream.isatty() and sys.stdout.isatty()
        self._live: Any = None
        self._next = 0.0
        if mode == "always" or (mode == "auto" and tty):
            from rich.console import Console
            from rich.live import Live

            console = Console(file=stream, force_terminal=mode == "always" or None)
            self._live = Live(console=console, auto_refresh=False, transient=True)

    def __enter__(self) -> ProgressDisplay:
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()

    def update(self, p: Progress) -> None:
        """Redraw at most 4 times a second."""
        now = time.monotonic()
        if self._live is None or now < self._next:
            return
        self._next = now + 0.25
        from rich.text import Text

        behind = max(0, p.due - p.sent)
        self._live.update(
            Text(
                f"{p.elapsed_s:7.1f} s  rate {p.last_second_rate:>10,.0f}/s "
                f"(target {p.target_rate:,.0f})  sent {p.sent:,}  acked {p.acked:,}  "
                f"errors {p.failed:,}  behind {behind:,}"
            ),
            refresh=True,
        )
