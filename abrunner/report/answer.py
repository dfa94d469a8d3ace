"""The report's answer, first: one sentence per candidate, then the table that decides.

A team opens the report with one question: what does switching from the baseline to
this codec buy, and is it safe? Each candidate gets a sentence it can paste into a
ticket (CPU per message and cores at the target rate, p99, RSS, wire size, what it
rejected of this traffic, which of the model's checks it skips, with the interval and
verdict when there are repeats), then one short table of the figures that decide; the
full figures and the definitions follow in the report.
"""

from __future__ import annotations

from typing import Final

from abrunner.report import decode_share
from abrunner.report.charts import SPLIT_CHART, splittable
from abrunner.report.stats import MIN_REPEATS
from abrunner.results import Ratio, Report, Row, by_cpu

SHORT: Final = (
    ("CPU us/msg", "cpu_us_per_msg", "{:.1f}"),
    ("cores at target", "cores_at_target", "{:.2f}"),
    ("decode % of CPU", decode_share.SHARE, "{:.0%}"),
    ("p99 ms", "e2e_p99_ms", "{:.1f}"),
    ("RSS MB", "rss_steady_mb", "{:.0f}"),
    ("wire B/msg", "wire_bytes", "{:,.0f}"),
)
"""The short table's figures: (header, figure key, format)."""


def skipped_by(report: Report, codec: str) -> list[str]:
    """The model's checks `codec` skips, from the plan's "path: who skip(s) what"."""
    found = []
    for line in report.plan.skipped:
        path, _, rest = line.partition(": ")
        who, sep, what = rest.partition(" skip")
        if sep and codec in [c.strip() for c in who.split(",")]:
            found.append(f"{path} ({what.removeprefix('s').strip()})")
    return found


def not_run_by(report: Report, codec: str) -> list[str]:
    """The model's code `codec` does not run, from the plan's "path: what not run
    by codecs: effect" lines, as "path (what)"."""
    found = []
    for line in report.plan.not_run:
        head, sep, _ = line.partition(" not run by ")
        who = line[len(head) + len(sep) :].split(": ")[0]
        if sep and codec in [c.strip() for c in who.split(",")]:
            path, _, what = head.partition(": ")
            found.append(f"{path} ({what})")
    return found


def _ratio(report: Report, profile: str, codec: str, figure: str) -> Ratio | None:
    return next(
        (
            r
            for r in report.ratios
            if r.profile == profile and r.codec == codec and r.figure == figure
        ),
        None,
    )


def _x(value: float) -> str:
    return f"{value:.2f}x" if value >= 0.1 else f"{value:.2g}x"


def _versus(
    report: Report,
    profile: str,
    codec: str,
    figure: str,
    new: float | None,
    old: float | None,
) -> str:
    """`(0.31x; 95 % interval 0.28x to 0.34x: better)`, or `(0.31x)` without repeats."""
    if new is None or old is None or old <= 0:
        return ""
    ratio = _ratio(report, profile, codec, figure)
    if ratio is not None and ratio.low is not None and ratio.high is not None:
        return (
            f" ({_x(ratio.ratio)}; 95 % interval {_x(ratio.low)} to "
            f"{_x(ratio.high)}: {ratio.verdict})"
        )
    if ratio is not None and ratio.why:
        return f" ({_x(ratio.ratio)}; no verdict: {ratio.why})"
    return f" ({_x(new / old)})"


def sentence(report: Report, profile: str, codec: str) -> str:
    """One candidate against the baseline, as a sentence for a ticket."""
    rows = report.summary[profile]
    base_name = report.plan.baseline
    row, base = rows[codec], rows.get(base_name)
    head = f"**{codec}** instead of `{base_name}`"
    if len(report.summary) > 1:
        head += f" ({profile})"
    max_mode = report.plan.max_mode
    trouble = _trouble(row, max_mode)
    handler = dict(report.plan.logic_verdicts).get(codec)
    if trouble is not None:  # the handler's verdict says why, when it is the cause
        mine = f" Your handler on its objects: {handler}." if handler else ""
        return f"{head}: {trouble}{mine}"
    if base is None:
        return f"{head}: no comparison, the baseline did not run."
    if (base_trouble := _trouble(base, max_mode)) is not None:
        return f"{head}: no comparison, the baseline {base_trouble}"
    parts = [_cpu(report, profile, codec, row, base)]
    new, old = row.median("e2e_p99_ms"), base.median("e2e_p99_ms")
    if new is not None and old is not None:
        versus = _versus(report, profile, codec, "e2e_p99_ms", new, old)
        parts.append(f"p99 latency {new:.1f} ms against {old:.1f}{versus}")
    new, old = row.median("rss_steady_mb"), base.median("rss_steady_mb")
    if new is not None and old is not None:
        versus = _versus(report, profile, codec, "rss_steady_mb", new, old)
        parts.append(f"RSS {new:.0f} MB against {old:.0f}{versus}")
    new, old = row.median("wire_bytes"), base.median("wire_bytes")
    if new is not None and old is not None and round(new) == round(old):
        parts.append(f"the same {new:,.0f} bytes a message on the wire")
    elif new is not None and old is not None:
        parts.append(
            f"{new:,.0f} bytes a message on the wire against {old:,.0f}"
            f"{_versus(report, profile, codec, 'wire_bytes', new, old)}"
        )
    uncarried = _uncarried(report, profile, codec)
    rejected = _rejected(row)
    if uncarried and not row.dead_lettered:
        rejected = "it rejected none of the traffic it was sent"
    parts.append(rejected + uncarried)
    if handler is not None:
        parts.append(f"your handler on its objects: {handler}")
    code = not_run_by(report, codec)
    if code:
        parts.append(
            f"it does not run {len(code)} of your model's validators, computed "
            "fields and discriminators: " + "; ".join(code)
        )
    skipped = skipped_by(report, codec)
    if skipped:
        parts.append(
            f"it skips {len(skipped)} of the model's checks: " + "; ".join(skipped)
        )
    return f"{head}: " + "; ".join(parts) + "."


def status(row: Row, max_mode: bool) -> str:
    """A row's status cell: `ok`, or what keeps its figures from being compared."""
    if row.errors:
        return "FAILED: " + row.errors[0][:60]
    if row.lost:
        return f"LOST {row.lost}"
    if row.rejected_all is not None:
        return f"DEAD-LETTERED ALL: {row.rejected_all[:60]}"
    if row.not_drained:
        return f"FELL BEHIND, not drained ({row.not_drained:,} queued)"
    if max_mode or row.kept_up:
        return "ok"
    cpu = row.median("cpu_pct") or 0
    return f"FELL BEHIND (lag {(row.median('lag_end') or 0):,.0f}, CPU {cpu:.0f}%)"


def _trouble(row: Row, max_mode: bool) -> str | None:
    """Why a row's figures must not be compared as they stand, or None."""
    said = status(row, max_mode)
    if said == "ok":
        return None
    if row.errors:
        return f"failed ({row.errors[0]})."
    if row.lost:
        return f"LOST {row.lost:,} messages: its figures are not to be trusted."
    if row.rejected_all is not None:
        return f"dead-lettered every message ({row.rejected_all}): nothing to compare."
    return (
        f"{said}: it did not keep up with the rate, so its latency is the backlog's; "
        "see the full figures."
    )


def _cpu(report: Report, profile: str, codec: str, row: Row, base: Row) -> str:
    new, old = row.median("cpu_us_per_msg"), base.median("cpu_us_per_msg")
    if new is None or old is None:
        return "CPU per message not measured"
    text = (
        f"{new:.1f} us of CPU per message against {old:.1f}"
        f"{_versus(report, profile, codec, 'cpu_us_per_msg', new, old)}"
    )
    cores, base_cores = row.median("cores_at_target"), base.median("cores_at_target")
    if cores is not None and base_cores is not None and report.target_rate:
        text += (
            f", {cores:.2f} of a core at {report.target_rate:,.0f} msg/s against "
            f"{base_cores:.2f}"
        )
    return text


def _uncarried(report: Report, profile: str, codec: str) -> str:
    """A replay's recorded messages the codec's format could not carry (not sent
    in its case), as the rejection reasons count them (the first run's)."""
    runs = [
        r
        for r in report.results
        if r.codec == codec and r.profile == profile and r.error is None
    ]
    left = sum(runs[0].not_carried.values()) if runs else 0
    if not left:
        return ""
    total = runs[0].recorded or left
    return (
        f", and could not carry {left:,} of the {total:,} recorded messages "
        f"({left / total:.1%}, not sent in its case: see the rejection reasons)"
    )


def _rejected(row: Row) -> str:
    processed = row.median("processed")
    if not row.dead_lettered:
        return "it rejected none of this traffic"
    if processed:
        share = row.dead_lettered / (processed * max(row.runs, 1))
        return (
            f"it REJECTED {row.dead_lettered:,} messages of this traffic "
            f"({share:.1%}, dead-lettered: see the rejection reasons)"
        )
    return f"it REJECTED {row.dead_lettered:,} messages of this traffic"


def section(report: Report) -> list[str]:
    """The answer: the sentences, a word on their certainty, and the short table."""
    base = report.plan.baseline
    lines = ["## The answer", ""]
    for profile, rows in report.summary.items():
        for codec in by_cpu(rows):
            if codec != base:
                lines += [f"- {sentence(report, profile, codec)}"]
        verdict = dict(report.plan.logic_verdicts).get(base)
        if verdict is not None and base in rows:
            lines += [
                f"- **{base}** (the baseline): your handler on its objects: {verdict}."
            ]
    if len(lines) == 2:
        return []
    lines.append("")
    repeat = report.plan.repeat
    if repeat == 1:
        lines += [
            "One run per codec (`--repeat 1`): these ratios have no interval; run "
            f"`--repeat {MIN_REPEATS}` or more before deciding.",
            "",
        ]
    elif repeat < MIN_REPEATS:
        lines += [
            f"{repeat} runs per codec: no intervals (they need {MIN_REPEATS} "
            "repeats or more).",
            "",
        ]
    for profile, headers, body in short_tables(report):
        if len(report.summary) > 1:
            lines += [f"### {report.plan.heading(profile)}", ""]
        lines += [*_markdown(headers, body), ""]
    if splittable(report.summary):
        lines += [f"![CPU per message: decode and the rest]({SPLIT_CHART})", ""]
    return lines


def short_tables(report: Report) -> list[tuple[str, list[str], list[list[str]]]]:
    """Per profile: the handful of columns that decide, one row per codec."""
    out = []
    headers = ["codec", "status", *(h for h, _, _ in SHORT), "rejected", "lost"]
    for profile, rows in report.summary.items():
        body = []
        for codec in by_cpu(rows):
            row = rows[codec]
            name = f"{codec} (baseline)" if codec == report.plan.baseline else codec
            cells = [name, status(row, report.plan.max_mode)]
            for _, key, fmt in SHORT:
                value = row.median(key)
                if key == decode_share.SHARE:  # at most 100 %, or the cell says why
                    cells.append(decode_share.cell(row.figures.get(key), False))
                else:
                    cells.append("-" if value is None else fmt.format(value))
            cells += [f"{row.dead_lettered:,}", f"{row.lost:,}"]
            body.append(cells)
        out.append((profile, headers, body))
    return out


def _markdown(headers: list[str], body: list[list[str]]) -> list[str]:
    def row(cells: list[str]) -> str:
        return "| " + " | ".join(cells) + " |"

    return [row(headers), "|" + " --- |" * len(headers), *map(row, body)]
