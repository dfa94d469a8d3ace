"""Counters read from their raw samples, cut at slice edges so the slices add up.

Why not `increase()` over back-to-back ranges: what a counter gained between the
last scrape of one slice and the first scrape of the next belongs to neither range,
and `increase()` extrapolates it back only for steady traffic. A worker that comes
back from a crash and catches up 40,000 messages in one scrape interval puts them
in that gap: with the slices moved by one second, they vanish from the report
(issue 31: a side's window total 10.9 % short). Here every series' raw samples are
read once and each slice gets what the counter gained from its last sample at or
before the slice's start edge to its last sample at or before its end edge, so:

- every increase the counters recorded lands in exactly one slice, and the slices
  sum to the window's total for any start, slice length and scrape interval;
- a counter that went down was reset (a process restarted on the same target): the
  increase across the reset is the new value, as Prometheus's `increase()` reads it;
- a series first seen inside the window (a process or a label child born then)
  counts from 0, since the worker's counters start at 0 (a target that Prometheus
  began to scrape in mid-life would be over-counted by what it had before);
- sums are taken per series first, then over series (a side's pods, outcomes,
  histogram buckets of one `le`).

A slice's increase is booked at the scrape that recorded it, so a burst between
two scrapes goes to the slice of the later one: the counts are exact, only their
placement is at scrape resolution.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence, Set

from abrunner.staging.prometheus_api import Client

Samples = Sequence[tuple[float, float]]
"""One series' raw samples: (unix time, value), in time order."""


def cumulative(samples: Samples, starts: Sequence[float] = ()) -> list[float]:
    """The series' reset-aware running total at each sample.

    A sample below the one before it, or the first after a process start time in
    `starts` (its target restarted between the two scrapes, which a counter that
    caught up past its old value would not show), starts again from 0: its gain
    is its own value. The first sample's running total is its value.
    """
    found: list[float] = []
    total, last, before = 0.0, 0.0, -math.inf
    for at, value in samples:
        restarted = any(before < s <= at for s in starts)
        total += value if value < last or restarted else value - last
        last, before = value, at
        found.append(total)
    return found


def gains(
    samples: Samples, edges: Sequence[float], starts: Sequence[float] = ()
) -> list[float]:
    """What one counter series gained in each span `edges[i]` to `edges[i + 1]`.

    Args:
        samples: the series' raw samples, from before `edges[0]` if it existed then.
        edges: the span edges, ascending (n + 1 edges give n spans).
        starts: its process's start times (see `cumulative`).

    Returns:
        n increases: the running total at the last sample at or before each end
        edge, minus the one at or before its start edge (0 before the series'
        first sample: born in the window, it counts from 0).
    """
    times = [at for at, _ in samples]
    totals = cumulative(samples, starts)

    def at(edge: float) -> float:
        i = bisect.bisect_right(times, edge)
        return totals[i - 1] if i else 0.0

    values = [at(e) for e in edges]
    return [max(0.0, values[i + 1] - values[i]) for i in range(len(edges) - 1)]


def summed_gains(
    series: Iterable[tuple[Samples, Sequence[float]]], edges: Sequence[float]
) -> list[float] | None:
    """Per span, the gains of every (samples, starts) series added up; None when
    there is no series."""
    total: list[float] | None = None
    for samples, starts in series:
        found = gains(samples, edges, starts)
        if total is None:
            total = found
        else:
            total = [a + b for a, b in zip(total, found, strict=True)]
    return total


def bucket_gains(
    series: Iterable[tuple[float, Samples, Sequence[float]]], edges: Sequence[float]
) -> list[dict[float, float]]:
    """Per span, cumulative histogram buckets (`le` -> gain), summed per `le` over
    the (le, samples, starts) series (processes) that carry that bucket."""
    spans: list[defaultdict[float, float]] = [
        defaultdict(float) for _ in range(len(edges) - 1)
    ]
    for le, samples, starts in series:
        if math.isnan(le):
            continue
        for i, gained in enumerate(gains(samples, edges, starts)):
            spans[i][le] += gained
    return [dict(span) for span in spans]


def read(
    client: Client,
    metric: str,
    selector: str,
    targets: Set[tuple[str, str]],
    started: Mapping[tuple[str, str], list[float]],
    span: tuple[float, float],
) -> list[tuple[dict[str, str], Samples, list[float]]]:
    """Raw samples of `metric` in `span` (from, to], each series with its target's
    process start times.

    Args:
        client: the Prometheus server.
        metric: a counter (or a histogram's `_bucket` series).
        selector: the side's matcher, for the worker's own series.
        targets: the side's (job, instance) targets: `process_*` series carry no
            worker labels and are picked by target.
        started: (job, instance) -> its process start times.
        span: from, to (unix seconds).
    """
    if metric.startswith("process_"):
        if not targets:
            return []
        jobs = "|".join(sorted({_regex(j) for j, _ in targets}))
        hosts = "|".join(sorted({_regex(i) for _, i in targets}))
        selector = f'job=~"{jobs}",instance=~"{hosts}"'
    expr = f"{metric}{{{selector}}}[{math.ceil(span[1] - span[0])}s]"
    found: list[tuple[dict[str, str], Samples, list[float]]] = []
    for labels, samples in client.samples(expr, span[1]):
        target = (labels.get("job", ""), labels.get("instance", ""))
        if metric.startswith("process_") and target not in targets:
            continue
        found.append((labels, samples, started.get(target, [])))
    return found


def _regex(value: str) -> str:
    """`value` as a literal in a PromQL regex (a Go string: backslashes doubled)."""
    return re.escape(value).replace("\\", "\\\\")
