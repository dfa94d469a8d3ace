"""ST1: a staging A/B through a crash: `codec-ab staging` on a side that lost a worker.

The topology of issue 31, scaled to this machine: one topic of 6 partitions, three
`codec-worker` processes a side (json+pydantic in group A, msgspec-json in group B),
Debian's Prometheus scraping every second with the shipped config's labels and
rules (tests/deploy/staging_stack.py). The traffic runs `LOAD_S` seconds at `RATE`
msg/s, starting after an idle lead-in and followed by a drain, so the window's edges
fall where no counter moves. `KILL_AT_S` into the traffic one side-B worker is killed
with SIGKILL and `RESTART_AFTER_S` later started again on the same port: its
partitions wait for the group's session timeout and rebalance, and then the
restarted worker's counters restart from 0 while it catches up.

Checks, for each start offset in `OFFSETS` (seconds into the first 10 s slice):
- the report warns that side B lagged, with the backlog's size and time;
- each side's slice totals equal its counters' totals within `TOLERANCE`: the final
  `worker_messages_total` of every live worker read from its /metrics, plus, for the
  killed process, its last value scraped before the kill (what it handled after its
  last scrape no counter holds).
The figures (B/A CPU us/msg, the lag warning, totals per offset) go to the report.
"""

from __future__ import annotations

import io
import json
import math
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest

from abrunner import cli
from abrunner.lab.worker_probe import scrape
from tests.deploy.prometheus_stack import _console_script, _Process, api
from tests.deploy.staging_stack import Stack, loadgen_env, running
from tests.faults.harness import Env, Outcome

RATE: Final = 2000
"""msg/s: below what three json+pydantic workers handle on 2 shared cores."""
LOAD_S: Final = 100
KILL_AT_S: Final = 40.0
RESTART_AFTER_S: Final = 15.0
SLICE_S: Final = 10
OFFSETS: Final = (0, 1, 3, 5, 7, 9)
TOLERANCE: Final = 0.005
SIDES: Final = {"A": ("json+pydantic", 3), "B": ("msgspec-json", 3)}


@dataclass
class Crash:
    """The run: its stack, the idle-edged span, and the counters' totals."""

    stack: Stack
    tmp: Path
    start: float
    end: float
    killed_at: float = 0.0
    counted: dict[str, float] = field(default_factory=dict)
    """Side -> the counters' total (see the module)."""


def _last_before(stack: Stack, port: int, before: float) -> float:
    """The killed worker's last scraped `worker_messages_total` before `before`."""
    expr = f'worker_messages_total{{instance="127.0.0.1:{port}"}}[10m]'
    data = api(stack.prometheus, "query", query=expr, time=f"{time.time():.3f}")
    total = 0.0
    for series in data["result"]:
        values = [float(v) for t, v in series["values"] if float(t) < before]
        total += values[-1] if values else 0.0
    return total


def _backlog(stack: Stack) -> float:
    """Both groups' committed lag, summed (0 once drained)."""
    found = stack.query("sum(max by (side, partition) (worker_group_lag_messages))")
    return float(found[0]["value"][1]) if found else math.inf


@contextmanager
def crash_run(env: Env) -> Iterator[Crash]:
    """Run the topology through the crash (see the module); yields once drained."""
    tmp = env.root / "st1"
    tmp.mkdir(parents=True, exist_ok=True)
    with running(env.bootstrap, tmp, SIDES, partitions=6, load=False) as stack:
        run = Crash(stack, tmp, time.time(), 0.0)
        time.sleep(SLICE_S)  # an idle lead-in: the window's start moves over it
        load = _Process.start(
            "loadgen",
            _console_script("codec-loadgen"),
            loadgen_env(env.bootstrap, stack.topic, RATE, LOAD_S, stack.loadgen_port),
            tmp,
        )
        try:
            time.sleep(KILL_AT_S)
            victim = stack.sides["B"][0]
            os.kill(victim.pid, signal.SIGKILL)
            run.killed_at = time.time()
            assert victim.process is not None
            victim.process.popen.wait(10)
            victim.process.log.close()
            time.sleep(RESTART_AFTER_S)
            victim.start()
            load.popen.wait(LOAD_S + 60)
        finally:
            load.stop()
        stack.wait("both groups drained", lambda: _backlog(stack) == 0, timeout=300)
        time.sleep(2 * SLICE_S)  # an idle tail: the window's end moves over it
        run.end = time.time()
        for name, workers in stack.sides.items():
            live = sum(scrape(w.port).total("worker_messages_total") for w in workers)
            run.counted[name] = live
        victim_port = stack.sides["B"][0].port
        run.counted["B"] += _last_before(stack, victim_port, run.killed_at)
        yield run


def staging(run: Crash, offset: int) -> tuple[int, dict[str, Any], str]:
    """`codec-ab staging` from `offset` s after the run's start, whole slices up to
    its end: status, report.json, stdout."""
    begin = run.start + offset
    count = int((run.end - begin) // SLICE_S)
    out = run.tmp / f"report-{offset}"
    argv = ["staging", "--prometheus", run.stack.prometheus, "--slice", f"{SLICE_S}s"]
    argv += ["--start", f"{begin:.3f}", "--end", f"{begin + count * SLICE_S:.3f}"]
    argv += ["--out", str(out)]
    stdout, stderr = io.StringIO(), io.StringIO()
    with redirect_stdout(stdout), redirect_stderr(stderr):
        status = cli.main(argv)
    path = out / "report.json"
    report = json.loads(path.read_text()) if status == 0 else {}
    return status, report, stdout.getvalue() + stderr.getvalue()


def handled(report: dict[str, Any], side: str) -> float:
    """A side's messages over the report's slices."""
    return float(
        sum(
            r["processed"]
            for r in report["staging"]["slice_results"]
            if r["codec"].startswith(f"{side}:")
        )
    )


def st1_staging_crash(env: Env) -> Outcome:
    """ST1 staging A/B through a kill -9: the backlog warned, slices that add up."""
    outcome = Outcome("ST1", "staging A/B through a kill -9")
    try:
        with crash_run(env) as run:
            outcome.figures["counters' totals"] = {
                k: round(v) for k, v in run.counted.items()
            }
            for offset in OFFSETS:
                check(outcome, run, offset)
    except pytest.fail.Exception as exc:  # the stack's own failures
        outcome.fail(str(exc)[:1500])
    return outcome


def check(outcome: Outcome, run: Crash, offset: int) -> None:
    """One start offset's report against the counters."""
    status, report, text = staging(run, offset)
    if status != 0:
        outcome.fail(
            f"offset {offset}: codec-ab staging exited {status}: {text[-500:]}"
        )
        return
    lagged = [w for w in report["staging"]["warnings"] if w.startswith("side B lagged")]
    cpu = next(r for r in report["ratios"] if r["figure"] == "cpu_us_per_msg")
    found: dict[str, Any] = {"cpu B/A": round(cpu["ratio"], 3)}
    if cpu.get("low") is not None:
        found["cpu interval"] = f"{cpu['low']:.3f}-{cpu['high']:.3f}"
    for side, counted in run.counted.items():
        total = handled(report, side)
        found[side] = (
            f"{total:,.0f} vs {counted:,.0f} ({100 * (total / counted - 1):+.2f} %)"
        )
        if abs(total / counted - 1) > TOLERANCE:
            outcome.fail(
                f"offset {offset}: side {side} slices total {total:,.0f}, counters "
                f"{counted:,.0f}"
            )
    if not lagged:
        outcome.fail(
            f"offset {offset}: no lag warning for side B: {report['staging']['warnings']}"
        )
    else:
        found["lag warning"] = lagged[0]
    found["stall"] = report["staging"]["stalls"].get("B", "")
    outcome.figures[f"offset {offset} s"] = found
