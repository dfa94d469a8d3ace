"""E1: exactly-once under faults (`--processing-guarantee exactly-once`).

Each scenario runs the worker with its results going to the output topic and its
dead letters to the DLQ, both in one transaction per batch with the consumed
offsets, breaks something mid-stream, drains, and reads both topics back with
`isolation.level=read_committed`. The verdict is strict, unlike the at-least-once
scenarios' duplicate bound: every acknowledged input `x-seq` appears exactly once
in the output or the DLQ (0 duplicates, 0 missing, never in both), and a DLQ entry
is exactly a message the handler refuses. `uncommitted_records` counts what a
read_uncommitted reader sees besides: the aborted writes a transaction hid.
"""

from __future__ import annotations

import random
import signal
import time
import uuid
from collections import Counter
from functools import partial
from typing import Final

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from codec import get_codec
from tests.faults.harness import (
    WAIT_S,
    Env,
    FaultBroker,
    FaultWorker,
    Outcome,
    wait_until,
)
from tests.faults.model import Written
from tests.faults.observe import READ_WAIT_S, _written, tracebacks
from tests.faults.producer import quiet
from tests.faults.run import Run

RATE: Final = 1000
EOS: Final = ("--processing-guarantee", "exactly-once")
REFUSE_GIFTS: Final = (
    *("--logic", "tests.fixtures.handlers.basics:refuse_gifts"),
    *("--max-attempts", "1"),
)
"""A team's handler that raises on gift orders (about 1 in 10 messages)."""


def e1_kill_9(env: Env) -> Outcome:
    """SIGKILL the exactly-once worker mid-transaction twice; restart it each time."""
    outcome = Outcome("E1 kill", "Exactly-once: SIGKILL mid-transaction, restart (x2)")
    rng = random.Random(11)
    with Run(env, outcome, worker_args=EOS) as run:
        worker = run.worker()
        run.produce(rate=RATE, count=RATE * 25)
        for _ in range(2):
            worker.wait_for(2 * RATE, timeout=WAIT_S)
            time.sleep(rng.uniform(0.1, 1.5))  # a transaction is open most of the time
            worker = _kill_and_restart(run, worker)
        _verdict(run, refused=False)
    return outcome


def e1_rebalance(env: Env) -> Outcome:
    """A second exactly-once worker joins mid-stream, then leaves (SIGTERM)."""
    outcome = Outcome(
        "E1 rebalance", "Exactly-once: a second worker joins, then leaves"
    )
    with Run(env, outcome, partitions=4, worker_args=EOS) as run:
        first = run.worker()
        # A long stream, ended once the second worker has left (as in D5).
        producer = run.produce(rate=RATE, count=RATE * 240)
        first.wait_for(3 * RATE, timeout=WAIT_S)
        # Its own transactional id: the same one would fence the first worker.
        second = run.worker("--worker-index", "1")
        run.mark("second worker joined")
        second.wait_for(RATE, timeout=WAIT_S)
        run.stop(second)
        run.mark("second worker left")
        producer.end_after(8)
        _verdict(run, refused=False)
    return outcome


def e1_handler_raises(env: Env) -> Outcome:
    """A handler that raises on some messages, and a SIGKILL in the middle."""
    outcome = Outcome(
        "E1 raises", "Exactly-once: a handler raising on gift orders, one SIGKILL"
    )
    with Run(env, outcome, worker_args=(*EOS, *REFUSE_GIFTS)) as run:
        worker = run.worker()
        run.produce(rate=RATE, count=RATE * 20)
        worker.wait_for(3 * RATE, timeout=WAIT_S)
        worker = _kill_and_restart(run, worker)
        _verdict(run, refused=True)
    return outcome


def e1_broker_restart(env: Env) -> Outcome:
    """The broker stopped (SIGTERM) mid-stream, down 5 s, restarted (x2).

    On its own broker. A transaction is open most of the time, so the stop lands
    inside one: its calls fail or hang in librdkafka (a coordinator request that
    never times out, librdkafka #5456); the worker must abort or replace its
    producer, rewind to the committed offsets and carry on, never exit.
    """
    outcome = Outcome(
        "E1 broker", "Exactly-once: broker SIGTERM, down 5 s, restart (x2)"
    )
    with (
        FaultBroker(env.root / "broker-e1") as broker,
        Run(env, outcome, bootstrap=broker.bootstrap, worker_args=EOS) as run,
    ):
        worker = run.worker()
        run.produce(rate=RATE, count=RATE * 40)
        worker.wait_for(3 * RATE, timeout=90)
        for _ in range(2):
            done = worker.processed()
            run.mark("broker SIGTERM")
            broker.stop(signal.SIGTERM)
            time.sleep(5)
            broker.start()
            run.fault_ends.append(run.mark("broker answers again"))
            try:
                wait_until(
                    partial(_resumed, worker, done + RATE),
                    120,
                    every=0.5,
                    what="processing after the restart",
                )
            except TimeoutError:
                outcome.fail(
                    f"stuck: {worker.processed() - done} message(s) processed in "
                    "120 s after the broker restart"
                )
                return outcome
        if not worker.alive():
            outcome.fail(f"the worker exited ({worker.exit_code()}) over the fault")
        _verdict(run, refused=False)
    return outcome


def _resumed(worker: FaultWorker, past: int) -> bool:
    return worker.processed() > past or not worker.alive()


def _kill_and_restart(run: Run, worker: FaultWorker) -> FaultWorker:
    run.kill(worker)
    successor = run.worker(ready=False)
    wait_until(lambda: successor.processed() > 0, WAIT_S, every=0.1, what="resume")
    run.fault_ends.append(run.mark("processing again"))
    return successor


def _verdict(run: Run, *, refused: bool) -> None:
    """Drain, stop, read both topics read_committed; fail on any duplicate or miss."""
    outcome = run.outcome
    run.wait_drained(180)
    for n, worker in enumerate(run.workers, 1):
        if worker.alive():
            run.stop(worker)
        for trace in tracebacks(worker.log_path):
            outcome.fail(f"worker {n} printed a traceback: {trace[:600]}")
    run.monitor.stop()
    assert run.producer is not None
    acked = set(run.producer.acked)
    output = read_all(run.bootstrap, run.output)
    dlq = read_all(run.bootstrap, run.dlq)
    out_n = Counter(w.seq for w in output)
    dlq_n = Counter(w.seq for w in dlq)
    duplicates = sum(n - 1 for n in (*out_n.values(), *dlq_n.values()) if n > 1)
    both = set(out_n) & set(dlq_n)
    missing = acked - set(out_n) - set(dlq_n)
    every = len(read_all(run.bootstrap, run.output, committed=False)) + len(
        read_all(run.bootstrap, run.dlq, committed=False)
    )
    outcome.figures.update(
        acked=len(acked),
        output=len(output),
        dlq=len(dlq),
        duplicates=duplicates + len(both),
        missing=len(missing),
        uncommitted_records=every - len(output) - len(dlq),
        workers=len(run.workers),
    )
    if duplicates or both:
        outcome.fail(
            f"{duplicates} duplicate(s) and {len(both)} in both topics, read_committed"
        )
    if missing:
        outcome.fail(f"{len(missing)} input(s) in neither topic, e.g. {min(missing)}")
    gifts = {w.seq for w in dlq if _gift(run, w)}
    if refused and (not dlq or gifts != set(dlq_n)):
        outcome.fail("the DLQ is not exactly the messages the handler refuses")
    if not refused and dlq:
        outcome.fail(f"{len(dlq)} dead letter(s) where the handler refuses none")
    if refused and any(_gift(run, w) for w in output):
        outcome.fail("a message the handler refuses reached the output")


def _gift(run: Run, written: Written) -> bool:
    codec = get_codec(run.codec, "medium")
    value = written.value
    return value is not None and bool(codec.decode(value).gift)


def read_all(
    bootstrap: str, topic: str, *, committed: bool = True, timeout: float = 90
) -> list[Written]:
    """Every committed record of `topic` (`isolation.level=read_committed`; with
    `committed=False` aborted ones too), with values. Read until each partition's
    position reaches its high watermark: with transactions the last offsets are
    commit markers, never delivered (`read_to_end`'s last-offset test would wait)."""
    consumer = _reader(bootstrap, committed)
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        ends: dict[int, int] = {}
        for p in meta.partitions:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=10
            )
            if high > low:
                ends[p] = high
        tps = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends]
        consumer.assign(tps)
        out: list[Written] = []
        deadline = time.monotonic() + timeout
        while ends:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: not read to the end in {timeout:.0f} s")
            out += [
                _written(m, True)
                for m in consumer.consume(1000, READ_WAIT_S)
                if m.error() is None
            ]
            for tp in consumer.position([TopicPartition(topic, p) for p in ends]):
                if tp.offset >= ends.get(tp.partition, 0):
                    ends.pop(tp.partition, None)
        return out
    finally:
        consumer.close()


def _reader(bootstrap: str, committed: bool) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"faults-eos-reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            **quiet(),
        }
    )
