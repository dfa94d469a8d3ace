"""Duplicates after a crash against the commit interval (K1).

A kill -9 (or an OOM, a lost node) re-reads what was processed since the last
commit: offsets are stored after each batch's writes are acknowledged (at most every
`offset_store_interval_ms`, 100 ms) and committed every `commit_interval_ms`
(librdkafka's `auto.commit.interval.ms`, 5 s by default). So the duplicates of one
kill are at most the rate times (the commit interval + the store interval + the
batch time) plus the batch in flight: the harness's X (`Run.kill`). K1 kills the
worker twice at 3,000 msg/s and restarts it at once (static membership), with the
interval at the default and lower, and reports the duplicates of each: the
setting trades them for one OffsetCommit request per interval.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Final

from tests.faults.harness import WAIT_S, Env, Outcome
from tests.faults.run import Run
from tests.faults.scenarios_consumer import STATIC_SESSION_MS, _kill_and_restart

Scenario = Callable[[Env], Outcome]

RATE: Final = 3000
KILLS: Final = 2
SECONDS: Final = 15


def k1_commit_interval(interval_ms: int) -> Scenario:
    """K1 with `--commit-interval-ms interval_ms` (see the module docstring)."""

    def scenario(env: Env) -> Outcome:
        outcome = Outcome(
            f"K1 {interval_ms}",
            f"kill -9 x{KILLS} at {RATE:,} msg/s, commit interval {interval_ms} ms: "
            "duplicates bounded by what the interval leaves uncommitted",
        )
        interval = ("--commit-interval-ms", str(interval_ms))
        static = (
            *interval,
            "--session-timeout-ms",
            str(STATIC_SESSION_MS),
            "--group-instance-id",
            f"faults-k1-{uuid.uuid4().hex[:6]}",
        )
        with Run(env, outcome) as run:
            run.commit_interval_s = interval_ms / 1000
            worker = run.worker(*static)
            run.produce(rate=RATE, count=RATE * SECONDS)
            for i in range(KILLS):
                worker.wait_for(4 * RATE, timeout=WAIT_S)
                time.sleep(0.7 * (i + 1))  # at different points of an interval
                worker, _ = _kill_and_restart(run, worker, *static)
            run.wait_drained(90)
            run.finish()
        dup = outcome.figures.get("duplicates", 0)
        outcome.figures["dup_per_kill"] = round(float(dup) / KILLS)
        outcome.figures["commits_per_s"] = round(1000 / interval_ms, 1)
        return outcome

    scenario.__name__ = f"k1_{interval_ms}"
    return scenario
