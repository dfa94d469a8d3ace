"""A side's backlog over the whole window, and the stalls it shows.

The backlog is read at every step of the window (one range query, a step of 1 s or
more), not at the slices' ends only: a side that crashed and caught up between two
slice ends would otherwise show none. Per partition it is what a live member of the
side's consumer group reports (`worker_consumer_lag_messages`, from its position),
else what any member sees of the group's committed offset against the log end
(`worker_group_lag_messages`, exported for every partition of the topic): a
partition whose member died is in nobody's assignment until the group rebalances,
and its backlog shows only there. With every worker of a side down, no process
exports either, and the stall shows as slices in which the side handled nothing.

A side *stalled* where its backlog passed `LAG_S` seconds of its own traffic, or in
a slice where it handled nothing while the other side handled messages. Its latency
ratios then include the stall, and the report says so beside them.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from abrunner.staging.prometheus_api import Client

LAG: Final = (
    "sum(sum by (topic, partition) (worker_consumer_lag_messages{S}) "
    "or max by (topic, partition) (worker_group_lag_messages{S}))"
)
"""A side's backlog: each partition's lag from a live member's position, else the
group's committed lag as its members see it (the largest: they read it at
different moments)."""
LAG_S: Final = 1.0
"""A side whose backlog exceeds this many seconds of its own traffic lagged."""
MAX_POINTS: Final = 10_000


def read(
    client: Client, selector: str, start: float, end: float
) -> list[tuple[float, float]]:
    """The side's backlog, (time, messages), at steps of 1 s (longer for windows
    over `MAX_POINTS` seconds) from `start` to `end`."""
    step = max(1.0, (end - start) / MAX_POINTS)
    expr = LAG.replace("{S}", "{" + selector + "}")
    points: dict[float, float] = {}
    for _labels, series in client.query_range(expr, start, end, step):
        points.update(series)
    return sorted(points.items())


def per_slice(
    points: Sequence[tuple[float, float]],
    edges: Sequence[float],
    pick: Callable[[list[float]], float] | None,
) -> list[float | None]:
    """Per slice (`edges[i]` to `edges[i + 1]`), `pick` of the backlog's points in
    it (`max`), or the last point (`pick` None); None where there is none."""
    times = [at for at, _ in points]
    found: list[float | None] = []
    for lo, hi in itertools.pairwise(edges):
        first, last = bisect.bisect_right(times, lo), bisect.bisect_right(times, hi)
        inside = [v for _, v in points[first:last]]
        if not inside:
            found.append(None)
        else:
            found.append(inside[-1] if pick is None else pick(inside))
    return found


@dataclass(frozen=True)
class Stall:
    """Where a side fell behind: its backlog over `LAG_S` s of its traffic, or
    slices in which it handled nothing while the other side handled messages.

    Attributes:
        side: `A` or `B`.
        rate: the side's mean traffic (msg/s) the backlog is measured against.
        peak: the largest backlog (messages), 0 when none was seen.
        peak_at: when it was largest (unix time).
        over: (first, last) time the backlog was over `LAG_S` s of traffic.
        end: the backlog at the window's end.
        idle: slices (0-based) with no message handled while the other side
            handled some.
    """

    side: str
    rate: float
    peak: float
    peak_at: float
    over: tuple[float, float] | None
    end: float
    idle: tuple[int, ...]

    @property
    def lagged(self) -> bool:
        """The backlog passed `LAG_S` seconds of the side's traffic."""
        return self.over is not None

    @property
    def behind(self) -> bool:
        """Still over `LAG_S` seconds of traffic at the window's end."""
        return self.end > LAG_S * max(self.rate, 1.0)


def stall(
    side: str,
    lag: Sequence[tuple[float, float]],
    rate: float,
    handled: Sequence[float | None],
    other: Sequence[float | None],
) -> Stall | None:
    """The side's stall, None when it neither lagged nor stopped.

    Args:
        side: its name.
        lag: its backlog over the window, (time, messages).
        rate: its mean traffic over the window (msg/s).
        handled: its messages per slice.
        other: the other side's messages per slice.
    """
    limit = LAG_S * max(rate, 1.0)
    peak_at, peak = max(lag, key=lambda p: p[1], default=(0.0, 0.0))
    high = [at for at, v in lag if v > limit]
    idle = tuple(
        i
        for i, (mine, theirs) in enumerate(zip(handled, other, strict=True))
        if not mine and (theirs or 0.0) > 0
    )
    if not high and not idle:
        return None
    return Stall(
        side=side,
        rate=rate,
        peak=peak,
        peak_at=peak_at,
        over=(high[0], high[-1]) if high else None,
        end=lag[-1][1] if lag else 0.0,
        idle=idle,
    )
