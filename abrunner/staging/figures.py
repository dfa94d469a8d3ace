"""A staging run's figures: slices grouped into blocks, blocks into a report's rows,
and the B/A ratios with their intervals.

Why blocks: consecutive slices of a live deployment are not independent (a traffic
burst, a noisy neighbour or a GC-heavy minute spans several), so a t interval over
slices would be too narrow. The usable slices (data on both sides) are grouped into
`blocks` of consecutive slices (non-overlapping batch means): about the square root
of their number, at most `MAX_BLOCKS`; each block's figures are computed from its
summed counters and merged histograms, and the ratio B/A is taken block by block
(the same slices on both sides) with the lab run's Student t interval on the mean log
ratio (`abrunner.report.stats.paired_ratio`, blocks - 1 degrees of freedom). Longer blocks
are nearly independent even when slices are not, and few blocks give a wide
interval, never a falsely narrow one. With fewer than `MIN_SLICES` usable slices (3
blocks of 3) there is no interval and no verdict.
"""

from __future__ import annotations

import math
import statistics
from typing import Final

from abrunner.report.stats import (
    MAX_BLOCKS as MAX_BLOCKS,
    MIN_BLOCKS as MIN_BLOCKS,
    MIN_SLICES as MIN_SLICES,
    layout as layout,
    ratios as ratios,
)
from abrunner.results import CaseResult
from abrunner.staging import backlog
from abrunner.staging.slices import Side, merged, summed
from service.telemetry.histogram import quantile

LAG_S: Final = backlog.LAG_S
"""A side whose lag exceeds this many seconds of its own traffic fell behind."""


def key(side: Side) -> str:
    """A side's row key: `A: json+pydantic`."""
    return f"{side.name}: {side.codec}"


def figures(
    side: Side, picked: list[int], slice_s: float, profile: str, repeat: int
) -> CaseResult:
    """The side's figures over the slices `picked`, as one `CaseResult`."""
    s = side.series
    seconds = len(picked) * slice_s
    msgs = summed(s["messages"], picked) or 0.0
    result = CaseResult(codec=key(side), profile=profile, repeat=repeat, mode="rate")
    result.throughput = msgs / seconds
    result.processed = round(msgs)
    if (cpu := _pair(s, "cpu_seconds", "messages", picked)) is not None:
        result.cpu_pct = 100 * cpu[0] / (cpu[2] * slice_s)
        result.cpu_us_per_msg = 1e6 * cpu[0] / cpu[1] if cpu[1] > 0 else None
    e2e = merged(side.histograms["e2e"], picked)
    for field, q in (("e2e_p50_ms", 0.5), ("e2e_p99_ms", 0.99), ("e2e_p999_ms", 0.999)):
        value = _quantile(e2e, q)
        setattr(result, field, None if value is None else 1e3 * value)
    median = _quantile(merged(side.histograms["decode"], picked), 0.5)
    result.decode_p50_us = None if median is None else 1e6 * median
    if (decode := _pair(s, "decode_sum", "decode_count", picked)) and decode[1] > 0:
        result.decode_us = 1e6 * decode[0] / decode[1]
    if (gc := _pair(s, "gc_seconds", "messages", picked)) is not None:
        result.gc_ms_per_s = 1e3 * gc[0] / (gc[2] * slice_s)
    if (runs := _pair(s, "gc_collections", "messages", picked)) and runs[1] > 0:
        result.gc_per_1k_msgs = 1e3 * runs[0] / runs[1]
    if (sent := _pair(s, "bytes", "messages", picked)) and sent[1] > 0:
        result.wire_bytes = sent[0] / sent[1]
    rss = [v for i in picked if (v := s["rss_bytes"][i]) is not None]
    if rss:
        result.rss_steady_mb = statistics.median(rss) / 2**20
        result.rss_peak_mb = max(rss) / 2**20
    lags = [v for i in picked if (v := s["lag"][i]) is not None]
    ends = [v for i in picked if (v := s.get("lag_end", s["lag"])[i]) is not None]
    if lags:  # the largest backlog seen at any step, and the last one
        result.lag_max = max(lags)
        result.lag_end = ends[-1] if ends else lags[-1]
        result.kept_up = result.lag_end <= LAG_S * max(result.throughput, 1.0)
    dead = [v for i in picked if (v := s["dead_letters"][i]) is not None]
    result.dead_lettered = round(math.fsum(dead))
    return result


def _pair(
    s: dict[str, list[float | None]], top: str, bottom: str, picked: list[int]
) -> tuple[float, float, int] | None:
    """`top` and `bottom` summed over the slices of `picked` that have both (a
    scrape missed under load leaves one series without a slice), and their count."""
    both = [i for i in picked if s[top][i] is not None and s[bottom][i] is not None]
    if not both:
        return None
    return summed(s[top], both) or 0.0, summed(s[bottom], both) or 0.0, len(both)


def _quantile(cumulative: dict[float, float], q: float) -> float | None:
    """`q` of a histogram given as cumulative `le` -> count (as Prometheus's)."""
    if not cumulative:
        return None
    bounds = sorted(le for le in cumulative if not math.isinf(le))
    counts, below = [], 0.0
    for le in bounds:
        counts.append(max(cumulative[le] - below, 0.0))
        below = max(below, cumulative[le])
    counts.append(max(cumulative.get(math.inf, below) - below, 0.0))
    return quantile(bounds, counts, q)
