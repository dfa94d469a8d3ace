"""A stalled broker, on a broker of its own: R1 /readyz turns, SIGTERM stays bounded."""

from __future__ import annotations

import signal
import time
from typing import Final

from schemas.errors import RunnerError
from tests.faults.harness import Env, FaultBroker, Outcome, wait_until
from tests.faults.run import Run

RATE: Final = 1000
READY_BOUND_S: Final = 5.0
"""/readyz must answer 503 within this of the broker freezing (the loop's wait for
output acknowledgements is a stall: the worker's threshold is 3 s plus the batch
timeout)."""
GRACE_PERIOD_S: Final = 45.0
"""The manifests' `terminationGracePeriodSeconds` (deploy/k8s/base)."""
SHUTDOWN_BOUND_S: Final = 15.0
"""SIGTERM to exit with the broker frozen and the worker's defaults: the shutdown
budget (`shutdown_timeout_s`, 10 s) plus time to notice and exit."""


def r1_stalled_broker(env: Env) -> Outcome:
    """Broker frozen under load: /readyz 503 within 5 s; SIGTERM exits within 15 s.

    The worker writes every message to an output topic with the default delivery
    timeout (30 s). The broker is frozen (SIGSTOP): the loop waits for
    acknowledgements, and /readyz must say so within `READY_BOUND_S`. The worker
    is then sent SIGTERM, still frozen: it must exit 0 within `SHUTDOWN_BOUND_S`,
    well inside the grace period. The broker is thawed, a new worker drains the
    topic, and nothing is lost (the unstored, uncommitted tail is read again).
    """
    outcome = Outcome(
        "R1", "Broker SIGSTOP: /readyz 503 < 5 s; SIGTERM while frozen exits < 15 s"
    )
    with (
        FaultBroker(env.root / "broker-r1") as broker,
        Run(env, outcome, bootstrap=broker.bootstrap) as run,
    ):
        worker = run.worker()
        run.produce(rate=RATE, count=RATE * 20)
        worker.wait_for(2 * RATE, timeout=60)
        run.mark("broker SIGSTOP")
        frozen = time.monotonic()
        broker.send(signal.SIGSTOP)
        try:

            def unready() -> bool:
                answer = worker.readyz()
                return answer is not None and answer[0] == 503

            try:
                unready_s = wait_until(
                    unready, READY_BOUND_S + 1, every=0.1, what="/readyz 503"
                )
            except TimeoutError:
                unready_s = time.monotonic() - frozen
            answer = worker.readyz()
            # SIGTERM at a fixed point of the stall, whatever /readyz said: the
            # loop is still waiting for acknowledgements, far from its timeout.
            time.sleep(max(0.0, READY_BOUND_S + 1 - (time.monotonic() - frozen)))
            run.mark("worker SIGTERM, broker frozen")
            start = time.monotonic()
            try:
                code: int | str = worker.stop(signal.SIGTERM, timeout=60)
            except RunnerError:
                code = "still running after 60 s"
            shutdown_s = time.monotonic() - start
        finally:
            broker.send(signal.SIGCONT)
            run.fault_ends.append(run.mark("broker SIGCONT"))
        outcome.figures.update(
            unready_after_s=round(unready_s, 1),
            shutdown_s=round(shutdown_s, 1),
            exit_code=code,
        )
        if unready_s > READY_BOUND_S:
            outcome.fail(
                f"/readyz stayed 200 for {unready_s:.1f} s with the broker frozen "
                f"(bound {READY_BOUND_S:.0f} s)"
            )
        elif answer is not None:
            outcome.notes.append(f"/readyz: {answer[1].strip()}")
        if code != 0 or shutdown_s > SHUTDOWN_BOUND_S:
            outcome.fail(
                f"SIGTERM with the broker frozen: exit {code} after {shutdown_s:.1f} s "
                f"(bound {SHUTDOWN_BOUND_S:.0f} s, grace period {GRACE_PERIOD_S:.0f} s)"
            )
        run.worker()
        run.wait_drained(120)
        # The frozen worker's batch and uncommitted tail are handled again.
        run.dup_bound += run.redo(worker, start - 6, start + 1) + 2 * 500
        run.finish()
    return outcome
