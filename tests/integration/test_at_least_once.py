"""At-least-once on the real broker: no offset is committed before its writes are acked.

The worker decodes, handles and drops each message and writes results and dead letters
as it goes; it stores a partition's position only after the batch's writes are
acknowledged. So after a SIGKILL at any moment, every input message below a committed
offset must already be in the output or the dead-letter topic, and after restarts
every message is there: none skipped.
"""

from __future__ import annotations

import signal
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from codec import get_codec
from service.kafka.headers import SEQ
from tests.support import Record, WorkerProcess, produce

COUNT = 6000
PARTITIONS = 2
POISON_EVERY = 37
COMMIT_INTERVAL_MS = 1000
SESSION_TIMEOUT_MS = 6000
"""The broker's least (`group.min.session.timeout.ms`): a worker restarted after a
kill -9 joins a group that waits this long for the killed member (45 s by default)."""


def inputs() -> list[Record]:
    """Valid msgpack order events with a garbage payload every 37th; x-seq on all."""
    from loadgen.payloads import make_payloads

    codec = get_codec("msgspec-msgpack", "medium")
    pool = [codec.encode(codec.from_builtins(p)) for p in make_payloads("medium", 50)]
    return [
        {
            "key": str(seq).encode(),
            "value": b"\xc1poison" if seq % POISON_EVERY == 0 else pool[seq % 50],
            "headers": [(SEQ, str(seq).encode())],
            "partition": seq % PARTITIONS,
        }
        for seq in range(COUNT)
    ]


def seqs(messages: list[Any]) -> set[int]:
    return {int(dict(m.headers())[SEQ]) for m in messages}


def read_all(bootstrap: str, topic: str) -> list[Any]:
    """Every message of `topic`, read from offset 0 up to the high watermarks."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "enable.auto.commit": False,
        }
    )
    try:
        ends = {}
        for p in range(PARTITIONS):
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), 10)
            if high > 0:
                ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        out: list[Any] = []
        deadline = time.monotonic() + 60
        while ends:
            assert time.monotonic() < deadline, f"{topic}: not read to the end"
            for m in consumer.consume(1000, 0.1):  # waits its timeout at the end
                if m.error() is None:
                    out.append(m)
                    partition = m.partition() or 0
                    if (m.offset() or 0) + 1 >= ends.get(partition, 0):
                        ends.pop(partition, None)
        return out
    finally:
        consumer.close()


_COORDINATOR_MOVING = (
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
)
"""Answers of a broker whose group coordinator is not ready yet (a fresh broker
loading its offsets topic): asked again."""


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                found = consumer.committed(tps, timeout=10)
            except KafkaException as exc:
                moving = exc.args[0].code() in _COORDINATOR_MOVING
                if not moving or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
                continue
            return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


class TestAtLeastOnce:
    """Kill -9 mid-stream, twice: committed offsets never run ahead of acked writes."""

    def test_nothing_committed_before_its_writes_and_nothing_skipped(
        self, kafka_bootstrap: str, topic_factory: Any
    ) -> None:
        source = topic_factory(PARTITIONS)
        out, dlq = topic_factory(PARTITIONS), topic_factory(PARTITIONS)
        records = inputs()
        produce(kafka_bootstrap, source, records)
        # Input offset of each seq: one producer, in order, per partition.
        offset_of = {seq: seq // PARTITIONS for seq in range(COUNT)}
        args = ["--codec", "msgspec-msgpack", "--output-topic", out, "--dlq-topic", dlq]
        # ~1,000 msg/s, so each kill lands mid-stream with writes in flight.
        args += ["--batch-size", "100", "--logic", "aggregate", "--work-us", "1000"]
        # Auto-commit every second (librdkafka's default is 5 s): the same commits
        # of stored offsets, five times as often, so the waits below are short.
        args += ["-X", f"auto.commit.interval.ms={COMMIT_INTERVAL_MS}"]
        args += ["--session-timeout-ms", str(SESSION_TIMEOUT_MS)]
        group = f"alo-{source}"
        for committed_before_kill in (1000, 3000):
            with WorkerProcess(kafka_bootstrap, source, *args, group=group) as worker:
                deadline = time.monotonic() + 90
                # Wait for a commit past the mark, then kill at an arbitrary point
                # of a later batch.
                while sum(committed(kafka_bootstrap, group, source).values()) < (
                    committed_before_kill
                ):
                    assert time.monotonic() < deadline, "nothing was committed"
                    time.sleep(0.2)
                time.sleep(0.37)
                worker.stop(signal.SIGKILL)
            marks = committed(kafka_bootstrap, group, source)
            written = seqs(read_all(kafka_bootstrap, out))
            written |= seqs(read_all(kafka_bootstrap, dlq))
            below = {
                seq
                for seq in range(COUNT)
                if offset_of[seq] < marks.get(seq % PARTITIONS, -1)
            }
            assert below, f"nothing committed before the kill: {marks}"
            assert below - written == set(), "committed past unacknowledged writes"
        end = {p: COUNT // PARTITIONS for p in range(PARTITIONS)}
        with WorkerProcess(kafka_bootstrap, source, *args, group=group):
            deadline = time.monotonic() + 120
            while committed(kafka_bootstrap, group, source) != end:
                assert time.monotonic() < deadline, (
                    "the restarted worker did not finish"
                )
                time.sleep(0.2)
        good, dead = read_all(kafka_bootstrap, out), read_all(kafka_bootstrap, dlq)
        assert seqs(good) | seqs(dead) == set(range(COUNT)), "a message was skipped"
        assert seqs(dead) == {s for s in range(COUNT) if s % POISON_EVERY == 0}
