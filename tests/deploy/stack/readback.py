"""What the stack test reads from the host: topics, groups and the workers' counters.

Everything here goes through the ports the compose file publishes on 127.0.0.1:
Kafka's external listener and each worker's /metrics. The read-back itself is the A/B
runner's (`abrunner.lab.loss_check`): every acknowledged `x-seq` of the load
generator's run must be in the topic, and the group must have committed to its end.
"""

from __future__ import annotations

import time
import urllib.request
from dataclasses import dataclass
from typing import Final

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from abrunner.lab.loss_check import committed_to_end, missing_seqs
from tests.deploy.stack.checks import LoadgenSummary, SideReadBack

POISON: Final = b"\xff\xfe not a message of any codec"
"""The injected undecodable value: every side's worker must dead-letter it."""
_TIMEOUT_S: Final = 10.0


@dataclass(frozen=True)
class Side:
    """One lane of the stack: its services, topic, group and published worker port."""

    name: str
    """A or B."""
    topic: str
    group: str
    worker: str
    loadgen: str
    worker_port: int

    @property
    def dlq(self) -> str:
        return f"{self.topic}.dlq"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.worker_port}/metrics"


def _client(bootstrap: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "codec-ab-stack-test-reader",
            "enable.auto.commit": False,
        }
    )


def log_sizes(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (low, high) watermark of every partition of `topic`."""
    consumer = _client(bootstrap)
    try:
        meta = consumer.list_topics(topic, timeout=_TIMEOUT_S).topics[topic]
        return {
            p: consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=_TIMEOUT_S
            )
            for p in meta.partitions
        }
    finally:
        consumer.close()


def records(bootstrap: str, topic: str) -> int:
    """How many records `topic` holds."""
    return sum(high - low for low, high in log_sizes(bootstrap, topic).values())


def worker_counters(url: str) -> dict[str, float]:
    """The worker's messages handled (every outcome) and dead letters, from /metrics."""
    with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as response:  # noqa: S310 (127.0.0.1)
        text = response.read().decode()
    totals = {"handled": 0.0, "dead_letters": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "worker_messages_total":
                totals["handled"] += sample.value
            elif sample.name == "worker_dead_letters_total":
                totals["dead_letters"] += sample.value
    return totals


def inject_poison(bootstrap: str, topic: str) -> None:
    """One undecodable message (no `x-seq`: it is not the load generator's)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(topic, POISON, headers={"x-stack-test": b"poison"})
    if producer.flush(30) != 0:
        raise KafkaException(f"{topic}: the poison message was not delivered")


def drained(bootstrap: str, side: Side) -> bool:
    """Whether the side's group has committed every partition to its end."""
    partitions = len(log_sizes(bootstrap, side.topic))
    return committed_to_end(bootstrap, side.group, side.topic, partitions)


def wait_drained(bootstrap: str, sides: list[Side], timeout: float) -> float:
    """Wait until every side's group committed to the log end; the seconds it took.

    Raises:
        TimeoutError: a side is still behind after `timeout` s.
    """
    start = time.monotonic()
    pending = list(sides)
    while pending:
        pending = [s for s in pending if not drained(bootstrap, s)]
        if pending and time.monotonic() - start > timeout:
            names = ", ".join(s.name for s in pending)
            raise TimeoutError(f"side {names} not drained after {timeout:.0f} s")
        if pending:
            time.sleep(2)
    return time.monotonic() - start


def read_back(
    bootstrap: str,
    side: Side,
    summary: LoadgenSummary | None,
    *,
    poison: int,
    restarts: int,
) -> SideReadBack:
    """Everything `checks.judge_side` needs, read from the running stack."""
    counters = worker_counters(side.metrics_url)
    missing = 0
    if summary is not None:
        missing = missing_seqs(bootstrap, side.topic, summary.run_id, summary.acked)
    return SideReadBack(
        side=side.name,
        summary=summary,
        missing=missing,
        records=records(bootstrap, side.topic),
        handled=round(counters["handled"]),
        committed_to_end=drained(bootstrap, side),
        dead_letters=records(bootstrap, side.dlq),
        poison=poison,
        worker_restarts=restarts,
    )


def skip_ahead(bootstrap: str, side: Side, count: int) -> int:
    """Commit the side's group `count` records past each partition's start (the
    `lose` break: the worker, started afterwards, never sees those records).

    Returns:
        How many records the commits skip.
    """
    sizes = log_sizes(bootstrap, side.topic)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": side.group,
            "enable.auto.commit": False,
        }
    )
    try:
        offsets = [
            TopicPartition(side.topic, p, min(low + count, high))
            for p, (low, high) in sizes.items()
        ]
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()
    return sum(tp.offset - sizes[tp.partition][0] for tp in offsets)
