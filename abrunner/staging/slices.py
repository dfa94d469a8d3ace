"""`codec-ab staging`: two live sides read from Prometheus, slice by slice.

A side is a PromQL label matcher (`side="A"`, the label deploy/prometheus/prometheus.yml
and the staging-ab overlay give each side's workers) applied to the worker's own series
and to `worker_info`; `process_*` series carry no worker labels, so they are joined to
the side through `worker_info` on (job, instance). Every figure sums a side's processes
first (CPU per message = summed CPU / summed messages, never a mean of per-process
ratios).

The window (`--window` or `--start/--end`) is cut into slices of `--slice`. Counters
(messages, bytes, CPU seconds, GC, decode sums and counts, dead letters, consumer
errors) and the latency and decode histograms' buckets are read as raw samples and
cut at the slice edges (`abrunner.staging.counters`): the slices add up to the
window's total wherever the edges fall, and a restart (a counter that went down, or a
new process start time on the target) is read as a reset, never a negative figure.
Gauges come from range queries: the side's resident memory (mean per process) and
processes at each slice's end; its backlog at every step of the window
(`abrunner.staging.backlog`). Restarts are counted from `process_start_time_seconds`:
every start time inside the window is a process (re)started, on the slice where it
first shows. A last part of the window shorter than a slice is left out of the
slices, and what the sides handled in it is kept (`Side.tail`) for the report to say.

`EXPRESSIONS` are the per-slice expressions of the dashboard: the recording rules of
its Verdict row (`side:*` in deploy/prometheus/rules/recording.yml) are the same
expressions with `by (side)` and a 1m range, which tests/deploy checks. The command
reads the raw series behind them, not those rules: a rule's 1-minute rate cannot be
re-cut into a slice of another length, and `increase()` over back-to-back ranges
loses what a counter gained between them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Final

from abrunner.staging import backlog, counters
from abrunner.staging.prometheus_api import BadQuery, Client, PrometheusError

WORKERS: Final = "max by (job, instance) (worker_info{S})"
"""A side's worker processes as a join target for `process_*` series."""
_JOIN: Final = f"* on (job, instance) group_left () {WORKERS}"

EXPRESSIONS: Final = {
    "messages": "sum(increase(worker_messages_total{S}[W]))",
    "bytes": "sum(increase(worker_bytes_total{S}[W]))",
    "cpu_seconds": f"sum(increase(process_cpu_seconds_total[W]) {_JOIN})",
    "gc_seconds": "sum(increase(worker_gc_seconds_total{S}[W]))",
    "gc_collections": "sum(increase(worker_gc_collections_total{S}[W]))",
    "decode_sum": "sum(increase(worker_decode_seconds_sum{S}[W]))",
    "decode_count": "sum(increase(worker_decode_seconds_count{S}[W]))",
    "dead_letters": "sum(increase(worker_dead_letters_total{S}[W]))",
    "consumer_errors": "sum(increase(worker_consumer_errors_total{S}[W]))",
    "rss_bytes": f"avg(avg_over_time(process_resident_memory_bytes[W]) {_JOIN})",
    "lag": "sum(worker_consumer_lag_messages{S})",
    "processes": "count(worker_info{S})",
}
"""The dashboard's per-slice expressions: `S` becomes the side's matcher, `W` the
slice. The command reads `rss_bytes` (the mean per process) and `processes` (at a
slice's end) with them; the counters' figures come from their raw samples
(`COUNTERS`), and `lag` from `abrunner.staging.backlog`."""
GAUGES: Final = ("rss_bytes", "processes")
"""`EXPRESSIONS` read by range query at the slices' ends."""
COUNTERS: Final = {
    "messages": "worker_messages_total",
    "bytes": "worker_bytes_total",
    "cpu_seconds": "process_cpu_seconds_total",
    "gc_seconds": "worker_gc_seconds_total",
    "gc_collections": "worker_gc_collections_total",
    "decode_sum": "worker_decode_seconds_sum",
    "decode_count": "worker_decode_seconds_count",
    "dead_letters": "worker_dead_letters_total",
    "consumer_errors": "worker_consumer_errors_total",
}
"""Figure -> the counter whose raw samples give it; `process_*` series carry no
worker labels and are picked by the side's (job, instance) targets."""
BUCKETS: Final = {
    "e2e": "worker_e2e_latency_seconds_bucket",
    "decode": "worker_decode_seconds_bucket",
}
LOOKBACK_S: Final = 300.0
"""How far before the window raw samples are read, to find each series' value at
the window's start (Prometheus's own staleness lookback)."""
EVENTS: Final = ("dead_letters", "consumer_errors", "gc_seconds", "gc_collections")
"""Counters a worker may not have created yet: no series is 0 where messages flowed."""
HISTOGRAMS: Final = {
    "e2e": "sum by (le) (increase(worker_e2e_latency_seconds_bucket{S}[W]))",
    "decode": "sum by (le) (increase(worker_decode_seconds_bucket{S}[W]))",
}
STARTS: Final = f"max by (job, instance) (process_start_time_seconds {_JOIN})"
"""Each target's process start time (a restart changes it)."""
INFO: Final = "count by (codec, schema, version) (count_over_time(worker_info{S}[W]))"
TOPICS: Final = (
    "count by (topic, partition) (count_over_time(worker_consumer_lag_messages{S}[W]))"
)
INSTANCES: Final = "count by (job, instance) (count_over_time(worker_info{S}[W]))"
RULES: Final = {
    "cpu_us_per_msg": ("side:worker_cpu_seconds_per_message:rate1m", 1e6),
    "e2e_p99_ms": ("side:worker_e2e_latency_seconds:p99_rate1m", 1e3),
}
"""The recorded series of the dashboard's Verdict row (figure -> rule, scale to the
report's unit), read at the window's end for a selector on `side` alone."""


MAX_POINTS: Final = 10_000
"""Points per series of one range query (Prometheus refuses more than 11,000)."""


class StagingError(Exception):
    """A staging run that cannot be made; `status` is the exit status (1 or 2)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def render(template: str, selector: str, window_s: float) -> str:
    """`template` with the side's matcher and the range (`{side="A"}`, `[300s]`)."""
    return template.replace("{S}", "{" + selector + "}").replace(
        "[W]", f"[{_duration(window_s)}]"
    )


def _duration(seconds: float) -> str:
    ms = round(seconds * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


@dataclass(frozen=True)
class Window:
    """The analysed span, cut into `count` slices of `slice_s` seconds from `start`."""

    start: float
    end: float
    slice_s: float

    @property
    def count(self) -> int:
        """Whole slices in the window (a partial last slice is left out)."""
        return int((self.end - self.start) / self.slice_s + 1e-9)

    @property
    def edges(self) -> list[float]:
        """The slices' edges: the start, then each slice's end."""
        return [self.start + i * self.slice_s for i in range(self.count + 1)]

    @property
    def tail_s(self) -> float:
        """The window's last seconds after its last whole slice (left out)."""
        return max(0.0, self.end - self.edges[-1])

    @property
    def ends(self) -> list[float]:
        """Each slice's end, the time its figures are evaluated at."""
        return [self.start + (i + 1) * self.slice_s for i in range(self.count)]

    def index(self, at: float) -> int | None:
        """The slice whose evaluation time is `at`, None outside the window."""
        i = round((at - self.start) / self.slice_s) - 1
        return i if 0 <= i < self.count else None


@dataclass
class Side:
    """One side's identity and per-slice figures (None: no data in that slice).

    Attributes:
        name: `A` or `B`.
        selector: its PromQL label matchers.
        codec: the codec its `worker_info` names.
        schema: the schema its `worker_info` names.
        version: the worker versions seen, comma-separated.
        topics: the topics its workers read (from their lag gauges).
        partitions: the topic partitions they reported lag for.
        instances: the (job, instance) targets seen in the window.
        series: figure -> per-slice values (`EXPRESSIONS` keys).
        histograms: `e2e`/`decode` -> per slice, cumulative `le` -> increase.
        starts: per slice, processes started in it (restarts, new pods).
        totals: `messages` and `bytes` over the whole slices (the slices' sum,
            which the counters' raw samples make exact).
        tail: `messages` and `bytes` in the window's last part shorter than a
            slice (`Window.tail_s`), left out of the slices.
        lag: the side's backlog at every step of the window, (time, messages)
            (`abrunner.staging.backlog`).
        started: (job, instance) -> the process start times seen on it.
        dashboard: `RULES` figures at the window's end, where the rules exist
            and the selector picks one of their series.
    """

    name: str
    selector: str
    codec: str = ""
    schema: str = ""
    version: str = ""
    topics: tuple[str, ...] = ()
    partitions: int = 0
    instances: frozenset[tuple[str, str]] = frozenset()
    series: dict[str, list[float | None]] = field(default_factory=dict)
    histograms: dict[str, list[dict[float, float]]] = field(default_factory=dict)
    starts: list[int] = field(default_factory=list)
    totals: dict[str, float] = field(default_factory=dict)
    tail: dict[str, float] = field(default_factory=dict)
    lag: list[tuple[float, float]] = field(default_factory=list)
    started: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    dashboard: dict[str, float] = field(default_factory=dict)

    def has_data(self, i: int) -> bool:
        """The side handled messages in slice `i` (a series present that did not
        move is no data: a stalled side is not compared on it)."""
        return (self.series["messages"][i] or 0.0) > 0


def read_side(client: Client, name: str, selector: str, window: Window) -> Side:
    """A side's identity and per-slice figures.

    Raises:
        StagingError: the selector is refused (2), matches no worker (2), has no
            data in the window (2), or names two codecs (2); Prometheus fails (1).
    """
    flag = f"--{name.lower()} '{selector}'"
    side = Side(name, selector)
    span = window.end - window.start
    try:
        info = client.query(render(INFO, selector, span), window.end)
    except BadQuery as exc:
        raise StagingError(f"{flag}: Prometheus refused it: {exc}", 2) from None
    except PrometheusError as exc:
        raise StagingError(f"Prometheus unreachable: {exc}", 1) from None
    try:
        if not info:
            raise StagingError(_nothing(client, flag, selector), 2)
        codecs = sorted({labels.get("codec", "") for labels, _ in info})
        if len(codecs) > 1:
            raise StagingError(
                f"{flag}: the side runs {len(codecs)} codecs ({', '.join(codecs)}): "
                "narrow the selector to one deployment, or the window to after a "
                "switch",
                2,
            )
        side.codec = codecs[0]
        side.schema = sorted({labels.get("schema", "") for labels, _ in info})[0]
        side.version = ", ".join(sorted({lb.get("version", "?") for lb, _ in info}))
        lags = client.query(render(TOPICS, selector, span), window.end)
        side.topics = tuple(sorted({lb.get("topic", "") for lb, _ in lags}))
        side.partitions = len(lags)
        seen = client.query(render(INSTANCES, selector, span), window.end)
        side.instances = frozenset((lb["job"], lb["instance"]) for lb, _ in seen)
        _read_slices(client, side, window)
    except BadQuery as exc:
        raise StagingError(f"{flag}: Prometheus refused a query: {exc}", 2) from None
    except PrometheusError as exc:
        raise StagingError(f"Prometheus unreachable: {exc}", 1) from None
    if not any(side.has_data(i) for i in range(window.count)):
        raise StagingError(
            f"{flag}: no messages handled in the window (the workers exist but their "
            "counters did not move): choose a window when traffic flowed",
            2,
        )
    return side


def _nothing(client: Client, flag: str, selector: str) -> str:
    """Why a selector found no worker in the window: it matches none at all, or
    none in this window."""
    ever = client.series("worker_info{" + selector + "}")
    if not ever:
        return (
            f"{flag}: matches no worker (no worker_info series at all); the shipped "
            'configs label the sides side="A" and side="B"'
        )
    return f"{flag}: no data in the window (its workers were scraped at other times)"


def _read_slices(client: Client, side: Side, window: Window) -> None:
    n, ends = window.count, window.ends
    side.starts = _starts(client, side, window)
    for key in GAUGES:
        values: list[float | None] = [None] * n
        for _labels, points in client.query_range(
            render(EXPRESSIONS[key], side.selector, window.slice_s),
            ends[0],
            ends[-1],
            window.slice_s,
        ):
            for at, value in points.items():
                if (i := window.index(at)) is not None:
                    values[i] = value
        side.series[key] = values
    edges = window.edges + ([window.end] if window.tail_s > 0 else [])
    for key, metric in COUNTERS.items():
        gained = counters.summed_gains(_raw(client, side, metric, window), edges)
        side.series[key] = [None] * n if gained is None else list(gained[:n])
        if key in ("messages", "bytes"):
            side.totals[key] = math.fsum(gained[:n]) if gained else 0.0
            side.tail[key] = math.fsum(gained[n:]) if gained else 0.0
    for key in EVENTS:  # no series yet: nothing happened where messages flowed
        side.series[key] = [
            0.0 if v is None and side.has_data(i) else v
            for i, v in enumerate(side.series[key])
        ]
    for key, metric in BUCKETS.items():
        raw = [
            (float(labels.get("le", "nan")), samples, starts)
            for labels, samples, starts in _labelled(client, side, metric, window)
        ]
        side.histograms[key] = counters.bucket_gains(raw, window.edges)
    side.lag = backlog.read(client, side.selector, window.start, window.end)
    side.series["lag"] = backlog.per_slice(side.lag, window.edges, max)
    side.series["lag_end"] = backlog.per_slice(side.lag, window.edges, None)
    for figure, (record, scale) in RULES.items():
        found = client.query(record + "{" + side.selector + "}", ends[-1])
        if len(found) == 1:
            side.dashboard[figure] = found[0][1] * scale


def _labelled(
    client: Client, side: Side, metric: str, window: Window
) -> list[tuple[dict[str, str], counters.Samples, list[float]]]:
    return counters.read(
        client,
        metric,
        side.selector,
        side.instances,
        side.started,
        (window.start - LOOKBACK_S, window.end),
    )


def _raw(
    client: Client, side: Side, metric: str, window: Window
) -> list[tuple[counters.Samples, list[float]]]:
    return [(s, st) for _, s, st in _labelled(client, side, metric, window)]


def _starts(client: Client, side: Side, window: Window) -> list[int]:
    """Per slice, the processes whose start time lies in it (a restart on the same
    target, or a new one); every start time seen per target goes to `side.started`
    (from `LOOKBACK_S` before the window: the counters' resets). Sampled at a fifth
    of a slice (at least 1 s), so a process that lived shorter than that may be
    missed."""
    begin = window.start - LOOKBACK_S
    step = max(1.0, window.slice_s / 5, (window.end - begin) / MAX_POINTS)
    found = [0] * window.count
    counted: set[tuple[str, str, float]] = set()
    for labels, points in client.query_range(
        render(STARTS, side.selector, window.slice_s), begin, window.end, step
    ):
        target = (labels.get("job", ""), labels.get("instance", ""))
        for value in points.values():
            started = (*target, round(value, 3))
            if started in counted:
                continue
            counted.add(started)
            side.started.setdefault(target, []).append(value)
            if window.start < value <= window.end and window.count:
                i = min(int((value - window.start) / window.slice_s), window.count - 1)
                found[i] += 1
    return found


def overlap(a: Side, b: Side) -> set[tuple[str, str]]:
    """Targets both selectors matched: the sides are not two deployments."""
    return set(a.instances & b.instances)


def summed(values: list[float | None], picked: list[int]) -> float | None:
    """The sum of `values` at `picked` indices; None when any is missing."""
    chosen = [values[i] for i in picked]
    if any(v is None for v in chosen):
        return None
    return math.fsum(v for v in chosen if v is not None)


def merged(
    histograms: list[dict[float, float]], picked: list[int]
) -> dict[float, float]:
    """The slices' cumulative bucket increases added up, bucket by bucket."""
    total: dict[float, float] = defaultdict(float)
    for i in picked:
        for le, count in histograms[i].items():
            total[le] += count
    return dict(total)
