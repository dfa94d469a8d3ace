"""Broker faults, each on a broker of its own: D9 SIGTERM, D10 SIGKILL, D11 pause."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from schemas.errors import RunnerError
from service.settings.worker import ConsumerSettings
from tests.faults.harness import WAIT_S, Env, FaultBroker, FaultWorker, Outcome
from tests.faults.observe import worker_lines
from tests.faults.run import Run

RATE: Final = 1000
PAUSE_S: Final = 15.0
"""SIGSTOP length for D11: past the 10 s session timeout and D11's 5 s delivery
timeout, with output writes in flight (1,000 msg/s): the worker must rewind and
retry the stuck batch, not exit."""
D11_DELIVERY_TIMEOUT_S: Final = 5.0
REJOIN_BOUND_S: Final = (
    ConsumerSettings.model_fields["max_poll_interval_ms"].default / 1000 + 30
)
"""How long the drain after the broker's faults may make no progress: the
worker's JoinGroup bound plus a margin. A JoinGroup is held by the coordinator
until the group's members have rejoined, for up to the rebalance timeout, and
librdkafka waits for its answer up to `max.poll.interval.ms` + 3 s before it
asks again (the worker's default: 300 s). At load 17-25, D9's worker was left
with no assignment for over 120 s after the broker's last restart (its loop
polling, no error logged), where runs alone re-formed the group in 7-90 s."""
SHUTDOWN_BOUND_S: Final = 20.0
"""A SIGTERM while the broker is stopped must end the worker within this: its
`close()` is bounded (about 10 s) plus the time to notice."""

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


def _broker_fault(
    env: Env,
    outcome: Outcome,
    fault: Fault,
    seconds: int,
    *,
    config: Mapping[str, Mapping[str, Any]] | None = None,
    after: Callable[[FaultBroker, Run, FaultWorker], None] | None = None,
) -> Outcome:
    """A worker at `RATE` msg/s for `seconds` while `fault` breaks its broker.

    The duplicate bound widens per fault by `Run.redo_faults`: a rebalance on
    recovery restarts from the last commit that got through (and by a batch per
    failed write attempt, which `Run` counts). `after` runs once the input is
    drained, before the verdict.
    """
    with (
        FaultBroker(env.root / f"broker-{outcome.id.lower()}") as broker,
        Run(env, outcome, bootstrap=broker.bootstrap, config=config) as run,
    ):
        worker = run.worker()
        run.produce(rate=RATE, count=RATE * seconds)
        worker.wait_for(3 * RATE, timeout=WAIT_S)
        windows = fault(broker, run)
        run.wait_drained(REJOIN_BOUND_S)
        run.dup_bound += run.redo_faults(worker, [start for start, _ in windows])
        if not worker.alive():
            outcome.fail(f"the worker exited ({worker.exit_code()}) over the fault")
        elif after is not None:
            after(broker, run, worker)
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


def _stop_while_frozen(broker: FaultBroker, run: Run, worker: FaultWorker) -> None:
    """SIGTERM the worker while the broker is frozen: it must exit in bounded time."""
    outcome = run.outcome
    run.mark("broker SIGSTOP (shutdown check)")
    broker.send(signal.SIGSTOP)
    try:
        time.sleep(1)
        start = time.monotonic()
        run.mark("worker SIGTERM, broker frozen")
        try:
            code: int | str = worker.stop(signal.SIGTERM, timeout=60)
        except RunnerError:
            code = "still running after 60 s"
        took = time.monotonic() - start
    finally:
        broker.send(signal.SIGCONT)
        run.mark("broker SIGCONT (shutdown check)")
    outcome.figures.update(
        shutdown_s_broker_frozen=round(took, 1), shutdown_exit_code=code
    )
    if took > SHUTDOWN_BOUND_S:
        outcome.fail(
            f"SIGTERM with the broker frozen took {took:.0f} s to end the worker "
            f"({code}), over {SHUTDOWN_BOUND_S:.0f} s"
        )


def d11_broker_pause(env: Env) -> Outcome:
    """Broker frozen (SIGSTOP) past the session and delivery timeouts, then thawed.

    The worker runs with `delivery_timeout_s = 5`, so the output writes stuck in
    the frozen broker fail: it must rewind, retry and carry on, never exit. The
    full set then freezes the broker again and sends the worker SIGTERM: its
    shutdown must stay bounded.
    """
    outcome = Outcome(
        "D11",
        f"Broker SIGSTOP {PAUSE_S:.0f} s (> session and delivery timeouts) with "
        "writes in flight, SIGCONT",
    )
    config = {"worker.processing": {"delivery_timeout_s": D11_DELIVERY_TIMEOUT_S}}
    after = None if env.fast else _stop_while_frozen
    _broker_fault(env, outcome, _pause, 40, config=config, after=after)
    if not outcome.figures.get("delivery_failures"):
        outcome.fail(
            "no failed write was counted (worker_delivery_failures_total): the "
            "stall did not exercise the delivery timeout"
        )
    return outcome
