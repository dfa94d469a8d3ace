"""Poison: P1-P3 per codec, P4 DLQ unavailable, P5 logic errors with a retry budget."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from loadgen.payloads import make_payloads
from localkafka import create_topic, delete_topic
from service.codecs import CodecName, get_codec
from service.headers import DLQ_PREFIX
from tests.faults.harness import (
    COMMIT_INTERVAL_S,
    LOG_APPEND,
    Env,
    FaultWorker,
    Outcome,
)
from tests.faults.observe import end_offsets
from tests.faults.poison import MARKER, Case, cases, interleaved
from tests.faults.producer import good_traffic
from tests.faults.run import Run

Scenario = Callable[[Env], Outcome]
EVERY: Final = 25
"""A poison message every 25 seqs: good ones on both sides of each."""


def _dead_letter_reasons(worker: FaultWorker) -> dict[str, int]:
    scraped = worker.scrape()
    if scraped is None:
        return {}
    return {
        s.labels["reason"]: int(s.value)
        for s in scraped.samples
        if s.name == "worker_dead_letters_total"
    }


def _marker_leaks(run: Run) -> list[str]:
    """Where the payload marker shows up: DLQ context headers or worker logs."""
    leaks = []
    for record in run.data.dlq if run.data else ():
        for key, value in record.headers:
            if key.startswith(DLQ_PREFIX) and value and MARKER.encode() in value:
                leaks.append(f"DLQ header {key} of x-seq {record.seq}")
    leaks += [
        f"log {log.name}"
        for log in run.logs()
        if MARKER in log.read_text(errors="replace")
    ]
    return leaks


def _failed_cases(run: Run, kinds: list[Case]) -> list[str]:
    """The cases whose message is not where it belongs (DLQ for poison, else output)."""
    if run.data is None:
        return [k.name for k in kinds]
    dead = {r.seq for r in run.data.dlq}
    handled = {r.seq for r in run.data.output}
    return [
        kind.name
        for i, kind in enumerate(kinds)
        if EVERY * (i + 1) not in (dead if kind.poison else handled)
    ]


def poison_for(codec: CodecName) -> Scenario:
    """P1-P3 for one codec: every poison case once, between good messages."""

    def scenario(env: Env) -> Outcome:
        outcome = Outcome(f"P1-P3 {codec}", f"Poison per codec: {codec}")
        kinds = cases(codec)
        with Run(env, outcome, codec=codec) as run:
            worker = run.worker()
            plan = interleaved(good_traffic(codec), kinds, EVERY)
            run.produce(plan, rate=250, count=EVERY * (len(kinds) + 1))
            run.wait_drained(45)
            reasons = _dead_letter_reasons(worker)
            alive = worker.alive()
            run.finish()
            if not alive:
                outcome.fail(f"the worker exited ({worker.exit_code()}) on poison")
            outcome.figures.update(
                poison_cases=sum(1 for k in kinds if k.poison),
                dlq_by_reason=",".join(f"{k}={v}" for k, v in sorted(reasons.items())),
                cases_failed=", ".join(_failed_cases(run, kinds)) or "none",
            )
            if leaks := _marker_leaks(run):
                outcome.fail(f"a payload value leaked: {', '.join(leaks)}")
        return outcome

    scenario.__name__ = f"p1_p3_{codec.replace('-', '_').replace('+', '_')}"
    return scenario


def _supervise(run: Run, done: Callable[[], bool], timeout: float) -> list[int | None]:
    """Restart the worker whenever it exits (as a supervisor would) until `done()`.

    Each exit widens the duplicate bound by what the dead incarnation may have
    finished since its last commit.
    """
    exits: list[int | None] = []
    worker = run.workers[-1]
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        if not worker.alive():
            exits.append(worker.exit_code())
            now = time.monotonic()
            run.dup_bound += run.redo(worker, now - COMMIT_INTERVAL_S - 1, now)
            run.mark(f"worker exited {worker.exit_code()}")
            time.sleep(2)  # a supervisor's restart back-off
            worker = run.worker(ready=False)
        time.sleep(0.25)
    return exits


def p4_dlq_unavailable(env: Env) -> Outcome:
    """The DLQ topic is deleted mid-run while poison arrives, and recreated 15 s on."""
    outcome = Outcome(
        "P4", "DLQ unavailable: topic deleted mid-run, recreated 15 s later"
    )
    outcome.notes.append(
        "the worker exits (1) when a dead letter is not acknowledged within "
        "delivery_timeout_s, and (2) at start while the DLQ is missing, as README "
        "says; the scenario restarts it as a supervisor would. RELIABILITY I2 "
        "prefers pausing the partition and retrying without exiting."
    )
    rate, seconds = 200, 30
    poison = [Case("random bytes", b"\xc1" * 40)]
    # The worker's delivery timeout is 10 s here (30 s by default) to keep the run short.
    config = {"worker.processing": {"delivery_timeout_s": 10}}
    with Run(env, outcome, config=config, dlq_config=LOG_APPEND) as run:
        run.worker()
        good = good_traffic(run.codec)
        # Poison from seq 1200 (6 s in, after the deletion) every 50th message.
        plan = interleaved(good, poison * (rate * seconds // 50), 50)
        producer = run.produce(
            lambda seq: good(seq) if seq < 1200 else plan(seq),
            rate=rate,
            count=rate * seconds,
        )
        time.sleep(5)
        delete_topic(run.bootstrap, run.dlq)
        gone = time.monotonic()
        run.mark("DLQ topic deleted")
        exits = _supervise(run, lambda: time.monotonic() - gone > 15, 20)
        create_topic(run.bootstrap, run.dlq, run.partitions, config=dict(LOG_APPEND))
        run.fault_ends.append(run.mark("DLQ topic recreated"))

        ends: dict[int, int] = {}

        def drained() -> bool:
            if producer.sent < producer.count:
                return False
            if not ends:  # once: the input is complete
                ends.update(end_offsets(run.bootstrap, run.topic, run.partitions))
            return run.committed_to(ends)

        exits += _supervise(run, drained, 90)
        if not drained():
            outcome.fail("the worker did not recover: input not committed to its end")
        run.finish()
        dead = [r.seq for r in run.data.dlq] if run.data else []
        if len(dead) != len(set(dead)):
            outcome.fail(f"DLQ copies: {len(dead)} for {len(set(dead))} messages")
        outcome.figures.update(
            worker_exits=len(exits),
            exit_codes=",".join(str(c) for c in sorted(set(exits), key=str)) or "none",
        )
    return outcome


def _rejected_by_logic() -> bytes:
    """A medium order whose items have quantity 0: decodes, then the logic rejects it."""
    codec = get_codec("msgspec-msgpack", "medium")
    data = make_payloads("medium", 1, seed=5)[0]
    data["items"] = [{**item, "quantity": 0} for item in data["items"]]
    return codec.encode(codec.from_builtins(data))


def p5_retry_budget(env: Env) -> Outcome:
    """Logic errors: retried up to a budget, then dead-lettered with the attempts.

    RELIABILITY P5 and 2.6: a processing error is retried with backoff up to N
    attempts; then the message goes to the DLQ carrying `x-dlq-attempts`. The
    permanent half is injected here (a message the logic always rejects); the
    transient half (fails k < N times, then passes) needs a fault hook inside the
    worker's logic and cannot be injected from outside.
    """
    outcome = Outcome("P5", "Logic errors: retry budget, then DLQ with x-dlq-attempts")
    outcome.notes.append(
        "transient logic errors (k < budget) not injected: the worker has no "
        "fault hook in its logic"
    )
    rejected = [Case("quantity 0", _rejected_by_logic())] * 10
    with Run(env, outcome) as run:
        run.worker()
        plan = interleaved(good_traffic(run.codec), rejected, 20)
        run.produce(plan, rate=200, count=20 * (len(rejected) + 1))
        run.wait_drained(45)
        run.finish()
        problems = []
        for record in run.data.dlq if run.data else ():
            stage = record.header(DLQ_PREFIX + "stage")
            attempts = record.header(DLQ_PREFIX + "attempts")
            if stage != b"process":
                problems.append(f"x-seq {record.seq}: stage {stage!r}, not process")
            if attempts is None or not attempts.isdigit() or int(attempts) < 2:
                problems.append(f"x-seq {record.seq}: x-dlq-attempts={attempts!r}")
        outcome.figures["dlq_without_retries"] = len(problems)
        if problems:
            outcome.fail(
                f"logic errors dead-lettered without a retry budget: {len(problems)}: "
                + ", ".join(problems[:3])
            )
    return outcome
