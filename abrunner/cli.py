"""`codec-ab`: the codec A/B run, one command from nothing to a report with charts.

For each payload profile, repeat and codec: a fresh topic and consumer group, a
worker process with that codec, a warm-up, then the load generator at `--rate` for
`--duration` (`abrunner.runner`). With no `--bootstrap-servers` the local Kafka is
started and stopped here. `--max` finds each codec's maximum rate per worker process
instead: the worker drains a pre-filled backlog as fast as one process can.

Exit status: 0 when every case ran and lost nothing, 1 otherwise, 2 for bad flags.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from rich.console import Console
from rich.table import Table

import service.flags as commands
from abrunner import runner
from abrunner.config import TOOL, AbSettings
from abrunner.plan import Plan, Profile
from abrunner.report import table, write
from abrunner.results import CaseResult, Report
from service.errors import ConfigError
from service.flags import KAFKA_FLAGS, Flag, add_flags

_FLAGS: Final = (
    Flag("--codecs", ("codecs",), "comma-separated codec keys", default="all six"),
    Flag("--rate", ("rate",), "messages per second", float),
    Flag("--duration", ("duration",), "measured seconds per codec", float),
    Flag("--warmup", ("warmup",), "warm-up seconds per codec", float),
    Flag("--profile", ("profile",), "payload profile: small, medium, large[:BYTES]"),
    Flag(
        "--profiles",
        ("profiles",),
        "comma-separated profiles to sweep, e.g. small,medium,large:1000000",
    ),
    Flag(
        "--large-bytes",
        ("large_bytes",),
        "comma-separated sizes of the large profile, e.g. 10000,100000,1500000",
    ),
    Flag("--repeat", ("repeat",), "runs of each case; median and spread", int),
    Flag(
        "--max",
        ("max_mode",),
        "find each codec's maximum rate per worker process",
        boolean=True,
    ),
    Flag("--max-messages", ("max_messages",), "backlog size in --max mode", int),
    Flag("--partitions", ("partitions",), "partitions of each topic", int),
    Flag(
        "--baseline",
        ("baseline",),
        "codec the ratios refer to",
        default="json-stdlib+pydantic if listed, else the first codec",
    ),
    Flag("--out", ("out",), "report directory", Path),
    Flag(
        "--worker-arg",
        ("worker_args",),
        "extra codec-worker flag, repeatable, e.g. --worker-arg=--batch-size=1000",
        many=True,
    ),
    Flag(
        "--verify",
        ("verify",),
        "read each topic back to check the run's x-seq coverage",
        boolean=True,
    ),
    *KAFKA_FLAGS,
)


def build_parser() -> argparse.ArgumentParser:
    """The `codec-ab` argument parser; every help text states default and variable."""
    parser = commands.command_parser(
        "codec-ab",
        "Compare codecs on real Kafka: a worker per codec under the same load, then "
        "one side-by-side report (report.md, report.json, PNG charts). Without a "
        "broker address it starts the local Kafka. Precedence: defaults < --config "
        "TOML ([kafka], [ab]) < environment (KAFKA_*, AB_*) < flags.",
        TOOL,
    )
    add_flags(parser, _FLAGS, AbSettings, TOOL)
    return parser


def plan_from_settings(s: AbSettings) -> Plan:
    """The typed plan from the settings: the one place settings become a `Plan`.

    Raises:
        ConfigError: a value is invalid; the message names the setting.
    """
    profiles = [Profile.parse(p) for p in (s.profiles or [s.profile])]
    if s.large_bytes:
        profiles = [p for p in profiles if p.schema != "large"]
        profiles += [Profile("large", size) for size in s.large_bytes]
    same = {"rate", "duration", "warmup", "repeat", "max_mode", "max_messages"}
    return Plan(
        **s.model_dump(include=same | {"partitions", "verify"}),
        codecs=tuple(s.codecs),
        profiles=tuple(profiles),
        baseline=s.chosen_baseline,
        out=str(s.out),
        # --worker-arg=--batch-size=1000 is two worker arguments.
        worker_args=tuple(w for a in s.worker_args for w in a.split("=", 1)),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the A/B; 0 when every case ran and lost nothing, 1 otherwise, 2 bad flags."""
    args = build_parser().parse_args(argv)
    settings = commands.settings_or_status(AbSettings, TOOL, args, _FLAGS)
    if isinstance(settings, int):
        return settings
    try:
        plan = plan_from_settings(settings)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    console = Console(stderr=True)
    report = runner.run(plan, settings.bootstrap, console)
    paths = write(report, plan.out_dir)
    _print_tables(report)
    console.print(
        "report: "
        + ", ".join(str(p) for p in paths[:2])
        + f" and {len(paths) - 2} charts"
    )
    return 1 if any(map(_failed, report.results)) else 0


def _failed(result: CaseResult) -> bool:
    return bool(result.error is not None or result.lost or result.seq_missing)


def _print_tables(report: Report) -> None:
    plan = report.plan
    for profile, rows in report.summary.items():
        headers, body = table(rows, plan.baseline, plan.max_mode, plan.repeat > 1)
        view = Table(title=f"profile {profile}", show_lines=False)
        for header in headers:
            view.add_column(header, overflow="fold")
        for cells in body:
            view.add_row(*cells)
        Console().print(view)
