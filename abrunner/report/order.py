"""Whether a sequential run's order showed: CPU per message by position in a repeat.

A sequential run measures one codec after another, so whatever drifts over a
repeat (the broker's log growing, the page cache, a neighbour's load) could land
on whichever codec runs first or last. The runner rotates the order repeat by
repeat (`abrunner.plan.rotations`); this module looks for what is left: each
case's log CPU us/msg less its codec's mean over the repeats (so the codecs'
own costs drop out), regressed on its position in the repeat. The slope, as a
factor per position, gets a 95 % t interval (cases - codecs - 1 degrees of
freedom: one mean per codec and the slope are estimated). An interval that
excludes no change means an order effect is visible: the rotation spreads it
over every codec, but the intervals of a sequential run carry it as noise, and a
paired run does not have it.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import NamedTuple

from abrunner.plan import Case, Plan
from abrunner.report import stats
from abrunner.results import CaseResult


class OrderEffect(NamedTuple):
    """CPU us/msg against position in the repeat.

    Attributes:
        per_position: the change per position later, as a fraction (0.03: 3 %
            more CPU per message for each case run before it in its repeat).
        low: the 95 % interval's lower end, as a fraction.
        high: its upper end.
        by_position: the mean deviation from the codec's own mean at each
            position, as a fraction.
        cases: the cases it rests on.
    """

    per_position: float
    low: float
    high: float
    by_position: list[float]
    cases: int

    @property
    def visible(self) -> bool:
        """The interval excludes no change."""
        return self.low > 0 or self.high < 0


def effect(
    plan: Plan, results: Sequence[CaseResult], profile: str
) -> OrderEffect | None:
    """The order effect on `profile`'s CPU us/msg; None where it cannot be seen
    (fewer than two repeats or two codecs measured, or too few cases)."""
    found = [
        r
        for r in results
        if r.profile == profile
        and r.error is None
        and r.cpu_us_per_msg is not None
        and r.cpu_us_per_msg > 0
    ]
    by_codec: dict[str, list[CaseResult]] = defaultdict(list)
    for r in found:
        by_codec[r.codec].append(r)
    kept = {c: rs for c, rs in by_codec.items() if len(rs) >= 2}
    points: list[tuple[int, float]] = []
    for codec, rs in kept.items():
        logs = [math.log(r.cpu_us_per_msg or 1.0) for r in rs]
        mean = statistics.fmean(logs)
        for r, value in zip(rs, logs, strict=True):
            case = Case(codec, plan.profiles[0], r.repeat)
            points.append((plan.position(case), value - mean))
    df = len(points) - len(kept) - 1
    xs = [float(x) for x, _ in points]
    if len(kept) < 2 or df < 1 or len(set(xs)) < 2:
        return None
    ys = [y for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    slope = math.fsum((x - mx) * (y - my) for x, y in points) / sxx
    residual = math.fsum((y - my - slope * (x - mx)) ** 2 for x, y in points)
    half = stats.t_quantile(df) * math.sqrt(residual / df / sxx)
    by_position: dict[int, list[float]] = defaultdict(list)
    for x, y in points:
        by_position[x].append(y)
    return OrderEffect(
        per_position=math.expm1(slope),
        low=math.expm1(slope - half),
        high=math.expm1(slope + half),
        by_position=[
            math.expm1(statistics.fmean(by_position[p])) for p in sorted(by_position)
        ],
        cases=len(points),
    )


def sentence(found: OrderEffect) -> str:
    """The effect in one sentence for report.md and the terminal."""
    shown = ", ".join(f"{v:+.1%}" for v in found.by_position)
    span = f"{found.low:+.1%} to {found.high:+.1%}"
    if found.visible:
        verdict = (
            f"an order effect is visible: {found.per_position:+.1%} CPU us/msg per "
            f"position later in a repeat (95 % interval {span})"
        )
    else:
        verdict = (
            f"no order effect is visible ({found.per_position:+.1%} per position, "
            f"95 % interval {span})"
        )
    return (
        f"Order: the codecs ran in a rotated order each repeat; CPU us/msg by "
        f"position against each codec's own mean, first to last: {shown} "
        f"({found.cases} cases): {verdict}."
    )
