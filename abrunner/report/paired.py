"""A paired run's ratios, window by window: the staging verdict's method in the lab.

In a paired run every codec's worker consumed the same traffic at the same time,
and each was sampled at the same window edges (`abrunner.windowed.Window`). A
stall of the machine (a neighbour's burst, the broker's log roll) hits every side
of a window alike, so it cancels in the window's ratio; a mean over windows of
minutes-apart repeats could not cancel it. The windows both sides have data in
are grouped into blocks (`abrunner.report.stats.layout`, as `codec-ab staging`
groups its slices), each block's CPU us/msg is its summed CPU over its summed
messages and its p99 the quantile of its summed latency histogram, and the block
ratios get the paired Student t interval (`abrunner.report.stats.ratios`).

Where the windows cannot support a verdict it says why instead of printing an
interval that decides nothing: too few usable windows, a stall on one side (a
window where it handled under `STALL` of what the other did: that side was
descheduled or blocked, and its p99 there is waiting, not decoding), or, for p99,
a side that lagged behind the traffic (its latency is queueing time) or a p99
above the histogram's top bucket.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from abrunner.report import stats
from abrunner.results import CaseResult, Ratio, Report
from abrunner.windowed import Capacity, Paired, Window
from service.telemetry.histogram import quantile

STALL: Final = 0.5
"""A side that handled under half of what the other did in a window stalled: the
same messages reached both in the same instants."""
LAG_S: Final = 1.0
"""A side whose lag exceeds this many seconds of its own traffic at a window's end
was behind in it: its latency there is queueing time."""
WINDOWED: Final = ("cpu_us_per_msg", "e2e_p99_ms")
"""The decided figures taken window by window (steady RSS is one figure per
repeat: it is compared repeat by repeat)."""


def stalls(a: Window, b: Window) -> str | None:
    """The side (`a` or `b`'s codec) that stalled in a window, if one did."""
    low, high = sorted((a.messages, b.messages))
    if high > 0 and low < STALL * high:
        return a.codec if a.messages < b.messages else b.codec
    return None


def behind(w: Window) -> bool:
    """The side lagged more than `LAG_S` of its own traffic at the window's end."""
    rate = w.messages / w.seconds if w.seconds > 0 else 0.0
    return w.lag > LAG_S * max(rate, 1.0)


def block(
    codec: str,
    profile: str,
    index: int,
    picked: Sequence[Window],
    bounds: Sequence[float],
) -> CaseResult:
    """One side's figures over the windows of a block, as a `CaseResult`."""
    result = CaseResult(codec=codec, profile=profile, repeat=index, mode="rate")
    messages = math.fsum(w.messages for w in picked)
    if messages > 0:
        result.cpu_us_per_msg = 1e6 * math.fsum(w.cpu_s for w in picked) / messages
    counts = [math.fsum(c) for c in zip(*(w.e2e for w in picked), strict=True)]
    p99 = quantile(list(bounds), counts, 0.99) if counts else None
    result.e2e_p99_ms = None if p99 is None else 1e3 * p99
    return result


def ratios(paired: Paired, profile: str, base: str, codec: str) -> list[Ratio]:
    """`codec` over `base` for `WINDOWED` figures, block by block, with the reason
    wherever there is no interval."""
    mine = _by_key(paired.windows, profile, codec)
    theirs = _by_key(paired.windows, profile, base)
    common = sorted(mine.keys() & theirs.keys())
    pairs = [(theirs[k], mine[k]) for k in common]
    both = [(a, b) for a, b in pairs if a.messages > 0 and b.messages > 0]
    stalled = [s for a, b in both if (s := stalls(a, b)) is not None]
    usable = [(a, b) for a, b in both if stalls(a, b) is None]
    layout, _dropped = stats.layout(list(range(len(usable))))
    a_blocks = [
        block(base, profile, i, [usable[j][0] for j in idx], paired.bounds)
        for i, idx in enumerate(layout)
    ]
    b_blocks = [
        block(codec, profile, i, [usable[j][1] for j in idx], paired.bounds)
        for i, idx in enumerate(layout)
    ]
    decide = len(usable) >= stats.MIN_SLICES and len(layout) >= stats.MIN_BLOCKS
    why = None if decide else _too_few(len(usable), len(both), stalled)
    lagging = {
        side: n
        for side, n in (
            (base, sum(behind(a) for a, _ in usable)),
            (codec, sum(behind(b) for _, b in usable)),
        )
        if n * 2 > len(usable)
    }
    found = []
    for r in stats.ratios(a_blocks, b_blocks, profile, decide) if layout else []:
        if r.figure not in WINDOWED:
            continue
        reason = why
        if reason is None and r.figure == "e2e_p99_ms" and lagging:
            reason = "; ".join(
                f"{side} lagged over {LAG_S:.0f} s of its traffic in {n} of "
                f"{len(usable)} windows: its p99 is queueing time, not decoding"
                for side, n in lagging.items()
            )
        if reason is None and r.pairs < stats.MIN_BLOCKS:
            reason = (
                f"p99 above the latency histogram's top bucket in "
                f"{len(layout) - r.pairs} of {len(layout)} blocks"
            )
        found.append(_decided(r, reason))
    return found


def _decided(r: Ratio, why: str | None) -> Ratio:
    """`r` with the lab's verdict on the interval as printed, or with `why`."""
    if why is not None or r.low is None or r.high is None:
        return Ratio(
            profile=r.profile,
            codec=r.codec,
            figure=r.figure,
            pairs=r.pairs,
            ratio=r.ratio,
            why=why or "no interval",
        )
    interval = stats.Interval(r.ratio, r.low, r.high)
    return Ratio(
        profile=r.profile,
        codec=r.codec,
        figure=r.figure,
        pairs=r.pairs,
        ratio=r.ratio,
        low=r.low,
        high=r.high,
        verdict=stats.verdict(interval, stats.digits(interval)),
    )


def _too_few(usable: int, with_data: int, stalled: list[str]) -> str:
    need = stats.MIN_SLICES
    if stalled:
        sides = ", ".join(f"{s} in {stalled.count(s)}" for s in sorted(set(stalled)))
        return (
            f"a stall on one side ({sides} of {with_data} windows) leaves "
            f"{usable} usable windows, {need} needed"
        )
    return (
        f"too few windows: {usable} with data on both sides, {need} needed "
        "(a longer --duration, more --repeat or a shorter --window-s)"
    )


def _by_key(
    found: Sequence[Window], profile: str, codec: str
) -> dict[tuple[int, int], Window]:
    return {
        (w.repeat, w.index): w
        for w in found
        if w.profile == profile and w.codec == codec
    }


def capacity_sentence(found: Capacity) -> str:
    """The check in one line, for the terminal and report.md."""
    if not found.workers:
        return f"paired run: not possible ({found.basis}): runs sequentially"
    each = ", ".join(f"{c} {v:.2f}" for c, v in found.workers.items())
    verdict = (
        "runs paired"
        if found.fits
        else "does not fit: runs sequentially, one codec after another"
    )
    load = "" if found.load is None else f", load average {found.load:.1f}"
    return (
        f"paired run: {len(found.workers)} workers need ~{found.needed:.2f} of "
        f"{found.cores} cores{load} ({each}; load generator and broker "
        f"{found.others:.2f}; from {found.basis}): {verdict}"
    )


def precision_lines(report: Report) -> list[str]:
    """With `--precision`: per profile, the precision the CPU ratios reached and why
    the run stopped adding repeats (or why it was not applied)."""
    plan = report.plan
    if plan.precision is None:
        return []
    asked = f"±{100 * plan.precision:g} %"
    if report.paired is None:
        return [
            f"`--precision {100 * plan.precision:g}%` was not applied: the run was "
            "sequential (the machine could not carry every worker at once), and "
            "its ratios are taken repeat by repeat."
        ]
    stops = {s.profile: s for s in report.paired.stops}
    lines = []
    for profile in report.summary:
        stop = stops.get(profile)
        head = f"Precision (`{profile}`)" if len(report.summary) > 1 else "Precision"
        if stop is None:
            lines.append(f"{head}: not decided, the run was interrupted.")
            continue
        spent = f"{stop.repeats} repeats, {stop.windows} windows, {stop.seconds:.0f} s"
        if stop.reached is None:
            reached = f"no interval yet for `{stop.widest}`'s CPU us/msg ratio"
        else:
            reached = (
                "every CPU us/msg ratio's 95 % interval within "
                f"±{100 * stop.reached:.1f} % "
                f"of it (widest: `{stop.widest}`)"
            )
        why = {
            "reached": "stopped: the precision asked was reached",
            "time cap": f"stopped at the time cap ({stop.cap_s:.0f} s, "
            "`--precision-cap`): another repeat would have passed it",
            "repeat limit": "stopped at the limit of repeats",
            "failed": "stopped: two repeats in a row failed (see the failed cases)",
        }.get(stop.why, f"stopped: {stop.why}")
        lines.append(f"{head}: {reached}, asked {asked}, after {spent}; {why}.")
    return lines
