"""Histogram math every part shares: log-spaced buckets, batch-fed children, quantiles.

The worker feeds its histograms once per batch (`HistogramChild.observe_many`,
`merge`; its end-to-end latencies as raw ages, bucketed in bulk when read:
`AgeHistogramChild`), the load generator merges per-tick counts, and the A/B runner reads
deltas of scraped cumulative buckets; all of them ask `quantile` the same question
the same way as Prometheus' `histogram_quantile`: linear within the bucket that
holds the rank. A rank in the overflow bucket (above the top bound) has no upper
bound: `quantile` returns `math.inf` there, and reports say "> top bucket" rather
than quoting a capped number.
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from typing import Final

from prometheus_client import CollectorRegistry
from prometheus_client.core import HistogramMetricFamily, Metric


def log_buckets(low: float, high: float, per_doubling: int) -> tuple[float, ...]:
    """Bucket bounds from `low` to at least `high`, `per_doubling` per factor of 2."""
    factor = 2.0 ** (1.0 / per_doubling)
    bounds = [low]
    while bounds[-1] < high:
        bounds.append(bounds[-1] * factor)
    return tuple(float(f"{b:.3g}") for b in bounds)


LATENCY_BUCKETS: Final = log_buckets(10e-6, 6 * 3600.0, 3)
"""End-to-end latency: 10 us to 6 h, three buckets per doubling (within 13 %).

The top is hours, not seconds: a consumer that falls behind for an hour must still
report its latency, not a capped 60 s."""

PER_MESSAGE_BUCKETS: Final = log_buckets(0.25e-6, 10.0, 3)
"""Decode and handle time per message: 0.25 us to 10 s, three per doubling."""


def quantile(
    bounds: Sequence[float], counts: Sequence[float], q: float
) -> float | None:
    """The `q` quantile of a histogram, as Prometheus' `histogram_quantile`.

    Args:
        bounds: the buckets' upper bounds, ascending (the lowest bucket starts at 0).
        counts: observations per bucket (not cumulative), `len(bounds) + 1` long:
            the last is the overflow bucket above `bounds[-1]`.
        q: the quantile, 0 to 1.

    Returns:
        None with no observations; `math.inf` when the rank lies in the overflow
        bucket; else linear interpolation within the bucket holding the rank.
    """
    total = sum(counts)
    if total <= 0:
        return None
    rank, below, lower = q * total, 0.0, 0.0
    for bound, count in zip(bounds, counts, strict=False):
        if count and below + count >= rank:
            return lower + (bound - lower) * max(rank - below, 0.0) / count
        below, lower = below + count, bound
    return math.inf


class HistogramChild:
    """One label set of a `BatchHistogram`: per-bucket counts (not cumulative), sum."""

    __slots__ = ("_lock", "bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = list(bounds)
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0
        self._lock = threading.Lock()

    def observe_n(self, value: float, n: int) -> None:
        """Record `n` observations of the same `value`."""
        idx = bisect_right(self.bounds, value)
        with self._lock:
            self.counts[idx] += n
            self.total += value * n

    def observe_many(self, values: Sequence[float]) -> None:
        """Record each of `values` (bucketed outside the lock).

        Costs O(len(values)), not O(buckets): a batch's few dozen samples touch a
        few of the ~90 latency buckets, and walking all of them cost the loop
        ~4 us a batch."""
        bounds = self.bounds
        idxs = [bisect_right(bounds, v) for v in values]
        total = sum(values)
        with self._lock:
            counts = self.counts
            for i in idxs:
                counts[i] += 1
            self.total += total

    def merge(self, counts: Sequence[int], total: float) -> None:
        """Add pre-bucketed counts (same bounds, overflow last) and their sum."""
        with self._lock:
            mine = self.counts
            for i, c in enumerate(counts):
                if c:
                    mine[i] += c
            self.total += total

    def snapshot(self) -> tuple[list[int], float]:
        """A consistent copy of (counts, sum)."""
        with self._lock:
            return list(self.counts), self.total


class AgeHistogramChild(HistogramChild):
    """A histogram of ages in seconds, fed raw ages in integer nanoseconds.

    The loop hands over a batch's sampled ages as they are (`add_ages`: one list
    extend under the lock); they are bucketed in bulk when the histogram is read
    (`snapshot`, a scrape) or when `FOLD_AT` are waiting (`_fold`): sorted (C's
    timsort, specialised for ints under 2**30, ages under ~1.07 s), then one
    `bisect_left` per bucket edge between the smallest and the largest. ~55 ns an
    age (`map` of `bisect_right` over each age into a `Counter` took ~125, and
    bucketing each in the loop ~500); ages over a second sort at about that older
    cost. With every stamp read this is the largest part of what the worker's
    latency histogram adds to a loop that only reads stamps. An age that cannot be
    a latency is not observed but counted by reason in `invalid`: `negative` (sent
    after now: a producer's clock ahead) or `too_large` (older than `max_ns`); the
    loop counts `unparsable` itself.
    """

    __slots__ = ("_edges", "_pending", "invalid", "max_ns")

    FOLD_AT: Final = 4096
    """Ages kept before they are bucketed without a read (32 KiB of list)."""

    def __init__(self, bounds: Sequence[float], max_ns: int) -> None:
        if max_ns < bounds[-1] * 1e9:
            raise ValueError("max_ns must lie above the top bucket")
        super().__init__(bounds)
        self.max_ns = max_ns
        # An age's place among [0, bounds in ns..., max_ns + 1] (`bisect_right`: the
        # edges at or below it): 0 is negative, 1 the first bucket, len(bounds) + 1
        # the overflow bucket, len(bounds) + 2 too large.
        self._edges = [0, *(round(b * 1e9) for b in bounds), max_ns + 1]
        self._pending: list[int] = []
        self.invalid = {"unparsable": 0, "negative": 0, "too_large": 0}

    def add_ages(self, ages_ns: list[int], unparsable: int = 0) -> None:
        """Record a batch's ages (ns, `now - sent`) and its unparsable stamps."""
        with self._lock:
            self._pending += ages_ns
            if unparsable:
                self.invalid["unparsable"] += unparsable
            if len(self._pending) >= self.FOLD_AT:
                self._fold()

    def _fold(self) -> None:
        """Bucket the pending ages (the lock held).

        Sorted, the ages at place j (`edges[j - 1] <= age < edges[j]`) are those
        between `bisect_left` of the two edges, and the invalid ones are the ends:
        the negative first, the too large last."""
        ages, self._pending = self._pending, []
        if not ages:
            return
        ages.sort()
        edges, counts = self._edges, self.counts
        first, last = bisect_right(edges, ages[0]), bisect_right(edges, ages[-1])
        places = [0] * (len(edges) + 1)
        lo = 0
        for j in range(first, last):
            hi = bisect_left(ages, edges[j], lo)
            places[j], lo = hi - lo, hi
        places[last] = len(ages) - lo
        for i, n in enumerate(places[1:-1]):  # the buckets', overflow last
            counts[i] += n
        negative, too_large = places[0], places[-1]
        if negative or too_large:
            self.invalid["negative"] += negative
            self.invalid["too_large"] += too_large
            ages = ages[negative : len(ages) - too_large]
        self.total += sum(ages) * 1e-9

    def snapshot(self) -> tuple[list[int], float]:
        with self._lock:
            self._fold()
            return list(self.counts), self.total

    def state(self) -> tuple[list[int], float, dict[str, int]]:
        """A consistent copy of (counts, sum, ages not observed by reason)."""
        with self._lock:
            self._fold()
            return list(self.counts), self.total, dict(self.invalid)


class BatchHistogram:
    """A Prometheus histogram that is fed per batch instead of per message."""

    def __init__(
        self,
        name: str,
        documentation: str,
        buckets: Sequence[float],
        labelnames: Sequence[str],
        registry: CollectorRegistry,
    ) -> None:
        self._name, self._doc = name, documentation
        self._bounds = tuple(buckets)
        self._labelnames = tuple(labelnames)
        self._children: dict[tuple[str, ...], HistogramChild] = {}
        registry.register(self)

    def labels(self, *values: str) -> HistogramChild:
        """The child for `values`; resolve it once, outside any loop."""
        child = self._children.get(values)
        if child is None:
            child = self._children.setdefault(values, HistogramChild(self._bounds))
        return child

    def describe(self) -> list[Metric]:
        return [HistogramMetricFamily(self._name, self._doc, labels=self._labelnames)]

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self._name, self._doc, labels=self._labelnames)
        for values, child in list(self._children.items()):
            counts, total = child.snapshot()
            family.add_metric(
                list(values), cumulative_buckets(self._bounds, counts), total
            )
        yield family


def cumulative_buckets(
    bounds: Sequence[float], counts: Sequence[float]
) -> list[tuple[str, float]]:
    """Prometheus `le` buckets (`+Inf` last) from per-bucket counts."""
    out, running = [], 0.0
    for bound, count in zip([*bounds, math.inf], counts, strict=True):
        running += count
        out.append(("+Inf" if bound == math.inf else repr(bound), running))
    return out
