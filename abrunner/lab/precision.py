"""`--precision`: a paired run adds repeats until its CPU ratios are as precise as asked.

A paired run's CPU us/msg ratios get a 95 % interval from blocks of windows
(`abrunner.report.paired`). How wide it comes out depends on the machine's noise,
which no duration chosen beforehand knows: three repeats of 10 s gave ±10 % to
±18 % on this project's machine alone, and two such runs differed by 6-7 %
beside other work. So with `--precision P` a profile runs its `--repeat` repeats,
then checks after each repeat whether every candidate's CPU ratio to the baseline
has an interval within P of the ratio (`half_width`: the interval's farther bound,
as a fraction of the ratio), and runs another repeat while one does not, until
the time cap (`--precision-cap`) would be passed by one more.

Repeats, not a longer load: each repeat starts fresh workers on fresh topics, so
the blocks of windows span what differs from one start to the next (the
partitions' assignment, the memory layout, the neighbours' load at that moment),
which a longer single repeat would not sample and its interval would not show.
Checking after whole repeats only, from `--repeat` on, keeps the early, few-block
intervals (whose widths are themselves noisy) from stopping a run by chance.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Final

from abrunner.plan import Plan
from abrunner.report import paired as paired_ratios
from abrunner.results import Ratio
from abrunner.windowed import Paired, PrecisionStop

FIGURE: Final = "cpu_us_per_msg"
FAILURES: Final = 2
"""Repeats failed one after another that end a profile (one may be the machine's
moment: a worker that got no partitions in time on an overloaded machine)."""
MAX_REPEATS: Final = 100
"""As many repeats as `--repeat` allows: the cap's fallback for a tiny window."""


def half_width(ratio: Ratio) -> float | None:
    """How far the interval reaches from the ratio, as a fraction of it: the
    larger of high/ratio - 1 and 1 - low/ratio; None without an interval."""
    if ratio.low is None or ratio.high is None or ratio.why is not None:
        return None
    if not ratio.ratio > 0:
        return None
    return max(ratio.high / ratio.ratio - 1, 1 - ratio.low / ratio.ratio)


def widest(
    windows: Paired, profile: str, baseline: str, codecs: Sequence[str]
) -> tuple[float | None, str | None]:
    """The widest CPU ratio's half-width over every candidate, and its codec; the
    half-width is None (and the codec the first such) while a ratio has none."""
    found: list[tuple[float, str]] = []
    for codec in codecs:
        if codec == baseline:
            continue
        ratios = paired_ratios.ratios(windows, profile, baseline, codec)
        cpu = next((r for r in ratios if r.figure == FIGURE), None)
        half = None if cpu is None else half_width(cpu)
        if half is None:
            return None, codec
        found.append((half, codec))
    if not found:
        return None, None
    half, codec = max(found)
    return half, codec


def why_stop(
    *,
    asked: float,
    reached: float | None,
    repeats: int,
    min_repeats: int,
    elapsed_s: float,
    longest_s: float,
    cap_s: float,
    failed_in_a_row: int = 0,
) -> str | None:
    """Why to stop adding repeats, or None to run another.

    Args:
        asked: the precision asked (a fraction).
        reached: the widest half-width so far (None: a ratio has no interval).
        repeats: repeats run so far.
        min_repeats: `--repeat`: run at least these before checking.
        elapsed_s: the profile's time so far.
        longest_s: its longest repeat: what one more is expected to take.
        cap_s: the time cap.
        failed_in_a_row: the last repeats that failed, one after another (two:
            more of the same would fail too).
    """
    if repeats < min_repeats:
        return None
    if reached is not None and reached <= asked:
        return "reached"
    if failed_in_a_row >= FAILURES:
        return "failed"
    if repeats >= MAX_REPEATS:
        return "repeat limit"
    if elapsed_s + longest_s > cap_s:
        return "time cap"
    return None


class Progress:
    """One profile's repeats under `--precision`: when to stop, and the record."""

    def __init__(self, plan: Plan, profile: str) -> None:
        self._plan = plan
        self._profile = profile
        self._start = self._mark = time.monotonic()
        self._longest = 0.0
        self._failed = 0
        self.repeats = 0
        self.reached: float | None = None
        self.widest: str | None = None

    def done(self, windows: Paired, failed: bool = False) -> str | None:
        """Count a repeat just finished (or `failed`); why to stop, or None."""
        plan = self._plan
        assert plan.precision is not None  # noqa: S101 (only built with --precision)
        now = time.monotonic()
        self.repeats += 1
        self._failed = self._failed + 1 if failed else 0
        self._longest = max(self._longest, now - self._mark)
        self._mark = now
        self.reached, self.widest = widest(
            windows, self._profile, plan.baseline, plan.codecs
        )
        return why_stop(
            asked=plan.precision,
            reached=self.reached,
            repeats=self.repeats,
            min_repeats=plan.repeat,
            elapsed_s=now - self._start,
            longest_s=self._longest,
            cap_s=plan.precision_cap_s,
            failed_in_a_row=self._failed,
        )

    def stop(self, windows: Paired, why: str) -> PrecisionStop:
        """The record of why this profile stopped, for the report."""
        plan = self._plan
        return PrecisionStop(
            profile=self._profile,
            asked=plan.precision or math.nan,
            reached=self.reached,
            widest=self.widest,
            repeats=self.repeats,
            windows=sum(
                1
                for w in windows.windows
                if w.profile == self._profile and w.codec == plan.baseline
            ),
            seconds=time.monotonic() - self._start,
            why=why,
            cap_s=plan.precision_cap_s,
        )

    def note(self, asked: float) -> str:
        """The progress line after a check: what was reached against what was asked."""
        if self.reached is None:
            return f"no interval yet for {self.widest}'s CPU ratio"
        return (
            f"widest CPU ratio interval ±{100 * self.reached:.1f} % ({self.widest}), "
            f"asked ±{100 * asked:g} %"
        )
