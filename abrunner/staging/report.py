"""A staging report: two live sides (`abrunner.staging.slices`) as the lab run's `Report`.

`build` turns the sides' slices into a `Report` whose rows are keyed by side (`A:
json+pydantic`, `B: msgspec-json`: an A/A comparison has the same codec twice), whose
`results` hold one entry per side and block (the units the intervals are taken on, so
`codec-ab --compare` works on a staging report as on a lab one), and whose `staging`
part says where the figures came from, how the window was cut and what makes the
sides comparable or not. `markdown` and `write` give report.md, report.json and the
lab report's charts; the figures table is the lab report's (`abrunner.report.tables.table`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from abrunner.plan import Plan, Profile
from abrunner.report.decisions import DECIDED, add_cores
from abrunner.report.tables import aggregate, environment, markdown_table, table
from abrunner.results import Report, Staging, StagingSide
from abrunner.staging import figures as sf
from abrunner.staging.slices import Side, Window
from schemas.errors import ConfigError

SAME_WITHIN: Final = 0.02
"""Both sides saw the same messages when they read the same topics and their counts
and sizes over the window agree this closely (two consumers of one topic differ by
their lag at the window's edges)."""


def _profile(schema: str) -> Profile:
    try:
        return Profile(schema) if ":" in schema else Profile.parse(schema)
    except ConfigError:  # a label no profile parses: kept, marked as a user's spec
        return Profile(f"staging:{schema}")


def build(
    url: str, window: Window, a: Side, b: Side, out: Path, within: float
) -> Report:
    """The staging report of sides `a` and `b` over `window`.

    Args:
        url: the Prometheus server read.
        window: the analysed span and its slices.
        a: side A (the baseline of the ratios).
        b: side B.
        out: the report directory.
        within: relative difference in message rate or size above which the sides
            are flagged as not comparable (0.10 = 10 %).
    """
    profile = _profile(a.schema)
    usable = [i for i in range(window.count) if a.has_data(i) and b.has_data(i)]
    blocks, dropped = sf.layout(usable)
    decide = len(blocks) >= sf.MIN_BLOCKS
    label = profile.label
    results = {
        side.name: [
            sf.figures(side, block, window.slice_s, label, n)
            for n, block in enumerate(blocks)
        ]
        for side in (a, b)
    }
    per_slice = [
        sf.figures(side, [i], window.slice_s, label, i)
        for side in (a, b)
        for i in range(window.count)
        if side.has_data(i)
    ]
    refused = None
    if not decide:
        refused = (
            f"{len(usable)} usable slices (data on both sides): a verdict needs at "
            f"least {sf.MIN_SLICES} (3 blocks of 3 slices); run longer or with "
            "shorter --slice"
        )
    first = results["A"][0] if results["A"] else None
    plan = Plan(
        codecs=tuple(dict.fromkeys([a.codec, b.codec])),
        profiles=(profile,),
        rate=(first.throughput if first and first.throughput else 1.0),
        duration=window.end - window.start,
        warmup=window.slice_s,
        repeat=max(1, len(blocks)),
        max_mode=False,
        max_messages=1,
        partitions=max(1, a.partitions),
        baseline=a.codec,
        out=str(out),
        verify=False,
        bench=False,
    )
    ordered = [r for side in ("A", "B") for r in results[side]]
    warnings, notes, same = comparability(a, b, usable, window, within)
    info = Staging(
        prometheus=url,
        start=window.start,
        end=window.end,
        slice_s=window.slice_s,
        slices=window.count,
        usable=len(usable),
        blocks=len(blocks),
        per_block=len(blocks[0]) if blocks else 0,
        dropped=dropped,
        sides=[_side(s, window) for s in (a, b)],
        warnings=warnings,
        notes=notes,
        same_messages=same,
        refused=refused,
        dashboard={s.name: s.dashboard for s in (a, b) if s.dashboard},
        slice_results=per_slice,
    )
    report = Report(
        plan=plan,
        environment=environment("n/a (staging: figures read from Prometheus)"),
        results=ordered,
        summary=aggregate(ordered),
        staging=info,
    )
    report.target_rate = plan.rate
    add_cores(report.summary, plan.rate)
    if results["A"]:
        report.ratios = sf.ratios(results["A"], results["B"], label, decide)
    return report


def _side(side: Side, window: Window) -> StagingSide:
    counts = [int(p) for p in side.series["processes"] if p is not None]
    return StagingSide(
        name=side.name,
        selector=side.selector,
        codec=side.codec,
        schema=side.schema,
        version=side.version,
        topics=list(side.topics),
        processes=max(counts, default=0),
        restarts=sum(side.starts),
        slices_without_data=sum(not side.has_data(i) for i in range(window.count)),
        consumer_errors=round(_total(side.series["consumer_errors"])),
    )


def _total(values: list[float | None]) -> float:
    return sum(v for v in values if v is not None)


def comparability(
    a: Side, b: Side, usable: list[int], window: Window, within: float
) -> tuple[list[str], list[str], bool]:
    """Warnings (the sides may not be comparable), notes, and whether both sides
    saw the same messages."""
    warnings, notes = [], []
    totals = {}
    for side in (a, b):
        msgs, sent = side.totals.get("messages", 0.0), side.totals.get("bytes")
        totals[side.name] = (msgs, sent / msgs if sent and msgs else None)
        missing = [i for i in range(window.count) if not side.has_data(i)]
        if missing:
            warnings.append(
                f"side {side.name} had no data in {len(missing)} of {window.count} "
                f"slices (from {_time(window.ends[missing[0]] - window.slice_s)}); "
                "only slices with data on both sides are compared"
            )
        if started := sum(side.starts):
            at = ", ".join(str(i + 1) for i, n in enumerate(side.starts) if n)
            warnings.append(
                f"side {side.name} restarted: {started} worker process(es) started "
                f"during the window (slice {at}); counters that reset were read as "
                "resets, not as negative rates"
            )
        if (errors := round(_total(side.series["consumer_errors"]))) > 0:
            warnings.append(
                f"side {side.name} had {errors} Kafka consumer errors "
                "(worker_consumer_errors_total): its figures may include retries"
            )
        lags = [(i, v) for i in usable if (v := side.series["lag"][i]) is not None]
        rate = msgs / (window.count * window.slice_s)
        worst = max(lags, key=lambda p: p[1], default=None)
        if worst and worst[1] > sf.LAG_S * max(rate, 1.0):
            end = lags[-1][1]
            warnings.append(
                f"side {side.name} lagged: up to {worst[1]:,.0f} messages "
                f"({worst[1] / max(rate, 1.0):.1f} s of its traffic, slice "
                f"{worst[0] + 1}), {end:,.0f} at the end"
                + ("; it fell behind" if end > sf.LAG_S * max(rate, 1.0) else "")
            )
    (ma, ba), (mb, bb) = totals["A"], totals["B"]
    rates = _differ(ma, mb)
    if rates > within:
        warnings.append(
            f"message rates differ by {100 * rates:.0f} % (A {ma:,.0f}, B {mb:,.0f} "
            f"messages in the window; threshold {100 * within:g} %): the "
            "sides did not see the same traffic"
        )
    sizes = _differ(ba, bb) if ba and bb else 0.0
    if sizes > within:
        warnings.append(
            f"payload bytes per message differ by {100 * sizes:.0f} % (A {ba:,.0f}, "
            f"B {bb:,.0f}): the sides did not decode the same bytes (different wire "
            "formats, as in compose's two lanes, or different traffic)"
        )
    if a.schema != b.schema:
        warnings.append(f"the sides decode different schemas: {a.schema}, {b.schema}")
    same = bool(
        a.topics
        and a.topics == b.topics
        and rates <= SAME_WITHIN
        and ba
        and bb
        and sizes <= SAME_WITHIN
    )
    if same:
        notes.append(
            f"Both sides read the same topic ({', '.join(a.topics)}) and handled the "
            f"same number of messages of the same size (within {100 * SAME_WITHIN:g} "
            "%): the data shows they saw the same messages."
        )
    if a.topics and b.topics and a.topics != b.topics:
        notes.append(
            f"The sides read different topics ({', '.join(a.topics)}; "
            f"{', '.join(b.topics)}): they decode the same values only if their "
            "producers send the same traffic (compose's lanes: same profile, seed and "
            "rate)."
        )
    if a.codec == b.codec:
        notes.append(
            f"A/A: both sides run `{a.codec}`; any verdict other than no detectable "
            "difference points at a difference between the deployments, not codecs."
        )
    return warnings, notes, same


def _differ(x: float | None, y: float | None) -> float:
    if not x or not y:
        return float("inf") if (x or y) else 0.0
    return abs(x / y - 1) if x >= y else abs(y / x - 1)


def _time(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _x(ratio: float) -> str:
    return f"{ratio:.2f}x" if ratio >= 0.1 else f"{ratio:.2g}x"


def ratios_section(report: Report) -> str:
    """The B/A ratios with their intervals and verdicts, and the method, as Markdown."""
    info = report.staging
    assert info is not None  # noqa: S101 (only staging reports come here)
    a, b = info.sides
    lines = [
        "## Ratios B/A, with 95 % intervals",
        "",
        f"Side B's figure over side A's (`{b.codec}` over `{a.codec}`; lower is "
        "better for all three): *better* or *worse* when the interval excludes 1, "
        "else *no detectable difference*.",
        "",
    ]
    if info.refused is not None:
        lines += [f"**No verdict**: {info.refused}.", ""]
    else:
        lines += [
            f"{info.slices} slices of {info.slice_s:g} s, {info.usable} with data on "
            f"both sides. Consecutive slices are not independent (a burst or a noisy "
            f"minute spans several), so they are grouped into {info.blocks} blocks of "
            f"{info.per_block} consecutive slices (non-overlapping batch means"
            + (f"; the earliest {info.dropped} left out" if info.dropped else "")
            + "); each block's figures come from its summed counters and merged "
            "histograms, and the interval is the lab run's Student t interval on "
            f"the mean log ratio of the {info.blocks} block pairs ({info.blocks - 1} "
            "degrees of freedom).",
            "",
        ]
    lines += [
        "| figure | B/A | 95 % interval | verdict | blocks |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in report.ratios:
        if r.low is None or r.high is None:
            span, verdict = "-", "no verdict (too few slices)"
        else:
            span, verdict = f"{_x(r.low)} to {_x(r.high)}", r.verdict or "-"
        lines.append(
            f"| {DECIDED[r.figure]} | {_x(r.ratio)} | {span} | {verdict} | {r.pairs} |"
        )
    return "\n".join(lines)


def comparability_section(info: Staging) -> str:
    """The warnings and notes as Markdown."""
    lines = ["## Comparability", ""]
    lines += [f"- **warning**: {w}" for w in info.warnings]
    if not info.warnings:
        lines.append("- no comparability warning")
    lines += [f"- {n}" for n in info.notes]
    if shown := dashboard_note(info):
        lines.append(f"- {shown}")
    return "\n".join(lines)


def dashboard_note(info: Staging) -> str | None:
    """What the dashboard's Verdict row showed at the window's end, if it could be
    read (the recording rules exist and the selectors name `side` alone)."""
    a, b = info.dashboard.get("A", {}), info.dashboard.get("B", {})
    parts = [
        f"{DECIDED[figure]} A {a[figure]:.3g}, B {b[figure]:.3g} "
        f"(B/A {_x(b[figure] / a[figure])})"
        for figure in ("cpu_us_per_msg", "e2e_p99_ms")
        if figure in a and figure in b and a[figure] > 0
    ]
    if not parts:
        return None
    return (
        "The dashboard's Verdict row (recording rules `side:*`, the last minute "
        f"before the window's end) showed {'; '.join(parts)}."
    )


def figures_table(report: Report) -> list[str]:
    """The lab report's figures table with side A as the baseline."""
    info = report.staging
    assert info is not None  # noqa: S101
    base = f"A: {info.sides[0].codec}"
    lines = []
    for profile, rows in report.summary.items():
        headers, body = table(rows, base, False, report.plan.repeat > 1)
        # Loss is not measured here (no x-seq read-back as in the lab run): no column.
        gone = headers.index("lost")
        headers = headers[:gone] + headers[gone + 1 :]
        body = [cells[:gone] + cells[gone + 1 :] for cells in body]
        lines += [f"## {report.plan.heading(profile)}", ""]
        lines += [*markdown_table(headers, body), ""]
    return lines
