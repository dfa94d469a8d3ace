"""`python -m tests.faults`: run the scenarios, print the table, write the report."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

from localkafka import LocalKafka
from tests.faults.catalog import Entry, select
from tests.faults.harness import Env, Outcome
from tests.faults.report import render, table

ROOT: Final = Path(__file__).resolve().parents[2]
REPORT: Final = ROOT / "docs" / "reliability.md"


def run_entry(entry: Entry, env: Env) -> Outcome:
    """Run one scenario; a harness error (a timeout, a broker that will not start)
    makes it FAILED with the error, never stops the suite."""
    start = time.monotonic()
    try:
        outcome = entry.run(env)
    except Exception as exc:
        outcome = Outcome(entry.id, entry.title)
        outcome.fail(f"scenario stopped: {type(exc).__name__}: {exc}")
        outcome.notes.append(traceback.format_exc(limit=4).replace("\n", " | ")[-1500:])
    outcome.seconds = round(time.monotonic() - start, 1)
    return outcome


@contextlib.contextmanager
def shared_broker() -> Iterator[str]:
    """`KAFKA_BOOTSTRAP_SERVERS` if set, else a local broker for the whole run."""
    if external := os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        yield external
        return
    with LocalKafka() as kafka:
        yield kafka.bootstrap_servers


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tests.faults",
        description="Fault scenarios against the real worker and a local broker; "
        "the full set (default) rewrites docs/reliability.md.",
    )
    parser.add_argument("--fast", action="store_true", help="the fast set, short runs")
    parser.add_argument("--only", help="comma-separated ids, e.g. D2,D3,P1-P3")
    parser.add_argument(
        "--out",
        type=Path,
        help="report path (default: docs/reliability.md for the full set, else none)",
    )
    parser.add_argument(
        "--logs", type=Path, help="where worker logs are kept (default: a temp dir)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected scenarios; exit 0 if none FAILED, else 1."""
    args = _parser().parse_args(argv)
    entries = select(fast=args.fast, only=args.only)
    out = args.out or (None if args.fast or args.only else REPORT)
    logs = args.logs or Path(tempfile.mkdtemp(prefix="codec-faults-"))
    logs.mkdir(parents=True, exist_ok=True)
    command = " ".join(["python -m tests.faults", *(argv or sys.argv[1:])])
    start = time.monotonic()
    outcomes: list[Outcome] = []
    with shared_broker() as bootstrap:
        env = Env(bootstrap, logs, fast=args.fast)
        for entry in entries:
            print(f"{entry.id}: running", flush=True)
            outcome = run_entry(entry, env)
            outcomes.append(outcome)
            print(
                f"{entry.id}: {outcome.status} in {outcome.seconds:.0f} s", flush=True
            )
            for line in outcome.failures:
                print(f"    {line[:300]}", flush=True)
    seconds = time.monotonic() - start
    print(table(outcomes))
    print(f"{len(outcomes)} scenarios in {seconds / 60:.1f} min; logs in {logs}")
    if out is not None:
        out.write_text(render(outcomes, command=command, seconds=seconds))
        print(f"report: {out}")
    return 1 if any(o.status == "FAILED" for o in outcomes) else 0
