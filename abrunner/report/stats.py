"""Ratios between codecs or runs with 95 % Student t intervals on their logarithm.

Why t intervals on logs, and not a bootstrap: `codec-ab` runs 3 to 10 repeats of a
case, and a bootstrap of 3 values has only 10 distinct resamples, so its
percentiles are a handful of the observed values and its 95 % interval is too
narrow; the t interval is exact for normal data at any n and widens honestly as
n falls (t = 4.30 at 2 degrees of freedom). Logarithms, because the figures
(CPU us/msg, p99, RSS) are positive and their noise is proportional: a ratio is a
difference of logs, and exp() of an interval on logs is an interval on the ratio
that never goes below zero.

Two designs, two intervals:

- `paired_ratio`: codecs within one run. Repeat i of every codec runs back to back
  (per repeat, per codec), so a slow phase of the shared machine hits both sides
  of pair i; the interval is on the mean of the pairs' log ratios (n - 1 degrees
  of freedom), which removes that shared drift.
- `unpaired_ratio`: one report against another (`codec-ab --compare`). Repeat i of
  an old run has nothing in common with repeat i of a new one, so Welch's
  interval on the difference of the two mean logs (variances not assumed equal),
  with the Welch-Satterthwaite degrees of freedom rounded down: slightly wider,
  never narrower, than the exact fractional-df interval.

The t quantile is computed here (no SciPy): the closed-form CDF of Student's t for
an integer number of degrees of freedom (Abramowitz and Stegun 26.7.3-4),
inverted by bisection.

Window by window (`layout`, `ratios`): the one method behind both verdicts that
compare two sides measured at the same time: `codec-ab staging` (two live deployments, slices of minutes) and the lab's
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
from collections.abc import Sequence
from typing import Final, Literal, NamedTuple

from abrunner.results import CaseResult, Ratio

LEVEL: Final = 0.95
"""The intervals' coverage."""
MIN_REPEATS: Final = 3
"""Fewest values per side for an interval: with 2, t has 1 degree of freedom
(t = 12.7) and the interval spans orders of magnitude, which decides nothing."""

DECIDED: Final = {
    "cpu_us_per_msg": "CPU us/msg",
    "e2e_p99_ms": "p99 ms",
    "rss_steady_mb": "RSS MB",
}
"""The figures that get a ratio and an interval (lower is better for each), with
their table headers."""

Verdict = Literal["better", "worse", "no detectable difference"]
"""Where an interval on a lower-is-better ratio lies: below 1, above 1, across 1."""


class Interval(NamedTuple):
    """A ratio (geometric mean) and its `LEVEL` interval."""

    ratio: float
    low: float
    high: float


def t_quantile(df: int, level: float = LEVEL) -> float:
    """The two-sided `level` quantile of Student's t with `df` degrees of freedom.

    Args:
        df: degrees of freedom, at least 1.
        level: the central probability, e.g. 0.95 for t(0.975).

    Returns:
        The t with P(|T| <= t) = level (to about 1e-12).

    Raises:
        ValueError: `df` is below 1 or `level` is not in (0, 1).
    """
    if df < 1 or not 0 < level < 1:
        raise ValueError(
            f"t quantile: need df >= 1 and 0 < level < 1, got {df}, {level}"
        )
    low, high = 0.0, 1.0
    while _central(high, df) < level:
        high *= 2
    for _ in range(200):  # bisection halves the bracket: 200 steps reach 1e-12 of it
        middle = (low + high) / 2
        if _central(middle, df) < level:
            low = middle
        else:
            high = middle
        if high - low < 1e-12 * high:
            break
    return (low + high) / 2


def _central(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with integer `df` (A&S 26.7.3 and 26.7.4)."""
    theta = math.atan(t / math.sqrt(df))
    cos, sin = math.cos(theta), math.sin(theta)
    if df % 2:  # odd: 2/pi (theta + sin (cos + 2/3 cos^3 + ... + cos^(df-2)))
        total = term = cos if df > 1 else 0.0
        for j in range(2, df - 2, 2):
            term *= cos * cos * j / (j + 1)
            total += term
        return 2 / math.pi * (theta + sin * total)
    total = term = 1.0  # even: sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
    for j in range(1, df - 2, 2):
        term *= cos * cos * j / (j + 1)
        total += term
    return sin * total


def paired_ratio(base: Sequence[float], other: Sequence[float]) -> Interval | None:
    """`other` over `base`, pair by pair (same repeat), with a `LEVEL` t interval.

    Args:
        base: the baseline's positive figures, one per repeat.
        other: the other codec's, in the same order.

    Returns:
        The geometric mean of the pairs' ratios and its interval, or None with fewer
        than `MIN_REPEATS` pairs.

    Raises:
        ValueError: the sequences differ in length or hold a value <= 0.
    """
    if len(base) != len(other):
        raise ValueError(f"paired ratio: {len(base)} vs {len(other)} values")
    if len(base) < MIN_REPEATS:
        return None
    logs = [math.log(o) - math.log(b) for b, o in zip(base, other, strict=True)]
    half = t_quantile(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return _interval(statistics.fmean(logs), half)


def unpaired_ratio(old: Sequence[float], new: Sequence[float]) -> Interval | None:
    """`new` over `old`, two independent samples, with a `LEVEL` Welch t interval.

    Args:
        old: the positive figures of one run, one per repeat.
        new: the other run's.

    Returns:
        The ratio of the geometric means and its interval, or None when either
        side has fewer than `MIN_REPEATS` values.

    Raises:
        ValueError: a value is <= 0.
    """
    if min(len(old), len(new)) < MIN_REPEATS:
        return None
    a, b = [math.log(v) for v in old], [math.log(v) for v in new]
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    centre = statistics.fmean(b) - statistics.fmean(a)
    if va + vb == 0:  # identical repeats on both sides: no spread to widen it by
        return _interval(centre, 0.0)
    # Welch-Satterthwaite, rounded down: the conservative side.
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return _interval(centre, t_quantile(max(1, math.floor(df))) * math.sqrt(va + vb))


def _interval(centre: float, half: float) -> Interval:
    return Interval(math.exp(centre), math.exp(centre - half), math.exp(centre + half))


def verdict(interval: Interval, digits: int | None = None) -> Verdict:
    """For a lower-is-better ratio: better or worse when the interval excludes 1.

    With `digits`, decided on the bounds as printed with that many decimals, so a
    reader sees the reason: `0.96x to 1.00x` is never "better".
    """
    low, high = interval.low, interval.high
    if digits is not None:
        low, high = round(low, digits), round(high, digits)
    if high < 1:
        return "better"
    if low > 1:
        return "worse"
    return "no detectable difference"


def digits(interval: Interval, most: int = 4) -> int:
    """Decimals (2 to `most`) that show whether the interval excludes 1.

    2 unless a bound that lies on one side of 1 rounds onto it (0.998 -> 1.00):
    then as many more as it takes, at most `most`; `verdict(interval, digits)`
    decides on what is printed.
    """
    for d in range(2, most + 1):
        low, high = round(interval.low, d), round(interval.high, d)
        if (interval.high < 1) == (high < 1) and (interval.low > 1) == (low > 1):
            return d
    return most


MIN_BLOCKS: Final = MIN_REPEATS
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
        interval = paired_ratio(xs, ys) if decide else None
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
                verdict=None if interval is None else verdict(interval),
            )
        )
    return found


def _positive(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0
