"""Writes whose acknowledgement gates the source offset: dead letters and output.

The worker stores a source offset only after everything the batch produced (its
dead letters and its output records) is acknowledged by the broker, the order Kafka
Connect (`awaitFutures`) and Spring (`failIfSendResultIsError`) use. A write that is
still not acknowledged after `timeout_s` raises `DeliveryError`: the worker then
stops without storing the batch's offsets, so a restart processes it again and
nothing is lost.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any, Final

from confluent_kafka import KafkaError

from service.errors import CodecError, DeliveryError
from service.types import Headers, KafkaMessage, KafkaProducer

DLQ_PREFIX: Final = "x-dlq-"
_MAX_MESSAGE: Final = 200
_GRACE_S: Final = 5.0
"""`confirm` waits this long past `timeout_s`: librdkafka fails a write when its
`message.timeout.ms` (set to `timeout_s`) runs out and reports it just after, so the
grace turns a bare "not acknowledged" into the write's own error and topic."""
_NO_TOPIC: Final = frozenset(
    {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC}
)
WORKER_ID: Final = f"{socket.gethostname()}-{os.getpid()}"


def dead_letter_headers(
    msg: KafkaMessage,
    error: Exception,
    *,
    codec: str,
    group: str,
    stage: str,
) -> Headers:
    """The original headers plus `x-dlq-*` error context (never payload values)."""
    if isinstance(error, CodecError):
        reason, exc_type, text = error.reason, error.cause_type, str(error)
    else:  # a LogicError, whose text never quotes input (see consumer.py)
        cause = error.__cause__ or error
        reason = "logic"
        exc_type = f"{type(cause).__module__}.{type(cause).__qualname__}"
        text = str(error)
    headers: Headers = list(msg.headers() or ())
    headers += [
        (DLQ_PREFIX + "reason", reason.encode()),
        (DLQ_PREFIX + "stage", stage.encode()),
        (DLQ_PREFIX + "exception-type", (exc_type or type(error).__name__).encode()),
        (DLQ_PREFIX + "exception-message", text[:_MAX_MESSAGE].encode()),
        (DLQ_PREFIX + "codec", codec.encode()),
        (DLQ_PREFIX + "topic", (msg.topic() or "").encode()),
        (DLQ_PREFIX + "partition", str(msg.partition()).encode()),
        (DLQ_PREFIX + "offset", str(msg.offset()).encode()),
        (DLQ_PREFIX + "timestamp", str(msg.timestamp()[1]).encode()),
        (DLQ_PREFIX + "group", group.encode()),
        (DLQ_PREFIX + "worker", WORKER_ID.encode()),
    ]
    return headers


class ConfirmedProducer:
    """A producer whose writes are confirmed together, once per batch.

    Args:
        producer: an idempotent confluent-kafka producer.
        timeout_s: how long `confirm` waits for every acknowledgement (the
            producer's `message.timeout.ms`; `confirm` allows 5 s more for its
            failure reports).
    """

    def __init__(self, producer: KafkaProducer, timeout_s: float) -> None:
        self._producer = producer
        self._timeout_s = timeout_s
        self._pending = 0
        self._failed: list[tuple[Any, dict[str, Any]]] = []

    @property
    def pending(self) -> int:
        """Writes produced and not yet acknowledged or failed."""
        return self._pending

    def produce(self, topic: str, **record: Any) -> None:
        """Queue one record; its delivery is checked by the next `confirm`."""
        record["topic"] = topic

        def on_delivery(err: Any, _msg: Any) -> None:
            self._pending -= 1
            if err is not None:
                self._failed.append((err, record))

        while True:
            try:
                self._producer.produce(on_delivery=on_delivery, **record)
                break
            except BufferError:  # local queue full: serve delivery reports, retry
                self._producer.poll(0.05)
        self._pending += 1

    def confirm(self) -> int:
        """Wait until every queued write is acknowledged; return how many were.

        A record too large for the topic is written again without its value (its
        headers say so), so an oversize poison message still leaves a trace.

        Raises:
            DeliveryError: a write failed or timed out; nothing may be stored.
        """
        confirmed = self._pending
        deadline = time.monotonic() + self._timeout_s + _GRACE_S
        while self._pending or self._failed:
            self._producer.flush(max(0.0, deadline - time.monotonic()))
            if self._failed:
                self._retry_or_raise()
            elif self._pending and time.monotonic() >= deadline:
                raise DeliveryError(
                    f"{self._pending} write(s) not acknowledged in {self._timeout_s}s"
                )
        return confirmed

    def _retry_or_raise(self) -> None:
        failed, self._failed = self._failed, []
        for err, record in failed:
            if err.code() == KafkaError.MSG_SIZE_TOO_LARGE and record.get("value"):
                size = str(len(record["value"])).encode()
                record["headers"] = [
                    *record.get("headers", ()),
                    (DLQ_PREFIX + "value-dropped-bytes", size),
                ]
                record["value"] = None
                topic = record.pop("topic")
                self.produce(topic, **record)
                continue
            hint = ""
            if err.code() in _NO_TOPIC:  # deleted since the start-up check
                hint = " (no such topic: create it, or restart with --create-topics)"
            raise DeliveryError(
                f"write to {record['topic']!r} failed: {err.name()}: {err.str()}" + hint
            )
