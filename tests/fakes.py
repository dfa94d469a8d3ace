"""Fakes of confluent-kafka objects, so the whole worker runs in unit tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from confluent_kafka import OFFSET_INVALID, KafkaError, KafkaException, TopicPartition


@dataclass
class FakeMessage:
    """A consumed record (implements `service.kafka.protocols.KafkaMessage`)."""

    _value: bytes | None
    _partition: int = 0
    _offset: int = 0
    _key: bytes | None = None
    _headers: list[tuple[str, bytes | None]] | None = None
    _topic: str = "in"
    _error: KafkaError | None = None
    _timestamp: int = 1_700_000_000_000

    def error(self) -> KafkaError | None:
        return self._error

    def topic(self) -> str | None:
        return self._topic

    def partition(self) -> int | None:
        return self._partition

    def offset(self) -> int | None:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        return (1, self._timestamp)


@dataclass
class FakeTopicPartition:
    """A `TopicPartition` whose `error` can be set (confluent's is read-only)."""

    topic: str
    partition: int
    offset: int = OFFSET_INVALID
    error: KafkaError | None = None


@dataclass
class FakeConsumer:
    """Returns scripted batches from `consume()` and records what it is asked.

    It is its own factory: pass the instance as a worker's `consumer_factory` and it
    keeps the librdkafka settings it is built with. As librdkafka does inside its
    poll, the first `consume()` after `subscribe()` hands `to_assign` to the
    `on_assign` callback. `assignment()` is every partition assigned or consumed
    from, `position()` the next offset after those consumed (as librdkafka's), `get_watermark_offsets()` reads `watermarks`, and a `consume()`
    that finds the script exhausted calls `on_drained` (e.g. a worker's `stop`).
    """

    batches: list[list[FakeMessage]] = field(default_factory=list)
    stored: list[list[tuple[str, int, int]]] = field(default_factory=list)
    events: list[str] | None = None
    to_assign: list[int] = field(default_factory=list)
    topic: str = "in"
    positions: dict[int, int] = field(default_factory=dict)
    watermarks: dict[int, tuple[int, int]] = field(default_factory=dict)
    on_drained: Callable[[], None] | None = None
    config: dict[str, Any] | None = None
    subscribed: list[str] = field(default_factory=list)
    rebalance: dict[str, Any] = field(default_factory=dict)
    closed: bool = False
    committed_offsets: dict[int, int] = field(default_factory=dict)
    paused: set[int] = field(default_factory=set)
    seeks: list[tuple[int, int]] = field(default_factory=list)
    partition_count: int = 0
    unfetched: set[int] = field(default_factory=set)
    """Partitions without a fetch response: no cached watermarks."""
    watermark_queries: list[int] = field(default_factory=list)
    """Partitions whose watermarks were asked of the broker (not cached)."""

    def __call__(self, config: dict[str, Any]) -> FakeConsumer:
        self.config = config
        return self

    def _event(self, name: str) -> None:
        if self.events is not None:
            self.events.append(name)

    def subscribe(
        self,
        topics: list[str],
        on_assign: Any = None,
        on_revoke: Any = None,
        on_lost: Any = None,
    ) -> None:
        self.subscribed = list(topics)
        self.rebalance = {"assign": on_assign, "revoke": on_revoke, "lost": on_lost}
        self._event("subscribe")

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        on_assign = self.rebalance.get("assign")
        if self.to_assign and on_assign is not None:
            self.topic = self.subscribed[0]
            on_assign(self, [TopicPartition(self.topic, p) for p in self.to_assign])
            self.positions.update(dict.fromkeys(self.to_assign, OFFSET_INVALID))
            self.to_assign = []
        if not self.batches:
            if self.on_drained is not None:
                self.on_drained()
            return []
        batch = self.batches.pop(0)
        for m in batch:
            if m.error() is None:
                self.topic = m._topic
                self.positions[m._partition] = m._offset + 1
        return batch

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(self.topic, p) for p in sorted(self.positions)]

    def store_offsets(
        self, message: Any = None, offsets: list[Any] | None = None
    ) -> None:
        assert offsets is not None
        self.stored.append([(tp.topic, tp.partition, tp.offset) for tp in offsets])
        self._event("store")

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [
            TopicPartition(
                tp.topic, tp.partition, self.positions.get(tp.partition, OFFSET_INVALID)
            )
            for tp in partitions
        ]

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = -1, cached: bool = False
    ) -> tuple[int, int]:
        invalid = (OFFSET_INVALID, OFFSET_INVALID)
        if cached and partition.partition in self.unfetched:
            return invalid
        if not cached:
            self.watermark_queries.append(partition.partition)
        return self.watermarks.get(partition.partition, invalid)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        """Metadata: `topic`'s partitions are those assigned, with watermarks or
        `partition_count` (when set)."""
        from types import SimpleNamespace

        count = self.partition_count or (
            1 + max([*self.to_assign, *self.watermarks, -1])
        )
        partitions = {p: SimpleNamespace(id=p) for p in range(count)}
        return SimpleNamespace(
            topics={self.topic: SimpleNamespace(partitions=partitions)}
        )

    def committed(
        self, partitions: list[TopicPartition], timeout: float = -1
    ) -> list[TopicPartition]:
        return [
            TopicPartition(
                tp.topic,
                tp.partition,
                self.committed_offsets.get(tp.partition, OFFSET_INVALID),
            )
            for tp in partitions
        ]

    def pause(self, partitions: list[TopicPartition]) -> None:
        self.paused.update(tp.partition for tp in partitions)
        self._event("pause")

    def resume(self, partitions: list[TopicPartition]) -> None:
        self.paused.difference_update(tp.partition for tp in partitions)
        self._event("resume")

    def seek(self, partition: TopicPartition) -> None:
        self.seeks.append((partition.partition, partition.offset))
        self.positions[partition.partition] = partition.offset

    def close(self) -> None:
        self.closed = True
        self._event("close")


@dataclass
class FakeProducer:
    """Acknowledges (or fails) every record on `flush()`/`poll()`.

    Like `FakeConsumer`, it is its own factory and keeps its librdkafka settings.
    """

    fail_with: Callable[[dict[str, Any]], KafkaError | None] = lambda record: None
    refuse_with: Callable[[dict[str, Any]], KafkaError | None] = lambda record: None
    """An error `produce()` raises at once (as librdkafka does for a record over
    `message.max.bytes`), before queueing."""
    produced: list[dict[str, Any]] = field(default_factory=list)
    acked: list[dict[str, Any]] = field(default_factory=list)
    events: list[str] | None = None
    config: dict[str, Any] | None = None
    _queue: list[tuple[dict[str, Any], Any]] = field(default_factory=list)

    def __call__(self, config: dict[str, Any]) -> FakeProducer:
        self.config = config
        return self

    def produce(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int = -1,
        callback: Any = None,
        on_delivery: Any = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        record = {
            "topic": topic,
            "value": value,
            "key": key,
            "headers": headers,
            "timestamp": timestamp,
        }
        refused = self.refuse_with(record)
        if refused is not None:
            raise KafkaException(refused)
        self.produced.append(record)
        self._queue.append((record, on_delivery))

    def poll(self, timeout: float = -1) -> int:
        return self.flush(timeout)

    def flush(self, timeout: float = -1) -> int:
        queue, self._queue = self._queue, []
        for record, on_delivery in queue:
            err = self.fail_with(record)
            if err is None:
                self.acked.append(record)
                if self.events is not None:
                    self.events.append(f"ack:{record['topic']}")
            if on_delivery is not None:
                on_delivery(err, None)
        return 0


@dataclass
class LogConsumer(FakeConsumer):
    """Each partition a log (`logs`), read as librdkafka's fetch reads it.

    `consume()` returns, from each assigned partition that is not paused, its
    messages from its position on (`seek` moves it; a partition starts at 0), at
    most `num_messages` in all; `script` is called first (a test's events: a
    revoke inside `consume()`, a registry coming back); with nothing to return it
    waits a little of `timeout` and calls `on_drained`.
    """

    logs: dict[int, list[FakeMessage]] = field(default_factory=dict)
    script: Callable[[], None] | None = None
    assigned: set[int] = field(default_factory=set)
    rounds: int = 0

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        on_assign = self.rebalance.get("assign")
        if self.to_assign and on_assign is not None:
            self.topic = self.subscribed[0]
            on_assign(self, [TopicPartition(self.topic, p) for p in self.to_assign])
            self.assigned.update(self.to_assign)
            self.to_assign = []
        self.rounds += 1
        if self.script is not None:
            self.script()
        out: list[FakeMessage] = []
        for p in sorted(self.assigned - self.paused):
            start = max(0, self.positions.get(p, 0))
            for m in self.logs.get(p, ()):
                if m._offset >= start and len(out) < num_messages:
                    out.append(m)
                    self.positions[p] = m._offset + 1
        if not out:
            if timeout > 0:
                time.sleep(min(timeout, 0.002))
            if self.on_drained is not None:
                self.on_drained()
        return out

    def at_end(self) -> bool:
        """Every assigned partition's log read to its end."""
        return all(
            self.positions.get(p, 0) > max((m._offset for m in log), default=-1)
            for p, log in self.logs.items()
            if p in self.assigned
        )

    def take_away(self, *partitions: int, lost: bool = False) -> None:
        """The group takes `partitions` away (as inside `consume()`)."""
        callback = self.rebalance["lost" if lost else "revoke"]
        callback(self, [TopicPartition(self.topic, p) for p in partitions])
        self.assigned.difference_update(partitions)


class WaitingConsumer:
    """A topic's messages, served by `consume` as librdkafka does: a call that
    returns fewer than it was asked for has waited its whole timeout (`waited`)."""

    def __init__(self, messages: list[FakeMessage]) -> None:
        self._left = list(messages)
        self._ends = {m.partition(): (m.offset() or 0) + 1 for m in messages}
        self._read: dict[int, int] = {}
        self.waited = 0.0

    def __call__(self, _config: dict[str, Any]) -> WaitingConsumer:
        return self

    def list_topics(self, topic: str, timeout: float) -> Any:
        meta = SimpleNamespace(partitions=dict.fromkeys(self._ends))
        return SimpleNamespace(topics={topic: meta})

    def get_watermark_offsets(self, tp: Any, timeout: float) -> tuple[int, int]:
        return 0, self._ends.get(tp.partition, 0)

    def assign(self, _partitions: list[Any]) -> None:
        pass

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        batch, self._left = self._left[:num_messages], self._left[num_messages:]
        for m in batch:
            self._read[m.partition() or 0] = (m.offset() or 0) + 1
        if len(batch) < num_messages:
            self.waited += timeout
        return batch

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [
            TopicPartition(tp.topic, tp.partition, self._read.get(tp.partition, 0))
            for tp in partitions
        ]

    def close(self) -> None:
        pass
