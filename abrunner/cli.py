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
from collections.abc import Sequence
from pathlib import Path

import msgspec
from rich.console import Console
from rich.table import Table

from abrunner import runner
from abrunner.plan import DEFAULT_BASELINE, Plan, Profile
from abrunner.report import table, write
from abrunner.results import CaseResult, Report
from service.codecs import REAL_CODECS
from service.errors import ConfigError


def build_parser() -> argparse.ArgumentParser:
    """The `codec-ab` argument parser; every help text states the default."""
    parser = argparse.ArgumentParser(
        prog="codec-ab",
        description="Compare codecs on real Kafka: a worker per codec under the same "
        "load, then one side-by-side report (report.md, report.json, PNG charts).",
    )
    add = parser.add_argument
    add("--bootstrap-servers", help="Kafka to use (default: start the local Kafka)")
    add(
        "--codecs",
        default=",".join(REAL_CODECS),
        help="comma-separated codec keys (default: all six)",
    )
    add("--rate", type=float, default=40_000, help="msg/s (default: 40000)")
    add("--duration", type=float, default=30, help="measured s per codec (default: 30)")
    add("--warmup", type=float, default=5, help="warm-up s per codec (default: 5)")
    add(
        "--profile",
        default="medium",
        help="payload profile: small, medium, large[:BYTES] (default: medium)",
    )
    add(
        "--profiles",
        help="comma-separated profiles to sweep, e.g. small,medium,large:1000000",
    )
    add(
        "--large-bytes",
        help="comma-separated sizes for the large profile, e.g. 10000,100000,1500000",
    )
    add(
        "--repeat",
        type=int,
        default=1,
        help="repeat each case N times; report median and spread (default: 1)",
    )
    add(
        "--max",
        dest="max_mode",
        action="store_true",
        help="find each codec's maximum rate per worker process",
    )
    add(
        "--max-messages",
        type=int,
        default=200_000,
        help="backlog size in --max mode (default: 200000)",
    )
    add("--partitions", type=int, default=4, help="per topic (default: 4)")
    add(
        "--baseline",
        default=DEFAULT_BASELINE,
        help=f"codec the ratios refer to (default: {DEFAULT_BASELINE})",
    )
    add(
        "--out",
        type=Path,
        default=Path("ab-results"),
        help="report directory (default: ab-results)",
    )
    add(
        "--worker-arg",
        action="append",
        default=[],
        metavar="FLAG=VALUE",
        help="extra codec-worker flag, repeatable, e.g. --worker-arg=--batch-size=1000",
    )
    add(
        "--no-verify",
        action="store_true",
        help="skip reading the topic back to check x-seq coverage",
    )
    return parser


def plan_from_args(args: argparse.Namespace) -> Plan:
    """The typed plan from parsed arguments: the one place flags become a `Plan`.

    Raises:
        ConfigError: a flag's value is invalid; the message names the flag.
    """
    profiles = [
        Profile.parse(p.strip()) for p in (args.profiles or args.profile).split(",")
    ]
    if args.large_bytes:
        sizes = [s.strip() for s in args.large_bytes.split(",")]
        if not all(s.isdigit() for s in sizes):
            raise ConfigError(f"--large-bytes {args.large_bytes!r}: expected N,N,...")
        profiles = [p for p in profiles if p.schema != "large"]
        profiles += [Profile("large", int(s)) for s in sizes]
    # Flags named as the plan's fields (--rate, --max-messages, ...) pass as they are.
    same = {f.name for f in msgspec.structs.fields(Plan)} & vars(args).keys()
    return Plan(
        **{name: getattr(args, name) for name in same - {"codecs", "profiles", "out"}},
        codecs=tuple(c.strip() for c in args.codecs.split(",") if c.strip()),
        profiles=tuple(profiles),
        out=str(args.out),
        # --worker-arg=--batch-size=1000 is two worker arguments.
        worker_args=tuple(w for a in args.worker_arg for w in a.split("=", 1)),
        verify=not args.no_verify,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the A/B; 0 when every case ran and lost nothing, 1 otherwise, 2 bad flags."""
    args = build_parser().parse_args(argv)
    console = Console(stderr=True)
    try:
        plan = plan_from_args(args)
    except ConfigError as exc:
        console.print(f"codec-ab: {exc}", markup=False, highlight=False)
        return 2
    report = runner.run(plan, args.bootstrap_servers, console)
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
