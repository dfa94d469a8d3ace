"""`codec-ab staging`: two live deployments, read from Prometheus, to a verdict.

    codec-ab staging --prometheus http://prometheus:9090 --window 2h --slice 5m

reads side A (`--a`, default `side="A"`) and side B (`--b`, default `side="B"`), the
labels the shipped Prometheus config (compose) and the staging-ab overlay's
ServiceMonitors give each side's workers, over the window cut into slices
(`abrunner.staging.slices`), and writes report.md, report.json and the charts as the lab run
does, marked as a staging report (`abrunner.staging.report`). `--compare OLD` gates
the new report against OLD as the lab run's `--compare` does.

Exit status: 0 done (warnings do not fail it), 1 Prometheus unreachable or a
regression against `--compare`, 2 bad input (flags, a selector that matches nothing,
a window with no data, a side with two codecs, an unreadable OLD report), 130
interrupted while reading.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final, TextIO

import msgspec
from rich.console import Console
from rich.markdown import Markdown

import service.settings.cli_flags as commands
from abrunner.config import TOOL, AbSettings
from abrunner.report import compare
from abrunner.report.charts import CHARTS, charts
from abrunner.results import Report, Staging
from abrunner.staging import report as sr, sections
from abrunner.staging.comparability import time_of
from abrunner.staging.prometheus_api import Client
from abrunner.staging.slices import MAX_POINTS, StagingError, Window, overlap, read_side
from service.settings.cli_flags import Flag, add_flags

PROG: Final = "codec-ab staging"
_FLAGS: Final = (
    Flag("--prometheus", ("prometheus_url",), "the Prometheus server's URL"),
    Flag("--a", ("side_a",), "PromQL label matchers of side A (the baseline)"),
    Flag("--b", ("side_b",), "PromQL label matchers of side B"),
    Flag(
        "--window",
        ("window",),
        "the span read, ending at --end: 90s, 5m, 2h",
        default="1h",
    ),
    Flag("--start", ("start",), "window start: unix seconds or RFC 3339"),
    Flag("--end", ("end",), "window end: unix seconds or RFC 3339", default="now"),
    Flag(
        "--slice",
        ("slice",),
        "slice length: 5m, 30s (>= 4 scrape intervals)",
        default="5m",
    ),
    Flag("--out", ("out",), "report directory", Path),
    Flag(
        "--max-difference",
        ("max_difference",),
        "warn when the sides' message rates or payload sizes differ by more than "
        "this fraction",
        float,
    ),
    Flag(
        "--target-rate",
        ("target_rate",),
        "msg/s the `cores at` column sizes for: CPU us/msg x rate / 1e6",
        float,
        default="the traffic's rate (side A's mean over the window)",
    ),
    *compare.gate_flags("a side"),
)


def build_parser() -> argparse.ArgumentParser:
    """The `codec-ab staging` parser; every help text states default and variable."""
    parser = commands.command_parser(
        PROG,
        "Compare two live deployments scraped by Prometheus (side A, side B): the "
        "lab run's report, 95 % intervals, verdicts and --compare gate, from slices "
        "of the window. Precedence: defaults < --config TOML ([ab]) < environment "
        "(AB_*) < flags.",
        TOOL,
    )
    add_flags(parser, _FLAGS, AbSettings, TOOL)
    parser.add_argument(
        "--compare",
        metavar="OLD",
        help="after the report, compare it with OLD (a report.json or its "
        "directory); exit 1 when a side regressed beyond --max-regression",
    )
    return parser


def window_of(settings: AbSettings, now: float) -> Window:
    """The window the settings name: --start/--end, else --window ending at --end
    (default now).

    Raises:
        StagingError: it is empty or shorter than one slice (status 2).
    """
    end = settings.end if settings.end is not None else now
    start = settings.start if settings.start is not None else end - settings.window
    if start >= end:
        raise StagingError(f"--start/--end: the window is empty ({start} >= {end})", 2)
    window = Window(start, end, settings.slice)
    if window.count > MAX_POINTS:
        raise StagingError(
            f"--slice {settings.slice:g}s cuts the window into {window.count} slices; "
            f"at most {MAX_POINTS}: choose longer slices",
            2,
        )
    if window.count < 1:
        raise StagingError(
            f"--slice {settings.slice:g}s is longer than the window ({end - start:g}s)",
            2,
        )
    return window


def main(argv: Sequence[str] | None = None) -> int:
    """Run `codec-ab staging`; see the module's exit statuses."""
    args = build_parser().parse_args(argv)
    settings = commands.settings_or_status(AbSettings, TOOL, args, _FLAGS)
    if isinstance(settings, int):
        return settings
    if settings.prometheus_url is None:
        print(
            f"{PROG}: --prometheus URL is required (or AB_PROMETHEUS_URL, "
            "[ab] prometheus_url)",
            file=sys.stderr,
        )
        return 2
    try:
        before = compare.reports([args.compare] if args.compare else [])
    except compare.UnreadableReport as exc:
        print(f"{PROG}: --compare: {exc}", file=sys.stderr)
        return 2
    try:
        report = measure(settings, settings.prometheus_url, time.time())
    except StagingError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:  # nothing written yet: nothing to keep
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    paths = write(report, settings.out)
    print_report(report, sys.stdout)
    console = Console(stderr=True)
    console.print(f"report: {paths[0]}, {paths[1]} and {len(paths) - 2} charts")
    if not before:
        return 0
    return compare.gate(
        before[0],
        report,
        (str(args.compare), str(paths[1])),
        settings.max_regression,
        settings.gate_figures,
        sys.stdout,
    )


def measure(settings: AbSettings, url: str, now: float) -> Report:
    """Read both sides and build the report.

    Raises:
        StagingError: bad input (2) or Prometheus failing (1).
    """
    window = window_of(settings, now)
    client = Client(url)
    a = read_side(client, "A", settings.side_a, window)
    b = read_side(client, "B", settings.side_b, window)
    if shared := overlap(a, b):
        targets = ", ".join(sorted(f"{job}/{inst}" for job, inst in shared))
        raise StagingError(
            f"--a '{a.selector}' and --b '{b.selector}' match the same workers "
            f"({targets}): give each side its own selector",
            2,
        )
    return sr.build(
        url,
        window,
        a,
        b,
        settings.out,
        settings.max_difference,
        settings.target_rate,
    )


def markdown(report: Report) -> str:
    """report.md of a staging report."""
    info = report.staging
    assert info is not None  # noqa: S101 (built by abrunner.staging.report.build)
    lines = [
        "# Codec A/B staging report",
        "",
        f"Live deployments read from Prometheus at {info.prometheus}. "
        f"{info.window_note} Side A is the baseline: ratios in "
        "parentheses are B over A. Every figure sums a side's worker processes "
        "(CPU per message = "
        "summed CPU / summed messages); RSS is per process. Loss is not checked "
        "here (the lab run reads its x-seq back); dead letters are counted.",
        "",
        *sections.answer_section(report),
        "## Sides",
        "",
        "| side | selector | codec | schema | worker processes | restarts | "
        "slices with no message handled | consumer errors | topics |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {s.name} | `{s.selector}` | {s.codec} | {s.schema} | {s.processes} | "
        f"{s.restarts} | {s.slices_without_data} | {s.consumer_errors} | "
        f"{', '.join(s.topics) or '-'} |"
        for s in info.sides
    ]
    lines += ["", sections.comparability_section(info), ""]
    lines += sections.figures_table(report)
    lines += [sections.ratios_section(report), "", *_slices(info), ""]
    if report.summary:
        lines += ["## Charts", "", *[f"![{t}]({n})" for n, _k, t in CHARTS], ""]
    return "\n".join(lines)


def _slices(info: Staging) -> list[str]:
    """Per slice: throughput, CPU us/msg and p99 of each side."""
    lines = [
        "## Slices",
        "",
        "| slice | end | A msg/s | B msg/s | A CPU us/msg | B CPU us/msg | "
        "A p99 ms | B p99 ms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    by = {(r.codec[0], r.repeat): r for r in info.slice_results}
    for i in range(info.slices):
        ra, rb = by.get(("A", i)), by.get(("B", i))
        cells = [str(i + 1), time_of(info.start + (i + 1) * info.slice_s)[11:19]]
        for field, fmt in (
            ("throughput", "{:,.0f}"),
            ("cpu_us_per_msg", "{:.1f}"),
            ("e2e_p99_ms", "{:.1f}"),
        ):
            for r in (ra, rb):
                value = getattr(r, field) if r else None
                cells.append("-" if value is None else fmt.format(value))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def write(report: Report, out: Path) -> list[Path]:
    """report.json, report.md and the charts in `out`: report.md, report.json first."""
    out.mkdir(parents=True, exist_ok=True)
    encoded = msgspec.json.format(msgspec.json.encode(report), indent=2)
    (out / "report.json").write_bytes(encoded + b"\n")
    drawn: list[Path] = []
    try:
        if report.summary:
            drawn = charts(report, out)
    except ImportError as exc:
        print(f"{PROG}: no charts: {exc}", file=sys.stderr)
    (out / "report.md").write_text(markdown(report))
    return [out / "report.md", out / "report.json", *drawn]


def print_report(report: Report, out: TextIO) -> None:
    """Warnings, the table and the ratios on `out` (rendered on a terminal)."""
    info = report.staging
    assert info is not None  # noqa: S101
    parts = [
        "\n".join(sections.answer_section(report)).strip(),
        info.window_note,
        sections.comparability_section(info),
        "\n".join(sections.figures_table(report)),
        sections.ratios_section(report),
    ]
    if not out.isatty():
        out.write("\n\n".join(parts) + "\n")
        return
    console = Console(file=out)
    for part in parts:
        console.print(Markdown(part))
