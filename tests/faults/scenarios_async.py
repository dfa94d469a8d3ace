"""A: a team's async handler under faults, under both processing guarantees.

The workers run `tests.fixtures.handlers.async_orders` handlers (`--ordering key`,
keys are the producer's seqs: every message its own lane, up to `--max-in-flight`
at once), with the output and DLQ topics of the run. Each input order carries its
own `event_id` (`evt-<seq>`), so what a handler wrote to its SQLite store can be
matched to the acknowledged inputs. At-least-once runs are judged by the checker
(0 missing, duplicates within X: per kill what the worker finished in the last
commit interval plus a batch, per revoke what was in flight, `MAX_IN_FLIGHT`);
exactly-once runs by the strict read_committed verdict of E1 (0 missing, 0
duplicates).

- A1: 100 messages in flight (each awaits 100 ms at 1,000 msg/s), SIGKILL x2; the
  store holds every acknowledged input at least once.
- A2: a second worker joins while the handlers await, then leaves (SIGTERM).
- A3: the handler raises on gift orders (1 in 10): exactly those dead-lettered.
- A4: a slow handler (`--ordering partition`, 10 ms a message: 400 msg/s on four
  partitions) under 1,000 msg/s trips the bound: partitions paused and resumed.
"""

from __future__ import annotations

import random
import signal
import time
import uuid
from collections.abc import Callable
from typing import Final

from codec import CodecName, get_codec
from loadgen.payloads import make_payloads
from tests.faults.harness import WAIT_S, Env, FaultWorker, Outcome, wait_until
from tests.faults.observe import worker_lines
from tests.faults.producer import Payload, Plan
from tests.faults.run import Run
from tests.faults.scenarios_exactly_once import _verdict
from tests.fixtures.handlers.async_orders import stored_ids

HANDLERS: Final = "tests.fixtures.handlers.async_orders"
MAX_IN_FLIGHT: Final = 200
"""Above A1's 100 in flight (1,000 msg/s awaiting 0.1 s each): at the bound the
worker would take no more, and A1 would measure the bound, not the kills."""
GUARANTEES: Final = ("at-least-once", "exactly-once")
Scenario = Callable[[Env], Outcome]


def unique_orders(codec: CodecName, gifts_every: int = 0) -> Plan:
    """Medium orders with `event_id` `evt-<seq>`; every `gifts_every`-th a gift
    (poison: the handler refuses it), the others not."""
    c = get_codec(codec, "medium")
    pool = make_payloads("medium", 64)

    def plan(seq: int) -> Payload:
        gift = bool(gifts_every) and seq % gifts_every == 0
        data = {**pool[seq % len(pool)], "event_id": f"evt-{seq:012d}", "gift": gift}
        return Payload(c.encode(c.from_builtins(data)), poison=gift)

    return plan


def _args(guarantee: str, handler: str, *extra: str) -> tuple[str, ...]:
    return (
        *("--logic", f"{HANDLERS}:{handler}", "--ordering", "key"),
        *("--max-in-flight", str(MAX_IN_FLIGHT), "--max-attempts", "1"),
        *("--processing-guarantee", guarantee, *extra),
    )


def _judge(run: Run, guarantee: str, *, refused: bool = False) -> None:
    """Drain, then the at-least-once checker or exactly-once's strict verdict."""
    if guarantee == "exactly-once":
        _verdict(run, refused=refused)
        return
    revokes = sum(
        1
        for w in run.workers
        for line in worker_lines(w.log_path)
        if line.get("event") in ("partitions_revoked", "partitions_lost")
    )
    run.dup_bound += revokes * MAX_IN_FLIGHT
    run.outcome.figures["revokes"] = revokes
    run.wait_drained(120)
    run.finish()


def _resume_after_kill(
    run: Run, worker: FaultWorker, env: dict[str, str]
) -> FaultWorker:
    run.kill(worker)
    successor = run.worker(env=env, ready=False)
    wait_until(lambda: successor.processed() > 0, WAIT_S, every=0.1, what="resume")
    run.fault_ends.append(run.mark("processing again"))
    return successor


def a1_kill(guarantee: str) -> Scenario:
    def scenario(env: Env) -> Outcome:
        outcome = Outcome(
            f"A1 {guarantee}",
            f"Async handler, 100 in flight (bound {MAX_IN_FLIGHT}): SIGKILL "
            f"mid-flight, restart (x2), {guarantee}; its SQLite store holds every input",
        )
        db = env.root / f"a1-{uuid.uuid4().hex[:6]}.sqlite"
        store = {"ASYNC_STORE_DB": str(db), "ASYNC_AWAIT_S": "0.1"}
        rng = random.Random(42)
        args = _args(guarantee, "store")
        with Run(env, outcome, partitions=4, worker_args=args) as run:
            worker = run.worker(env=store)
            producer = run.produce(unique_orders(run.codec), rate=1000, count=25_000)
            for _ in range(2):
                worker.wait_for(3000, timeout=WAIT_S)
                time.sleep(rng.uniform(0.2, 1.5))
                worker = _resume_after_kill(run, worker, store)
            _judge(run, guarantee)
            ids = stored_ids(str(db))
            missing = [s for s in producer.acked if f"evt-{s:012d}" not in ids]
            outcome.figures["store_missing"] = len(missing)
            if missing:
                outcome.fail(f"{len(missing)} acked input(s) not in the store")
        return outcome

    scenario.__doc__ = f"A1 ({guarantee}): SIGKILL x2 with 100 in flight; the store."
    return scenario


def a2_rebalance(guarantee: str) -> Scenario:
    def scenario(env: Env) -> Outcome:
        outcome = Outcome(
            f"A2 {guarantee}",
            f"Async handler: a second worker joins while handlers await, then "
            f"leaves, {guarantee}",
        )
        slow = {"ASYNC_AWAIT_S": "0.02"}
        with Run(
            env, outcome, partitions=4, worker_args=_args(guarantee, "store")
        ) as run:
            first = run.worker(env=slow)
            producer = run.produce(unique_orders(run.codec), rate=1000, count=240_000)
            first.wait_for(3000, timeout=WAIT_S)
            second = run.worker("--worker-index", "1", env=slow)
            run.fault_ends.append(run.mark("second worker joined"))
            second.wait_for(1000, timeout=WAIT_S)
            time.sleep(3)
            run.stop(second, signal.SIGTERM)
            run.fault_ends.append(run.mark("second worker left"))
            producer.end_after(8)
            _judge(run, guarantee)
        return outcome

    scenario.__doc__ = f"A2 ({guarantee}): a rebalance while handlers await."
    return scenario


def a3_raises(guarantee: str) -> Scenario:
    def scenario(env: Env) -> Outcome:
        outcome = Outcome(
            f"A3 {guarantee}",
            f"Async handler raising on gift orders (1 in 10), {guarantee}",
        )
        args = _args(guarantee, "refuse_gifts_slowly")
        with Run(env, outcome, partitions=4, worker_args=args) as run:
            run.worker()
            run.produce(unique_orders(run.codec, gifts_every=10), rate=1000, count=8000)
            _judge(run, guarantee, refused=True)
        return outcome

    scenario.__doc__ = f"A3 ({guarantee}): a handler that raises on some messages."
    return scenario


def a4_slow(guarantee: str) -> Scenario:
    def scenario(env: Env) -> Outcome:
        outcome = Outcome(
            f"A4 {guarantee}",
            f"Async handler slower than its input: the bound pauses the partitions, "
            f"{guarantee}",
        )
        slow = {"ASYNC_AWAIT_S": "0.01"}
        args = (*_args(guarantee, "store"), "--ordering", "partition")
        with Run(env, outcome, partitions=4, worker_args=args) as run:
            worker = run.worker(env=slow)
            run.produce(unique_orders(run.codec), rate=1000, count=6000)
            wait_until(lambda: _pauses(worker) > 0, 60, what="a pause")
            scraped = worker.scrape()
            _judge(run, guarantee)
            pauses = _pauses_of(scraped)
            outcome.figures["pauses"] = pauses
            if pauses < 1:
                outcome.fail("the bound never paused the partitions")
        return outcome

    scenario.__doc__ = f"A4 ({guarantee}): a slow handler trips the pause."
    return scenario


def _pauses(worker: FaultWorker) -> int:
    return _pauses_of(worker.scrape())


def _pauses_of(scraped: object) -> int:
    total = getattr(scraped, "total", None)
    return 0 if total is None else int(total("worker_async_pauses_total"))


SCENARIOS: Final = tuple(
    (f"{make.__name__.split('_')[0].upper()} {g}", make(g))
    for make in (a1_kill, a2_rebalance, a3_raises, a4_slow)
    for g in GUARANTEES
)
"""(id, scenario) for each scenario under each guarantee (`tests.faults.catalog`)."""
