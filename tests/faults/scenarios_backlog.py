"""S3: a new group meets a backlog; the lag gauge shows it from the assignment on.

The worker sets `worker_consumer_lag_messages{topic,partition}` when a partition
is assigned (high watermark minus the committed offset, or minus the log start
where nothing is committed), not only once it has fetched from it. The check is
made meaningful by a slow first worker (`--batch-size 1 --work-us 5000`, about
200 msg/s): one fetch brings each partition's whole backlog, which the worker
then handles a partition at a time, so the later partitions wait seconds for
their first message while their gauge must already read their backlog. Two
partitions start from an offset committed before the worker starts (past 100
records it must never read), two from nothing (`auto.offset.reset=earliest`).
A second worker, not slowed, then drains the rest.
"""

from __future__ import annotations

import time
from typing import Final

from confluent_kafka import Consumer, TopicPartition

from tests.faults.harness import Env, FaultWorker, Outcome
from tests.faults.observe import end_offsets, now_ms, worker_events
from tests.faults.producer import quiet
from tests.faults.run import Run
from tests.support import produce

PARTITIONS: Final = 4
BACKLOG: Final = 500
"""Messages per partition, each partition's within one fetch (~1 KB each)."""
SKIPPED: Final = 100
"""Records before the committed offset of partitions 0 and 1."""
SLOW: Final = ("--batch-size", "1", "--work-us", "5000")
WITHIN_MS: Final = 2000
"""How soon after the assignment each partition's gauge must show its backlog."""
WATCH_S: Final = 3.0


def _commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit `offsets` for `group` as a client outside it (no subscription)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            **quiet(),
        }
    )
    try:
        tps = [TopicPartition(topic, p, o) for p, o in offsets.items()]
        consumer.commit(offsets=tps, asynchronous=False)
    finally:
        consumer.close()


def _lags(worker: FaultWorker) -> dict[int, int] | None:
    scraped = worker.scrape()
    if scraped is None:
        return None
    return {
        int(s.labels["partition"]): int(s.value)
        for s in scraped.samples
        if s.name == "worker_consumer_lag_messages"
    }


def _watch(worker: FaultWorker) -> list[tuple[int, dict[int, int]]]:
    """The worker's lag gauges every 0.2 s until `WATCH_S` after it is ready."""
    samples: list[tuple[int, dict[int, int]]] = []
    ready_at = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and worker.alive():
        lags = _lags(worker)
        if lags is not None:
            samples.append((now_ms(), lags))
        if ready_at is None and (worker.readyz() or (0, ""))[0] == 200:
            ready_at = time.monotonic()
        if ready_at is not None and time.monotonic() - ready_at > WATCH_S:
            break
        time.sleep(0.2)
    return samples


def s3_backlog(env: Env) -> Outcome:
    """A new group meets a backlog: lag shown from the assignment, backlog handled."""
    outcome = Outcome(
        "S3",
        "New group, existing backlog: lag gauge set at assignment; backlog drained",
    )
    with Run(env, outcome, partitions=PARTITIONS) as run:
        old = (
            {"value": b"committed past", "partition": p}
            for p in (0, 1)
            for _ in range(SKIPPED)
        )
        produce(run.bootstrap, run.topic, old)
        _commit(run.bootstrap, run.group, run.topic, {0: SKIPPED, 1: SKIPPED})
        run.produce(rate=5000, count=PARTITIONS * BACKLOG).wait(60)
        ends = end_offsets(run.bootstrap, run.topic, PARTITIONS)
        backlog = {p: ends[p] - (SKIPPED if p < 2 else 0) for p in range(PARTITIONS)}
        slow = run.worker(*SLOW, ready=False)
        samples = _watch(slow)
        run.stop(slow)
        run.worker()
        run.fault_ends.append(run.mark("drain worker started"))
        run.wait_drained(60)
        run.finish()
        _judge_lag(outcome, run, slow, samples, backlog)
    return outcome


def _judge_lag(
    outcome: Outcome,
    run: Run,
    slow: FaultWorker,
    samples: list[tuple[int, dict[int, int]]],
    backlog: dict[int, int],
) -> None:
    """Each partition's gauge above 0 (and within its backlog) by `WITHIN_MS`."""
    assigned = [e.at_ms for e in worker_events(slow.log_path) if e.kind == "assigned"]
    if not assigned:
        outcome.fail("the slow worker logged no assignment")
        return
    first_out: dict[int, int] = {}
    if run.data is not None:
        for record in run.data.output:
            sent = run.data.acked.get(record.seq) if record.seq is not None else None
            if sent is not None:
                p = sent.partition
                first_out[p] = min(
                    first_out.get(p, record.timestamp_ms), record.timestamp_ms
                )
    shown, before = {}, 0
    for p in range(PARTITIONS):
        seen = next(((t, lags[p]) for t, lags in samples if lags.get(p, 0) > 0), None)
        if seen is None:
            outcome.fail(
                f"p{p}: lag gauge 0 or absent for {WATCH_S:.0f} s after the "
                f"assignment (backlog {backlog[p]})"
            )
            continue
        at, lag = seen
        shown[p] = f"{lag}@{(at - assigned[0]) / 1000:.1f}s"
        if at - assigned[0] > WITHIN_MS:
            outcome.fail(
                f"p{p}: lag first shown {(at - assigned[0]) / 1000:.1f} s after "
                f"the assignment (over {WITHIN_MS / 1000:.0f} s)"
            )
        if lag > backlog[p]:
            outcome.fail(
                f"p{p}: lag {lag} over the backlog {backlog[p]} (committed offset "
                "not used?)"
            )
        before += at < first_out.get(p, at + 1)
    outcome.figures.update(
        backlog=",".join(f"p{p}={n}" for p, n in sorted(backlog.items())),
        lag_first_shown=",".join(f"p{p}={v}" for p, v in sorted(shown.items())),
        shown_before_first_handled=before,
    )
    if shown and not before:
        outcome.fail(
            "every partition was handled before its lag was sampled: the check "
            "proves nothing (is the slow worker slow?)"
        )
