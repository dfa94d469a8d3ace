"""Window-by-window ratios: windows grouped into blocks, a t interval over the blocks.

The one method behind both verdicts that compare two sides measured at the same
time: `codec-ab staging` (two live deployments, slices of minutes) and the lab's
paired mode (every codec's worker under the same load at once, windows of
seconds). Consecutive windows are not independent (a burst, a noisy neighbour or
a GC-heavy stretch spans several), so a t interval over windows would be too
narrow. The usable windows (data on both sides) are grouped into `layout` blocks
of consecutive windows (non-overlapping batch means): about the square root of
their number, at most `MAX_BLOCKS`; each block's figures come from its summed
counters and merged histograms, and the ratio B/A is taken block by block (the
same windows on both sides) with the lab's Student t interval on the mean log
ratio (`abrunner.report.stats.paired_ratio`, blocks - 1 degrees of freedom).
Longer blocks are nearly independent even when windows are not, and few blocks
give a wide interval, never a falsely narrow one. With fewer than `MIN_SLICES`
usable windows (3 blocks of 3) there is no interval and no verdict.
"""

from __future__ import annotations

import math
import statistics
from typing import Final

from abrunner.report import stats
from abrunner.report.stats import DECIDED
from abrunner.results import CaseResult, Ratio

MIN_BLOCKS: Final = stats.MIN_REPEATS
MIN_SLICES: Final = MIN_BLOCKS * 3
"""Fewest usable windows (slices) for a verdict: 3 blocks of 3."""
MAX_BLOCKS: Final = 10


def layout(usable: list[int]) -> tuple[list[list[int]], int]:
    """The blocks (lists of slice indices) and how many early slices were left out.

    About sqrt(n) blocks of n // blocks consecutive usable slices; the earliest
    remainder is dropped so every block has as many slices. One block of every
    slice when there are too few for `MIN_BLOCKS`.
    """
    n = len(usable)
    count = min(MAX_BLOCKS, math.isqrt(n))
    if n < MIN_SLICES or count < MIN_BLOCKS:
        return ([usable] if usable else []), 0
    size = n // count
    dropped = n - size * count
    kept = usable[dropped:]
    return [kept[i * size : (i + 1) * size] for i in range(count)], dropped


def ratios(
    a: list[CaseResult], b: list[CaseResult], profile: str, decide: bool
) -> list[Ratio]:
    """B over A for each `DECIDED` figure, block by block; intervals when `decide`."""
    found = []
    for figure in DECIDED:
        pairs = [
            (x, y)
            for ra, rb in zip(a, b, strict=True)
            if _positive(x := getattr(ra, figure))
            and _positive(y := getattr(rb, figure))
        ]
        if not pairs:
            continue
        xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
        interval = stats.paired_ratio(xs, ys) if decide else None
        logs = [math.log(y / x) for x, y in pairs]
        found.append(
            Ratio(
                profile=profile,
                codec=b[0].codec,
                figure=figure,
                pairs=len(pairs),
                ratio=math.exp(statistics.fmean(logs)),
                low=None if interval is None else interval.low,
                high=None if interval is None else interval.high,
                verdict=None if interval is None else stats.verdict(interval),
            )
        )
    return found


def _positive(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0
