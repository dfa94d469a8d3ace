"""The decision figures of one report: cores at a target rate, ratios with intervals.

`decide` adds them to a `Report` once its results are folded: every row gets
`cores_at_target` (CPU us/msg x the target rate / 1e6: the worker cores that rate
needs at this machine's cost per message), and with 3 repeats or more every codec
gets its ratio to the baseline for CPU us/msg, e2e p99 and steady RSS with a 95 %
interval (`abrunner.report.stats.paired_ratio`) and a verdict. A paired run takes
CPU us/msg and p99 window by window instead (`abrunner.report.paired`), with any
number of repeats. `section` is the Markdown that shows the ratios (or says why
there are none), and for a sequential run whether the order showed
(`abrunner.report.order`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

import msgspec

from abrunner.report import notes, order, paired, stats
from abrunner.report.stats import DECIDED as DECIDED
from abrunner.results import CaseResult, Ratio, Report, Spread, Summary, by_cpu

CORES: Final = "cores_at_target"
"""The row figure: cores needed at `Report.target_rate`."""


def decide(report: Report, target_rate: float) -> None:
    """Set `report.target_rate`, each row's `cores_at_target` and `report.ratios`.

    Args:
        report: a report whose summary is folded from its results.
        target_rate: messages per second to size the cores for.
    """
    report.target_rate = target_rate
    add_cores(report.summary, target_rate)
    report.ratios = baseline_ratios(report)


def add_cores(summary: Summary, target_rate: float) -> None:
    """Each row's `cores_at_target`: its CPU us/msg spread x `target_rate` / 1e6."""
    scale = target_rate / 1e6
    for rows in summary.values():
        for row in rows.values():
            cpu = row.figures.get("cpu_us_per_msg")
            if cpu is not None:  # a linear scale keeps median, min and max in place
                row.figures[CORES] = Spread(
                    cpu.median * scale, cpu.min * scale, cpu.max * scale
                )


def per_repeat(
    results: Sequence[CaseResult], profile: str, codec: str, figure: str
) -> dict[int, float]:
    """repeat -> the figure, for the measured repeats with a finite, positive one.

    A p99 above the top histogram bucket (infinite) has no logarithm: it is left
    out, and the table shows it as such.
    """
    found: dict[int, float] = {}
    for r in results:
        if r.profile == profile and r.codec == codec and r.error is None:
            value = getattr(r, figure)
            if value is not None and math.isfinite(value) and value > 0:
                found[r.repeat] = float(value)
    return found


def baseline_ratios(report: Report) -> list[Ratio]:
    """Every codec's `DECIDED` figures over the baseline's, per profile.

    Returns:
        Nothing with fewer than 3 repeats in the plan; else one `Ratio` per codec,
        profile and figure measured in at least one pair (its interval and
        verdict left out with fewer than 3 pairs).
    """
    plan, windows = report.plan, report.paired
    if plan.repeat < stats.MIN_REPEATS and windows is None:
        return []
    found = []
    for profile, rows in report.summary.items():
        if plan.baseline not in rows:
            continue
        for codec in by_cpu(rows):
            if codec == plan.baseline:
                continue
            if windows is not None:
                found += paired.ratios(windows, profile, plan.baseline, codec)
            for figure in DECIDED:
                if windows is not None and figure in paired.WINDOWED:
                    continue
                ratio = _ratio(report.results, profile, plan.baseline, codec, figure)
                if ratio is not None:
                    found.append(ratio)
    return [_late(report.results, _behind(report, r)) for r in found]


def _behind(report: Report, ratio: Ratio) -> Ratio:
    """A latency ratio without a verdict where either side fell behind: its
    latency is its backlog's wait (`abrunner.report.notes`)."""
    if ratio.figure not in notes.LATENCY or ratio.why is not None:
        return ratio
    rows = report.summary.get(ratio.profile, {})
    slow = [
        codec
        for codec in (report.plan.baseline, ratio.codec)
        if notes.behind(rows.get(codec), report.plan.max_mode)
    ]
    if not slow:
        return ratio
    why = f"{' and '.join(slow)} fell behind: {notes.WHY}"
    return msgspec.structs.replace(ratio, low=None, high=None, verdict=None, why=why)


LATE: Final = 0.9
"""A load generator that sent under 90 % of the rate asked fell behind its schedule."""


def _late(results: Sequence[CaseResult], ratio: Ratio) -> Ratio:
    """A p99 ratio without a verdict where the load generator fell behind: latency
    runs from the intended send time, so it measures the generator's delay, which
    every side shares, not the codecs."""
    if ratio.figure != "e2e_p99_ms" or ratio.why is not None:
        return ratio
    late = [
        r
        for r in results
        if r.profile == ratio.profile
        and r.producer_rate is not None
        and r.target_rate
        and r.producer_rate < LATE * r.target_rate
    ]
    if not late:
        return ratio
    slowest = min(late, key=lambda r: r.producer_rate or 0.0)
    why = (
        f"the load generator fell behind its schedule ({slowest.producer_rate:,.0f} "
        f"of {slowest.target_rate:,.0f} msg/s sent in {len(late)} cases): p99 "
        "measures its delay, not the codecs"
    )
    return msgspec.structs.replace(ratio, low=None, high=None, verdict=None, why=why)


def _ratio(
    results: Sequence[CaseResult], profile: str, base: str, codec: str, figure: str
) -> Ratio | None:
    b = per_repeat(results, profile, base, figure)
    o = per_repeat(results, profile, codec, figure)
    common = sorted(b.keys() & o.keys())
    if not common:
        return None
    xs, ys = [b[i] for i in common], [o[i] for i in common]
    interval = stats.paired_ratio(xs, ys)
    if interval is None:  # too few pairs: the ratio alone
        logs = [math.log(y / x) for x, y in zip(xs, ys, strict=True)]
        interval = stats.Interval(math.exp(sum(logs) / len(logs)), math.nan, math.nan)
        verdict = None
    else:
        verdict = stats.verdict(interval, stats.digits(interval))
    known = verdict is not None
    return Ratio(
        profile=profile,
        codec=codec,
        figure=figure,
        pairs=len(common),
        ratio=interval.ratio,
        low=interval.low if known else None,
        high=interval.high if known else None,
        verdict=verdict,
    )


def section(report: Report) -> str | None:
    """The ratios to the baseline as Markdown; None when there is nothing to compare.

    With fewer than 3 repeats it is one paragraph saying there are no intervals.
    """
    plan = report.plan
    compared = any(
        len(rows) > 1 and plan.baseline in rows for rows in report.summary.values()
    )
    if not compared:
        return None
    title = "## Ratios to the baseline, with 95 % intervals\n\n"
    if report.paired is None:
        title += _order(report)
    if plan.repeat < stats.MIN_REPEATS and report.paired is None:
        return title + (
            f"No intervals with `--repeat {plan.repeat}`: with 3 repeats or more, "
            "each codec's ratio to the baseline (CPU us/msg, p99, RSS) gets a 95 % "
            "interval and a verdict: better, worse or no detectable difference."
        )
    lines = [
        _method(report),
        "",
        *(f"{x}\n" for x in paired.precision_lines(report)),
        f"Each codec's figure over `{plan.baseline}`'s: the geometric mean of the "
        + (
            "blocks' ratios (CPU us/msg, p99) or of the repeats' (RSS)"
            if report.paired is not None
            else "ratios of repeats run side by side (repeat i over the baseline's "
            "repeat i)"
        )
        + ", with a 95 % Student t interval on their logarithm. The tables above "
        "divide one median by the other instead (median over the baseline's "
        "median), so the two ratios of a figure can differ. Lower is better for all "
        "three: *better* or *worse* when the interval, as printed, excludes 1, else "
        "*no detectable difference*; an interval is printed with more decimals "
        "when two would round a bound onto 1.",
        "",
        "| profile | codec | figure | ratio | 95 % interval | verdict |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in report.ratios:
        if r.why is not None:
            span, verdict = "-", f"no verdict: {r.why}"
        elif r.low is None or r.high is None:
            span, verdict = "-", f"no interval ({r.pairs} pairs measured)"
        else:
            d = stats.digits(stats.Interval(r.ratio, r.low, r.high))
            span = f"{_x(r.low, d)} to {_x(r.high, d)}"
            verdict = r.verdict or "-"
        header = DECIDED.get(r.figure, r.figure)
        lines.append(
            f"| {r.profile} | {r.codec} | {header} | {_x(r.ratio)} | {span} | {verdict} |"
        )
    return title + "\n".join(lines)


def _x(ratio: float, digits: int = 2) -> str:
    return f"{ratio:.{digits}f}x" if ratio >= 0.1 else f"{ratio:.2g}x"


def _method(report: Report) -> str:
    """How the ratios were taken: paired windows, or repeats one after another."""
    checked = report.capacity
    check = "" if checked is None else paired.capacity_sentence(checked) + ". "
    if report.paired is None:
        return check + (
            "Sequential: the codecs ran one after another, in a rotated order each "
            "repeat."
        )
    return check + (
        f"Paired: every codec's worker ran at the same time on the same traffic "
        f"(one load generator, the same messages at the same instants on each "
        f"codec's topic), sampled every {report.paired.window_s:g} s. CPU us/msg "
        "and p99 are compared window by window, as `codec-ab staging` compares "
        "its slices: the windows with data on both sides (a side that handled "
        f"under {paired.STALL:.0%} of the other's messages in a window stalled, "
        "and that window is left out) are grouped into about sqrt(n) blocks of "
        "consecutive windows, and the interval is the Student t interval on the "
        "blocks' log ratios (pairs = blocks). Steady RSS is compared repeat by "
        "repeat, as below."
    )


def _order(report: Report) -> str:
    """Each profile's order effect as a paragraph (empty when none can be seen)."""
    plan = report.plan
    if plan.max_mode or plan.repeat < stats.MIN_REPEATS or not plan.rotated:
        return ""
    found = [
        f"{plan.heading(profile)}: {order.sentence(effect)}"
        for profile in report.summary
        if (effect := order.effect(plan, report.results, profile)) is not None
    ]
    return "".join(f"{line}\n\n" for line in found)
