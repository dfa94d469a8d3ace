"""Broker faults, each on a broker of its own: D9 SIGTERM, D10 SIGKILL, D11 pause."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Final

from tests.faults.harness import Env, FaultBroker, Outcome
from tests.faults.observe import worker_lines
from tests.faults.run import Run

RATE: Final = 1000
PAUSE_S: Final = 15.0
"""SIGSTOP length for D11: past the 10 s session timeout, under the worker's 30 s
delivery timeout (a longer pause is D8's subject: downstream outages)."""

Fault = Callable[[FaultBroker, Run], list[tuple[float, float]]]
"""Breaks the broker; returns each fault's (start, end) in monotonic seconds."""


def _restart(sig: int, times: int, down_s: float) -> Fault:
    """Stop the broker with `sig`, leave it down `down_s`, restart it; `times` over."""

    def fault(broker: FaultBroker, run: Run) -> list[tuple[float, float]]:
        windows = []
        for _ in range(times):
            start = time.monotonic()
            run.mark(f"broker {signal.Signals(sig).name}")
            broker.stop(sig)
            time.sleep(down_s)
            broker.start()
            run.fault_ends.append(run.mark("broker answers again"))
            windows.append((start, time.monotonic()))
            time.sleep(4)  # traffic flows between two faults
        return windows

    return fault


def _pause(broker: FaultBroker, run: Run) -> list[tuple[float, float]]:
    start = time.monotonic()
    run.mark("broker SIGSTOP")
    broker.send(signal.SIGSTOP)
    time.sleep(PAUSE_S)
    broker.send(signal.SIGCONT)
    run.fault_ends.append(run.mark("broker SIGCONT"))
    return [(start, time.monotonic())]


def _broker_fault(env: Env, outcome: Outcome, fault: Fault, seconds: int) -> Outcome:
    """A worker at `RATE` msg/s for `seconds` while `fault` breaks its broker.

    The duplicate bound widens per fault by `Run.redo_faults`: a rebalance on
    recovery restarts from the last commit that got through.
    """
    with (
        FaultBroker(env.root / f"broker-{outcome.id.lower()}") as broker,
        Run(env, outcome, bootstrap=broker.bootstrap) as run,
    ):
        worker = run.worker()
        run.produce(rate=RATE, count=RATE * seconds)
        worker.wait_for(3 * RATE, timeout=60)
        windows = fault(broker, run)
        run.wait_drained(120)
        run.dup_bound += run.redo_faults(worker, [start for start, _ in windows])
        if not worker.alive():
            outcome.fail(f"the worker exited ({worker.exit_code()}) over the fault")
        run.finish()
        outcome.figures["rebalances"] = sum(
            1
            for line in worker_lines(worker.log_path)
            if line.get("event") in {"partitions_revoked", "partitions_lost"}
        )
    return outcome


def d9_broker_sigterm(env: Env) -> Outcome:
    """Broker stopped cleanly and restarted (once; three times in the full set)."""
    times = 1 if env.fast else 3
    outcome = Outcome("D9", f"Broker SIGTERM, down 5 s, restart (x{times})")
    return _broker_fault(
        env, outcome, _restart(signal.SIGTERM, times, 5), 15 + 25 * times
    )


def d10_broker_sigkill(env: Env) -> Outcome:
    """Broker killed (no shutdown at all) and restarted on its data."""
    times = 1 if env.fast else 2
    outcome = Outcome("D10", f"Broker SIGKILL, down 5 s, restart (x{times})")
    return _broker_fault(
        env, outcome, _restart(signal.SIGKILL, times, 5), 15 + 25 * times
    )


def d11_broker_pause(env: Env) -> Outcome:
    """Broker frozen (SIGSTOP) past the session timeout, then thawed (SIGCONT)."""
    outcome = Outcome(
        "D11", f"Broker SIGSTOP {PAUSE_S:.0f} s (> session timeout), SIGCONT"
    )
    return _broker_fault(env, outcome, _pause, 40)
