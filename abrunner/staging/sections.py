"""The staging report's Markdown sections: the window as analysed, the comparability
warnings, the figures table with its legend, and the ratios with their intervals.

Every figure is printed once: where the table and the ratios section both show B/A
of a figure (CPU us/msg, p99, RSS), the table shows the ratios section's paired
ratio; other ratios in the table are B's median block over A's, and the legend says
so. A ratio a stall moves (the latency figures) says so beside it.
"""

from __future__ import annotations

import re
from typing import Final

from abrunner.report import notes
from abrunner.report.decisions import DECIDED
from abrunner.report.tables import markdown_table, table
from abrunner.results import Report, Staging
from abrunner.staging.comparability import time_of
from abrunner.staging.slices import Side, Window

STALLED: Final = ("e2e_p50_ms", "e2e_p99_ms", "e2e_p999_ms")
"""Figures a stall moves: a backlog's messages wait, so latency grows with it."""

_LEGEND: Final = {
    "msg/s": "messages handled per second over the side's blocks (every outcome), "
    "summed over its processes; in parentheses, B's median block over A's",
    "CPU % core": "the side's processes' CPU seconds per second, summed (100 = one "
    "core)",
    "CPU us/msg": "summed CPU seconds over summed messages handled, median of the "
    "blocks; in parentheses the paired B/A of the ratios section",
    "decode % of CPU": "the mean sampled decode time (`worker_decode_seconds` sum "
    "over count, the worker thread's CPU time) over CPU us/msg: the decode's "
    "share of the CPU per message; a share above 100 % (workers that timed "
    "decodes in wall time) is not a share and reads `-`",
    "decode us": "the median of the sampled single decodes (every 128th message, "
    "`worker_decode_seconds` histogram), not the mean the share column uses",
    "p50 ms": "end-to-end latency quantiles (`x-sent-ns` to handled) from the "
    "merged `worker_e2e_latency_seconds` histograms of the block; p99's "
    "parenthesis is the paired B/A of the ratios section",
    "RSS MB": "resident memory per process, median over the slices",
    "wire B/msg": "bytes handled per message (`worker_bytes_total`)",
    "lag end": "the side's backlog (messages) at the end of its last block",
    "GC ms/s": "milliseconds per second in cyclic garbage collection (wall time)",
    "DLQ": "messages dead-lettered (`worker_dead_letters_total`)",
}
"""The staging table's columns, by header (the lab report's legend covers the rest)."""


def _x(ratio: float) -> str:
    return f"{ratio:.2f}x" if ratio >= 0.1 else f"{ratio:.2g}x"


def window_line(window: Window, a: Side, b: Side) -> str:
    """The window as analysed: its slices, and what was left out and why."""
    line = (
        f"Window analysed: {time_of(window.start)} to {time_of(window.edges[-1])}, "
        f"{window.count} slices of {window.slice_s:g} s"
    )
    if window.tail_s > 0:
        handled = ", ".join(
            f"{s.name} {s.tail.get('messages', 0.0):,.0f}" for s in (a, b)
        )
        line += (
            f"; the last {window.tail_s:.1f} s (to {time_of(window.end)}) are not a "
            f"whole slice and are left out (messages handled in them: {handled})"
        )
    handled = ", ".join(
        f"{s.name} {s.totals.get('messages', 0.0):,.0f}" for s in (a, b)
    )
    return line + f". Messages handled in the analysed slices: {handled}."


def stall_note(
    text: str, blocks: list[int], count: int, without: dict[str, float]
) -> str:
    """A side's stall as the ratios section says it: what, where, and the latency
    ratios without the blocks that hold it."""
    held = ", ".join(str(i + 1) for i in blocks) or "none"
    note = (
        f"{text}. The latency ratios above include it (blocks holding it: {held} "
        f"of {count})."
    )
    if without:
        shown = "; ".join(f"{DECIDED[f]} {_x(v)}" for f, v in sorted(without.items()))
        note += f" Without those blocks, B/A is: {shown} (no interval)."
    return note


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
        f"before the window's end) showed {'; '.join(parts)}: a 1-minute rate, "
        "not the window's figure."
    )


def figures_table(report: Report) -> list[str]:
    """The lab report's figures table with side A as the baseline, its legend, and
    the paired B/A in the cells of the figures the ratios section decides."""
    info = report.staging
    assert info is not None  # noqa: S101
    base = f"A: {info.sides[0].codec}"
    paired = {DECIDED[r.figure]: r.ratio for r in report.ratios}
    lines = []
    for profile, rows in report.summary.items():
        headers, body = table(
            rows, base, False, report.plan.repeat > 1, report.target_rate
        )
        # Loss is not measured here (no x-seq read-back as in the lab run): no column.
        gone = headers.index("lost")
        headers = headers[:gone] + headers[gone + 1 :]
        body = [cells[:gone] + cells[gone + 1 :] for cells in body]
        for cells in body:
            cells[1] = _status(cells[0][0], cells[1], info)
            if cells[0].startswith("A: "):
                continue
            for k, header in enumerate(headers):
                if (ratio := paired.get(header)) is not None:
                    cells[k] = re.sub(r"\(\S+x\)", f"({_x(ratio)})", cells[k], count=1)
        lines += [f"## {report.plan.heading(profile)}", ""]
        lines += [*markdown_table(headers, body), ""]
        lines += [*legend(headers, report), ""]
    return lines


def _status(side: str, lab: str, info: Staging) -> str:
    """The status cell: the lab's `FELL BEHIND (lag N...)` takes the median of the
    blocks' end lags, so a side that stalled in one block and caught up reads
    "fell behind, lag 0"; a stall says what happened instead."""
    stall = info.stalls.get(side)
    if stall is None or not lab.startswith(("ok", "FELL BEHIND (lag")):
        return lab
    if "; it fell behind" in stall:
        return "FELL BEHIND: still behind at the window's end (see Comparability)"
    return "STALLED, caught up by the window's end (see Comparability)"


def legend(headers: list[str], report: Report) -> list[str]:
    """What the columns mean, and the cores column's target rate."""
    info = report.staging
    assert info is not None  # noqa: S101
    lines = [f"- `{h}`: {text}." for h, text in _LEGEND.items() if h in headers]
    lines += [
        line
        for line in notes.legend(set(headers))
        if not any(line.startswith(f"- `{h}`") for h in _LEGEND)
    ]
    if report.target_rate and (cores := notes.cores(report.target_rate)):
        lines.append(
            "- "
            + cores.replace(
                "(`--target-rate`, default the run's `--rate`)", f"({info.rate_basis})"
            )
        )
    return lines


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
            f"{info.slices} slices of {info.slice_s:g} s, {info.usable} in which both "
            "sides handled messages. Consecutive slices are not independent (a burst "
            f"or a noisy minute spans several), so they are grouped into {info.blocks} "
            f"blocks of {info.per_block} consecutive slices (non-overlapping batch "
            "means"
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
    stalled = ", ".join(sorted(info.stalls))
    for r in report.ratios:
        if r.low is None or r.high is None:
            span, verdict = "-", "no verdict (too few slices)"
        else:
            span, verdict = f"{_x(r.low)} to {_x(r.high)}", r.verdict or "-"
        if stalled and r.figure in STALLED:
            verdict += f"; includes side {stalled}'s stall (see below)"
        lines.append(
            f"| {DECIDED[r.figure]} | {_x(r.ratio)} | {span} | {verdict} | {r.pairs} |"
        )
    for side, note in sorted(info.stalls.items()):
        lines += ["", f"**Side {side} stalled**: {note}"]
    return "\n".join(lines)


def answer_section(report: Report) -> list[str]:
    """The staging report's answer, first: side B against side A in one sentence
    (CPU per message and cores at the rate, p99, RSS, dead letters, each paired B/A
    with its interval and verdict), then what may make the comparison unsafe."""
    info = report.staging
    assert info is not None  # noqa: S101
    a, b = info.sides
    rows = next(iter(report.summary.values()), {})
    row_a, row_b = rows.get(f"A: {a.codec}"), rows.get(f"B: {b.codec}")
    head = f"**{b.codec}** (side B) instead of `{a.codec}` (side A)"
    lines = ["## The answer", ""]
    if row_a is None or row_b is None:
        return [*lines, f"{head}: no comparison, a side handled no message.", ""]
    paired = {r.figure: r for r in report.ratios}
    parts = []
    for figure, what, unit, fmt in _SAID:
        new, old = row_b.median(figure), row_a.median(figure)
        if new is None or old is None:
            continue
        text = f"{what} {fmt.format(new)}{unit} against {fmt.format(old)}"
        ratio = paired.get(figure)
        if ratio is not None and ratio.low is not None and ratio.high is not None:
            text += (
                f" ({_x(ratio.ratio)}; 95 % interval {_x(ratio.low)} to "
                f"{_x(ratio.high)}: {ratio.verdict}"
            )
            stalled = ", ".join(sorted(info.stalls))
            text += (
                f"; includes side {stalled}'s stall)"
                if stalled and (figure in STALLED)
                else ")"
            )
        elif ratio is not None:
            text += f" ({_x(ratio.ratio)}, no interval: too few slices)"
        if figure == "cpu_us_per_msg":
            cores_a, cores_b = (
                row_a.median("cores_at_target"),
                row_b.median("cores_at_target"),
            )
            if cores_a is not None and cores_b is not None and report.target_rate:
                text += (
                    f", {cores_b:.2f} of a core at {report.target_rate:,.0f} msg/s "
                    f"against {cores_a:.2f}"
                )
        parts.append(text)
    parts.append(
        f"dead-lettered {row_b.dead_lettered:,} against {row_a.dead_lettered:,}"
    )
    lines += [f"{head}: " + "; ".join(parts) + ".", ""]
    cautions = [*(f"Side {s} stalled: {n}" for s, n in sorted(info.stalls.items()))]
    cautions += info.warnings
    if cautions:
        lines += ["Before you act on it:", "", *(f"- {c}" for c in cautions), ""]
    return lines


_SAID: Final = (
    ("cpu_us_per_msg", "CPU per message", " us", "{:.1f}"),
    ("e2e_p99_ms", "p99 latency", " ms", "{:.1f}"),
    ("rss_steady_mb", "RSS per process", " MB", "{:.0f}"),
)
"""The figures the staging answer states: (key, words, unit, format)."""
