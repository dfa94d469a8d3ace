"""Confirmed writes: a failed dead-letter or output write names its topic and error."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import KafkaError

from schemas.errors import DeliveryError
from service.delivery.gated_writes import ConfirmedProducer
from tests.fakes import FakeProducer


@dataclass
class LateProducer(FakeProducer):
    """Reports nothing on its first `flush()`, as librdkafka does until a write's
    `message.timeout.ms` has run out, then fails every write with `error`."""

    error: KafkaError | None = None
    flushes: int = 0

    def flush(self, timeout: float = -1) -> int:
        self.flushes += 1
        if self.flushes == 1:
            return len(self._queue)
        self.fail_with = lambda record: self.error
        return super().flush(timeout)


class TestConfirm:
    """`confirm` waits past its timeout for librdkafka's own verdict on a write."""

    @pytest.mark.parametrize(
        "code", [KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART]
    )
    def test_a_missing_topic_is_named_with_the_fix(self, code: int) -> None:
        producer = LateProducer(error=KafkaError(code))
        confirmed = ConfirmedProducer(producer, timeout_s=0.0)
        confirmed.produce("orders.dlq", value=b"v")
        with pytest.raises(DeliveryError) as info:
            confirmed.confirm()
        message = str(info.value)
        assert message.startswith("write to 'orders.dlq' failed: ")
        assert "no such topic: create it; the worker retries until it exists" in message

    def test_another_failure_names_its_error(self) -> None:
        error = KafkaError(KafkaError._MSG_TIMED_OUT)
        confirmed = ConfirmedProducer(LateProducer(error=error), timeout_s=0.0)
        confirmed.produce("out", value=b"v")
        with pytest.raises(
            DeliveryError, match=r"^write to 'out' failed: _MSG_TIMED_OUT"
        ):
            confirmed.confirm()

    def test_acknowledged_writes_are_counted(self) -> None:
        producer: Any = FakeProducer()
        confirmed = ConfirmedProducer(producer, timeout_s=1.0)
        for _ in range(3):
            confirmed.produce("out", value=b"v")
        assert confirmed.confirm() == 3
        assert confirmed.pending == 0


@dataclass
class StalledProducer(FakeProducer):
    """A broker that never answers: `flush()` reports nothing, ever."""

    flushes: int = 0

    def flush(self, timeout: float = -1) -> int:
        self.flushes += 1
        return len(self._queue)


class TestShutdown:
    """A stop request ends `confirm`'s wait for a stalled broker, never its timeout."""

    def test_interrupted_wait_raises_without_storing(self) -> None:
        producer = StalledProducer()
        stopping = iter([False, False, True])
        confirmed = ConfirmedProducer(
            producer, timeout_s=3600.0, interrupted=lambda: next(stopping)
        )
        confirmed.produce("out", value=b"v")
        with pytest.raises(DeliveryError, match="shutting down with 1 write"):
            confirmed.confirm()
        assert producer.flushes == 3  # one slice each, not the hour

    def test_not_interrupted_when_acknowledged(self) -> None:
        producer: Any = FakeProducer()
        confirmed = ConfirmedProducer(producer, timeout_s=1.0, interrupted=lambda: True)
        confirmed.produce("out", value=b"v")
        assert confirmed.confirm() == 1
