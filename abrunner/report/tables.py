"""The A/B report: one row per codec, ratios to a baseline, the environment, files.

Input: the `CaseResult`s `codec-ab` measured (one per codec, profile and repeat).
Output in `--out`: `report.md`, `report.json` (the whole `Report`) and PNG charts
(`abrunner.report.charts`). The same table goes to the terminal. With `--repeat N` every
figure is the median, and the Markdown shows the spread (min-max) so a reader sees
the noise. A column no row has a figure for is left out (the in-process ones
without `--bench`, the GC ones in reports older than those counters).
`python -m abrunner.report.tables DIR` redraws report.md and the charts from its
report.json; decision figures (cores, ratios) come from `abrunner.report.decisions`.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Final, NamedTuple

import msgspec

from abrunner.report import (
    answer,
    decisions,
    decode_share,
    framing,
    logic_verdicts,
    notes,
    rejections,
)
from abrunner.report.answer import status
from abrunner.report.charts import SWEEP_CHART, charts, drawable
from abrunner.report.environment import environment as environment
from abrunner.results import (
    FIGURES,
    CaseResult,
    InProcess,
    Report,
    Row,
    Spread,
    Summary,
    by_cpu,
)
from schemas.errors import ConfigError


class Column(NamedTuple):
    """How the table shows one figure: header, format, ratio, in which modes."""

    header: str
    fmt: str
    ratio: bool = False
    """Whether the cell carries the ratio to the baseline (the A/B's headline)."""
    modes: tuple[str, ...] = ("rate", "max")


_RATE: Final = ("rate",)
COLUMNS: Final = {
    "max_rate": Column("max msg/s/process", "{:,.0f}", ratio=True, modes=("max",)),
    "throughput": Column("msg/s", "{:,.0f}", ratio=True, modes=_RATE),
    "cpu_pct": Column("CPU % core", "{:.0f}", modes=_RATE),
    "cpu_us_per_msg": Column("CPU us/msg", "{:.1f}", ratio=True),
    decode_share.SHARE: Column("decode % of CPU", "{:.0%}"),
    # Header named after the rate by `table`; two decimals: 0.4 cores is a decision.
    decisions.CORES: Column("cores at target rate", "{:.2f}"),
    "gc_ms_per_s": Column("GC ms/s", "{:.1f}"),
    "gc_per_1k_msgs": Column("GC per 1k msgs", "{:.2f}"),
    # Two decimals: msgspec decodes a small payload in ~0.3 us.
    "decode_p50_us": Column("decode us", "{:.2f}"),
    "decode_in_process_us": Column("decode us in-process", "{:.2f}"),
    "decode_vs_in_process": Column("Kafka/in-process", "{:.2f}x"),
    "decode_read_in_process_us": Column("decode+read us in-process", "{:.2f}"),
    "read_all_in_process_us": Column("+all us in-process", "{:.2f}"),
    "read_k_in_process_us": Column("+3 fields us in-process", "{:.2f}"),
    "e2e_p50_ms": Column("p50 ms", "{:.1f}", modes=_RATE),
    "e2e_p99_ms": Column("p99 ms", "{:.1f}", ratio=True, modes=_RATE),
    "e2e_p999_ms": Column("p99.9 ms", "{:.1f}", modes=_RATE),
    "rss_peak_mb": Column("RSS peak MB", "{:.0f}"),
    "rss_steady_mb": Column("RSS MB", "{:.0f}", ratio=True, modes=_RATE),
    "wire_bytes": Column("wire B/msg", "{:.0f}", ratio=True),
    "lag_end": Column("lag end", "{:,.0f}", modes=_RATE),
}
"""The table's figure columns, in order; a mode shows those that name it."""


def aggregate(
    results: Sequence[CaseResult], in_process: Sequence[InProcess] = ()
) -> Summary:
    """Fold the repeats: profile -> codec -> `Row` (status, medians and spreads).

    Each row also gets its codec's and profile's `in_process` figures, if any.
    """
    grouped: dict[tuple[str, str], list[CaseResult]] = defaultdict(list)
    for r in results:
        grouped[r.profile, r.codec].append(r)
    benched = {(b.profile, b.codec): b for b in in_process}
    out: Summary = defaultdict(dict)
    for (profile, codec), runs in grouped.items():
        row = out[profile][codec] = _row(runs)
        if (bench := benched.get((profile, codec))) is not None:
            _add_in_process(row, bench)
    return dict(out)


def _add_in_process(row: Row, bench: InProcess) -> None:
    found = {
        "decode_in_process_us": bench.decode_us,
        "decode_read_in_process_us": bench.decode_read_us,
        "read_all_in_process_us": bench.read_all_us,
        "read_k_in_process_us": bench.read_k_us,
    }
    kafka = row.median("decode_p50_us")
    if kafka is not None and math.isfinite(kafka) and bench.decode_us > 0:
        found["decode_vs_in_process"] = kafka / bench.decode_us
    row.figures.update(
        {key: Spread(v, v, v) for key, v in found.items() if v is not None}
    )


def _row(runs: list[CaseResult]) -> Row:
    good = [r for r in runs if r.error is None]
    figures = {}
    for key in FIGURES:
        values: list[float] = [v for r in good if (v := getattr(r, key)) is not None]
        if values:
            figures[key] = Spread(statistics.median(values), min(values), max(values))
    figures.update(decode_share.spread(good))
    return Row(
        runs=len(runs),
        errors=[r.error for r in runs if r.error is not None],
        kept_up=bool(good) and all(r.kept_up for r in good),
        lost=sum((r.lost or 0) + (r.seq_missing or 0) for r in good),
        not_drained=sum(r.not_drained or 0 for r in good),
        dead_lettered=sum(r.dead_lettered or 0 for r in good),
        figures=figures,
        rejected_all=rejections.rejected_all(good),
    )


def table(
    rows: dict[str, Row],
    baseline: str,
    max_mode: bool,
    spread: bool,
    target_rate: float | None = None,
) -> tuple[list[str], list[list[str]]]:
    """Headers and cells of one profile's table, best CPU per message first.

    `target_rate` names the cores column (`cores at 40,000 msg/s`).
    """
    mode = "max" if max_mode else "rate"
    columns = {
        key: column
        for key, column in COLUMNS.items()
        if mode in column.modes and any(key in row.figures for row in rows.values())
    }
    base = rows.get(baseline)
    named = [
        f"cores at {target_rate:,.0f} msg/s"
        if key == decisions.CORES and target_rate
        else c.header
        for key, c in columns.items()
    ]
    headers = ["codec", "status", *named, "lost", "DLQ"]
    body = []
    for codec in by_cpu(rows):
        row = rows[codec]
        cells = [
            codec + (" (baseline)" if codec == baseline else ""),
            status(row, max_mode),
        ]
        for key, column in columns.items():
            compared = base is not None and column.ratio and codec != baseline
            if key in notes.LATENCY and any(
                notes.behind(r, max_mode) for r in (row, base)
            ):
                compared = False  # a backlog's wait is no ratio
            ref = base.median(key) if base and compared else None
            if key == decode_share.SHARE:  # at most 100 %, or the cell says why
                cells.append(decode_share.cell(row.figures.get(key), spread))
                continue
            cells.append(_cell(row.figures.get(key), column.fmt, ref, spread))
        cells += [str(row.lost), str(row.dead_lettered)]
        body.append(cells)
    return headers, body


def _cell(figure: Spread | None, fmt: str, ref: float | None, spread: bool) -> str:
    """One figure: its median, its ratio to `ref` and, with `spread`, min-max."""
    if figure is None:
        return "-"
    if math.isinf(figure.median):
        return "> top bucket"  # a quantile above the histogram's top: no number
    text = fmt.format(figure.median)
    if ref:
        ratio = figure.median / ref
        text += f" ({ratio:.2f}x)" if ratio >= 0.1 else f" ({ratio:.2g}x)"
    if spread and figure.min != figure.max:
        text += f" [{fmt.format(figure.min)}-{fmt.format(figure.max)}]"
    return text


def tables(report: Report) -> list[tuple[str, list[str], list[list[str]]]]:
    """(profile, headers, cells) of each profile's table, in the report's order."""
    plan = report.plan
    return [
        (
            profile,
            *table(
                rows, plan.baseline, plan.max_mode, plan.repeat > 1, report.target_rate
            ),
        )
        for profile, rows in report.summary.items()
    ]


def markdown_table(headers: list[str], body: list[list[str]]) -> list[str]:
    """One table as Markdown lines: report.md's, and the terminal's when piped."""
    rule = "|" + " --- |" * len(headers)
    return [_md_row(headers), rule, *map(_md_row, body)]


def markdown(report: Report) -> str:
    """report.md: warnings, settings, one table per profile, charts, the environment."""
    plan, env = report.plan, report.environment
    mode = (
        "maximum rate per worker process"
        if plan.max_mode
        else f"{plan.rate:,.0f} msg/s for {plan.duration:.0f} s after "
        f"{plan.warmup:.0f} s warm-up"
    )
    lines = ["# Codec A/B report", ""]
    if (stopped := notes.interrupted(report)) is not None:
        lines += [stopped, ""]
    lines += [
        f"Mode: {mode}; {plan.partitions} partitions; repeats: {plan.repeat}; "
        f"baseline: `{plan.baseline}`.",
        "",
        *answer.section(report),
        "## Full figures",
        "",
        "In these tables, ratios in parentheses: the codec's median over the "
        "baseline's median.",
        "",
    ]
    if plan.payloads is not None:
        lines += [plan.payloads, ""]
    lines += notes.schema_limits(plan)
    if (warning := notes.repeat_warning(plan)) is not None:
        lines += [warning, ""]
    drawn = tables(report)
    if (caveat := notes.baseline_behind(report)) is not None:
        lines += [caveat, ""]
    for profile, headers, body in drawn:
        lines += [
            f"### {plan.heading(profile)}",
            "",
            *markdown_table(headers, body),
            "",
        ]
    if framed := framing.section(report):
        lines += [framed, ""]
    if ratios := decisions.section(report):
        lines += [ratios, ""]
    lines += [logic, ""] if (logic := logic_verdicts.section(report)) else []
    if small := decode_share.note(report):
        lines += [small, ""]
    if refused := rejections.sections(report.results, list(report.summary)):
        lines += [refused, ""]
    if invalid := notes.invalid_latencies(report):
        lines += [invalid, ""]
    if differ := notes.decode_differs(report.summary):
        lines += ["## Decode: Kafka path vs in-process", "", differ, ""]
    if shown := drawable(report.summary):
        lines += ["## Charts", ""]
        lines += [f"![{title}]({name})" for name, _key, title in shown]
        if len(report.summary) > 1:
            lines.append(f"![throughput vs payload size]({SWEEP_CHART})")
        lines.append("")
    lines += [
        "## Definitions",
        "",
        "Figures come from each worker's /metrics and /proc accounting; CPU is the "
        "worker process only. Broker, load generator and worker share this machine's "
        f"{env.cpu_count} cores, so absolute numbers are not production numbers; the "
        "ratios between codecs are the result.",
        "",
    ]
    if (cores := notes.cores(report.target_rate)) is not None:
        lines += [cores, ""]
    legend = notes.legend({h for _, headers, _ in drawn for h in headers})
    lines += [*legend, ""] if legend else []
    libs = ", ".join(f"{k} {v}" for k, v in env.libraries.items())
    lines += [
        "## Environment",
        "",
        f"- Python {env.python} on {env.platform}",
        f"- {env.cpu_count} x {env.cpu_model}",
        f"- Apache Kafka {env.kafka}; librdkafka {env.librdkafka}",
        f"- protobuf backend: {env.protobuf_backend}",
        f"- {libs}",
        "",
    ]
    return "\n".join(lines)


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def write(report: Report, out: Path) -> list[Path]:
    """Write report.json, report.md and the charts into `out`.

    Returns:
        report.md, report.json, then the charts (none without matplotlib).
    """
    out.mkdir(parents=True, exist_ok=True)
    encoded = msgspec.json.format(msgspec.json.encode(report), indent=2)
    (out / "report.json").write_bytes(encoded + b"\n")
    paths = []
    try:
        if report.summary:  # no case finished (interrupted at once): no bars
            paths = charts(report, out)
    except ImportError as exc:  # the tables still stand without pictures
        print(f"codec-ab: no charts: {exc}", file=sys.stderr)
    (out / "report.md").write_text(markdown(report))
    return [out / "report.md", out / "report.json", *paths]


def read(path: Path) -> Report:
    """Decode a report.json.

    Raises:
        OSError: it cannot be read.
        msgspec.DecodeError: it is not a report (the message gives the JSON path).
        ConfigError: its plan is not a valid plan.
    """
    return msgspec.json.decode(path.read_bytes(), type=Report)


def main(argv: Sequence[str] | None = None) -> int:
    """Redraw report.md and the charts from DIR/report.json; 2 when it is missing."""
    parser = argparse.ArgumentParser(
        prog="python -m abrunner.report.tables",
        description="Redraw an A/B report's report.md and charts from its "
        "report.json (the summary is folded again from the results).",
    )
    parser.add_argument(
        "dir", metavar="DIR", type=Path, help="the report directory (codec-ab --out)"
    )
    args = parser.parse_args(argv)
    path = args.dir / "report.json"
    try:
        report = read(path)
    except (OSError, msgspec.DecodeError, ConfigError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else exc
        print(f"{parser.prog}: {path}: {reason}", file=sys.stderr)
        return 2
    if report.staging is not None:  # its ratios are per block: decide() would drop them
        print(
            f"{parser.prog}: {path}: a staging report (codec-ab staging)",
            file=sys.stderr,
        )
        return 2
    report.summary = aggregate(report.results, report.in_process)
    decisions.decide(report, report.target_rate or report.plan.rate)
    for written in write(report, args.dir):
        print(written)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
