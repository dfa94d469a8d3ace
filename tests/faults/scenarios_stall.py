"""A stalled broker (R1, on a broker of its own) and a topic that grows (N1)."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Final

from schemas.errors import RunnerError
from tests.faults.harness import (
    BATCH_SIZE,
    COMMIT_INTERVAL_S,
    WAIT_S,
    Env,
    FaultBroker,
    Outcome,
    wait_until,
)
from tests.faults.run import Run

RATE: Final = 1000
READY_BOUND_S: Final = 5.0
"""A /readyz probe sent this long after the broker froze must answer 503 (the loop's
wait for output acknowledgements is a stall: the worker's threshold is 3 s plus the
batch timeout). The answer's own latency is kept apart (`unready_answered_s`): at
load 20 it arrived 5.3 s after the freeze."""
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
        worker.wait_for(2 * RATE, timeout=WAIT_S)
        run.mark("broker SIGSTOP")
        frozen = time.monotonic()
        broker.send(signal.SIGSTOP)
        try:
            sent: list[float] = []

            def unready() -> bool:
                sent.append(time.monotonic())
                answer = worker.readyz()
                return answer is not None and answer[0] == 503

            # Judged by when the probe that answered 503 was sent: on a loaded
            # machine its answer can take a second more (the worker's HTTP thread
            # waits for a core), which is the probe's latency, not the readiness.
            try:
                wait_until(unready, READY_BOUND_S + 5, every=0.1, what="/readyz 503")
                unready_s = sent[-1] - frozen
            except TimeoutError:
                unready_s = time.monotonic() - frozen
            answered_s = time.monotonic() - frozen
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
            unready_answered_s=round(answered_s, 1),
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
        # The frozen worker's batch and uncommitted tail are handled again: what
        # it finished from one auto-commit interval (plus a second) before the
        # freeze, when its last commit may have been sent, until its exit.
        since = frozen - COMMIT_INTERVAL_S - 1
        run.dup_bound += run.redo(worker, since, start + 1) + 2 * BATCH_SIZE
        run.finish()
    return outcome


ADD_FROM: Final = 2
ADD_TO: Final = 6
ASSIGN_BOUND_S: Final = 30.0
"""Partitions added must be assigned within this (metadata refresh 10 s, rebalance)."""


def added_partitions(reset: str) -> Callable[[Env], Outcome]:
    """Scenario N1 for one `auto.offset.reset`."""

    def n1(env: Env) -> Outcome:
        """Partitions added mid-run (2 -> 6): assigned in seconds, nothing skipped.

        Traffic goes to the new partitions at once, before any rebalance gives
        them an owner; the worker (with `earliest` or `latest`) must be assigned
        them within `ASSIGN_BOUND_S` and handle everything written to them. While
        they have no owner the lag gauge must count them.
        """
        outcome = Outcome(
            f"N1 {reset}", f"Partitions added mid-run {ADD_FROM} -> {ADD_TO} ({reset})"
        )
        with Run(
            env,
            outcome,
            partitions=ADD_FROM,
            worker_args=["--auto-offset-reset", reset],
        ) as run:
            worker = run.worker()
            producer = run.produce(rate=RATE // 2, count=RATE // 2 * 30)
            worker.wait_for(RATE, timeout=WAIT_S)
            added = time.monotonic()
            run.mark(f"partitions {ADD_FROM} -> {ADD_TO}")
            _add_partitions(run.bootstrap, run.topic, ADD_TO)
            producer.widen(ADD_TO)
            run.monitor.widen(ADD_TO)
            run.partitions = ADD_TO
            lag_seen = 0.0

            def assigned() -> bool:
                nonlocal lag_seen
                scraped = worker.scrape()
                if scraped is None:
                    return False
                lag_seen = max(
                    lag_seen,
                    sum(
                        scraped.total("worker_consumer_lag_messages", partition=str(p))
                        for p in range(ADD_FROM, ADD_TO)
                    ),
                )
                return scraped.total("worker_assigned_partitions") >= ADD_TO

            try:
                assign_s = wait_until(assigned, 120, every=0.5, what="new partitions")
            except TimeoutError:
                assign_s = time.monotonic() - added
            run.fault_ends.append(run.mark("new partitions assigned"))
            run.wait_drained(90)
            run.dup_bound += run.redo_faults(worker, [added])
            run.finish()
            outcome.figures.update(
                assigned_after_s=round(assign_s, 1), unowned_lag_max=int(lag_seen)
            )
            if assign_s > ASSIGN_BOUND_S:
                outcome.fail(
                    f"the new partitions were assigned after {assign_s:.0f} s "
                    f"(bound {ASSIGN_BOUND_S:.0f} s)"
                )
        return outcome

    return n1


def _add_partitions(bootstrap: str, topic: str, total: int) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_partitions([NewPartitions(topic, total)]).values():
        future.result(30)
