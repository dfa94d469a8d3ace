"""Fakes of confluent-kafka objects, so the whole batch loop runs in unit tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError


@dataclass
class FakeMessage:
    """A consumed record (implements `service.types.KafkaMessage`)."""

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
class FakeConsumer:
    """Returns scripted batches from `consume()` and records stored offsets."""

    batches: list[list[FakeMessage]] = field(default_factory=list)
    stored: list[list[tuple[str, int, int]]] = field(default_factory=list)
    events: list[str] | None = None

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        return self.batches.pop(0) if self.batches else []

    def store_offsets(
        self, message: Any = None, offsets: list[Any] | None = None
    ) -> None:
        assert offsets is not None
        self.stored.append([(tp.topic, tp.partition, tp.offset) for tp in offsets])
        if self.events is not None:
            self.events.append("store")


@dataclass
class FakeProducer:
    """Acknowledges (or fails) every record on `flush()`/`poll()`."""

    fail_with: Callable[[dict[str, Any]], KafkaError | None] = lambda record: None
    produced: list[dict[str, Any]] = field(default_factory=list)
    acked: list[dict[str, Any]] = field(default_factory=list)
    events: list[str] | None = None
    _queue: list[tuple[dict[str, Any], Any]] = field(default_factory=list)

    def produce(self, topic: str, value: Any = None, key: Any = None, partition: int = -1,
                callback: Any = None, on_delivery: Any = None, timestamp: int = 0,
                headers: Any = None) -> None:  # fmt: skip
        record = {"topic": topic, "value": value, "key": key, "headers": headers,
                  "timestamp": timestamp}  # fmt: skip
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
