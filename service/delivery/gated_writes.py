"""Writes whose acknowledgement gates the source offset: dead letters and output.

The worker stores a source offset only after everything the batch produced (its
dead letters and its output records) is acknowledged by the broker, the order Kafka
Connect (`awaitFutures`) and Spring (`failIfSendResultIsError`) use. A write that is
still not acknowledged after `timeout_s`, or refused, raises `DeliveryError`: the
loop then stores none of the batch's offsets, rewinds and pauses its partitions and
retries later (`service.delivery.held_partitions`), so nothing is lost and nothing stops.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any, Final

from confluent_kafka import KafkaError, KafkaException

from schemas.errors import DeliveryError
from service.delivery.letter_ladder import REFUSED_AS_IS, Spool, essentials
from service.delivery.transactions import transactional_id
from service.kafka.admin_topics import Topics
from service.kafka.headers import DLQ_PREFIX
from service.kafka.protocols import KafkaProducer
from service.settings.worker import Settings

_GRACE_S: Final = 5.0
_SLICE_S: Final = 0.25
"""How often `confirm` looks up from its wait to see whether the worker stops."""
"""`confirm` waits this long past `timeout_s`: librdkafka fails a write when its
`message.timeout.ms` (set to `timeout_s`) runs out and reports it just after, so the
grace turns a bare "not acknowledged" into the write's own error and topic."""
_NO_TOPIC: Final = frozenset(
    {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC}
)


_OWN_KEYS: Final = frozenset(
    {
        *("droppable", "dropped", "level", "acked"),
        *("original_value", "original_headers", "source", "where"),
    }
)
"""Keys of a queued record that are this class's bookkeeping, not the client's."""
_STEPS_KEPT: Final = 10_000
_BATCH_SIZE: Final = 1_000_000
"""librdkafka's default `batch.size`."""


def writer_config(settings: Settings, admin: Topics | None) -> dict[str, Any]:
    """The dead-letter and output producer's librdkafka settings.

    What the consumer can receive, the producer can send (`message.max.bytes`
    follows `fetch_max_bytes`), up to the largest `max.message.bytes` of the
    written topics, when known: a record over it is refused by the client at once,
    before it is copied into the producer's queue (a 90 MB value inflated from a
    compressed bomb is not held twice). (One producer writes both topics: the
    smaller limit would refuse records the other topic takes.) The broker refuses a whole record batch
    over the topic's limit, small records and all, so `batch.size` stays below
    that limit; then only a record too large alone is refused, and a dead letter
    is written again without its value.
    """
    p = settings.processing
    conf = settings.producer_config(plaintext_secrets=True)
    conf["message.timeout.ms"] = int(p.delivery_timeout_s * 1000)
    fetch_max = settings.consumer.fetch_max_bytes
    conf["message.max.bytes"] = min(1_000_000_000, fetch_max + 65_536)
    topics = [p.dlq_topic_for(settings.consumer.topic), p.output_topic]
    limits = [admin.max_message_bytes(t) for t in topics if t] if admin else []
    known = [n for n in limits if n is not None]
    if known:  # over every written topic's limit: refused by the client at once
        conf["message.max.bytes"] = max(
            1024, min(conf["message.max.bytes"], max(known))
        )
    if known and min(known) - 1024 < _BATCH_SIZE:
        conf["batch.size"] = max(1024, min(known) - 1024)
    if settings.exactly_once:
        group = settings.consumer.group_id
        conf["transactional.id"] = transactional_id(group, p.index, p.transactional_id)
        # A transaction outlives its slowest write by a margin; the broker's
        # transaction.max.timeout.ms is 15 min by default.
        conf["transaction.timeout.ms"] = min(
            900_000, conf["message.timeout.ms"] + 30_000
        )
    return conf


class ConfirmedProducer:
    """A producer whose writes are confirmed together, once per batch.

    A dead letter (`droppable` writes only) the producer or the topic refuses for
    what it is (too large, a timestamp or record the topic does not take) is
    written again without its value, then cut to its essentials, and at last
    spooled to a local file (`service.delivery.letter_ladder`): poison never stops
    the group and always leaves a trace.

    Args:
        producer: an idempotent confluent-kafka producer.
        timeout_s: how long `confirm` waits for every acknowledgement (the
            producer's `message.timeout.ms`; `confirm` allows 5 s more for its
            failure reports).
        interrupted: True once the worker is shutting down: `confirm` then stops
            waiting within `_SLICE_S` and the batch is left unstored (its
            messages are read again), so a stalled broker cannot hold a SIGTERM
            for the whole delivery timeout.
        spool: where a dead letter refused even cut to its essentials goes;
            None: such a write fails like any other (`DeliveryError`).
    """

    def __init__(
        self,
        producer: KafkaProducer,
        timeout_s: float,
        interrupted: Callable[[], bool] | None = None,
        spool: Spool | None = None,
    ) -> None:
        self._producer = producer
        self._timeout_s = timeout_s
        self._interrupted = interrupted
        self._pending: dict[str, int] = {}
        self._failed: list[tuple[Any, dict[str, Any]]] = []
        self._epoch = 0
        self._spool = spool
        self._steps: dict[Any, tuple[int, Any, bool]] = {}
        """Per letter (`where`: its source), the ladder's step it reached, the
        refusal that took it there and whether its timestamp was refused (kept
        for `_STEPS_KEPT` letters)."""
        self.on_refused: Callable[[Any, str], None] | None = None
        """Called with an output record's source message (its `source`) and the
        error's name when the broker refuses the record for what it is (a write
        that would fail for ever): it dead-letters the message through this
        producer (`PoisonHandler`); None: the refusal is a `DeliveryError`."""
        self.values_dropped = 0
        """Dead letters acknowledged without their value so far (see the class)."""
        self.cut = 0
        """Dead letters acknowledged cut to their essentials so far."""
        self.spooled = 0
        """Dead letters spooled to the local file so far."""

    @property
    def pending(self) -> int:
        """Writes produced and not yet acknowledged or failed."""
        return sum(self._pending.values())

    def produce(
        self,
        topic: str,
        *,
        droppable: bool = False,
        acked: Callable[[], None] | None = None,
        **record: Any,
    ) -> None:
        """Queue one record; its delivery is checked by the next `confirm`.

        Args:
            topic: where it goes.
            droppable: a dead letter (see the class).
            acked: called once the broker has the record, even after `abandon`
                (it landed: the caller need not write it again).
            **record: the client's `produce` arguments.

        Raises:
            DeliveryError: the client refused the record (not retried here).
        """
        record["topic"] = topic
        record["droppable"] = droppable
        record["acked"] = acked
        epoch = self._epoch
        if (known := self._steps.get(record.get("where"))) is not None:
            # Refused before, and its batch is read again (exactly-once: the
            # refusal aborted the transaction): start where the ladder got to.
            level, err, timeless = known
            if timeless:
                record.pop("timestamp", None)
            while record.get("level", 1) < level:
                self._ladder(err, record)

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is None and acked is not None:
                acked()
            if epoch != self._epoch:  # abandoned: its batch is processed again
                return
            self._pending[topic] -= 1
            if err is not None:
                self._failed.append((err, record))
            else:
                self.values_dropped += bool(record.get("dropped"))
                self.cut += record.get("level", 1) == 3

        while True:
            try:
                self._producer.produce(
                    on_delivery=on_delivery,
                    **{k: v for k, v in record.items() if k not in _OWN_KEYS},
                )
                break
            except BufferError:  # local queue full: serve delivery reports, retry
                self._producer.poll(0.05)
            except KafkaException as exc:  # refused before queueing (size, config)
                err = exc.args[0]
                step = self._step_down(err, record)
                if step == "again":
                    continue
                if step == "spooled":
                    return
                if not droppable and err.code() in REFUSED_AS_IS:
                    # A result the topic will never take: its message is poison
                    # (the loop dead-letters it, reason `encode`), not a retry.
                    raise RecordRefused(f"{topic!r} refused it: {err.name()}") from None
                raise _refused(topic, err) from None
        self._pending[topic] = self._pending.get(topic, 0) + 1

    def confirm(self) -> int:
        """Wait until every queued write is acknowledged; return how many were.

        Raises:
            DeliveryError: a write failed or timed out; nothing may be stored. Call
                `abandon` before producing again.
        """
        confirmed = self.pending
        deadline = time.monotonic() + self._timeout_s + _GRACE_S
        interrupted = self._interrupted
        while self.pending or self._failed:
            left = max(0.0, deadline - time.monotonic())
            self._producer.flush(left if interrupted is None else min(left, _SLICE_S))
            if self._failed:
                self._retry_or_raise()
            elif self.pending and interrupted is not None and interrupted():
                raise DeliveryError(
                    f"shutting down with {self.pending} write(s) not acknowledged: "
                    "their batch is not stored, and is read again"
                )
            elif self.pending and time.monotonic() >= deadline:
                late = ", ".join(
                    f"{n} to {topic!r}" for topic, n in self._pending.items() if n
                )
                raise DeliveryError(
                    f"write(s) not acknowledged in {self._timeout_s}s: {late}"
                )
        return confirmed

    def use(self, producer: KafkaProducer) -> None:
        """Write through `producer` from now on (exactly-once: a new producer in
        place of an unusable one); what the old one held is abandoned."""
        self.abandon()
        self._producer = producer

    def abandon(self) -> None:
        """Forget every unconfirmed write (their batch is processed again later).

        Their delivery reports, if any still come, are ignored; a write that did
        land is written again by the retry (at-least-once).
        """
        self._epoch += 1
        self._pending = {}
        self._failed = []

    def _step_down(self, err: Any, record: dict[str, Any]) -> str | None:
        """A dead letter refused for what it is: the next step of the ladder
        (`service.delivery.letter_ladder`), applied to `record` in place.

        Returns:
            "again" to write it again, "spooled" if it went to the spool, None if
            the refusal is not the letter's to answer (not a dead letter, or an
            error of the topic or the cluster).

        Raises:
            DeliveryError: the spool could not be written either.
        """
        if not record["droppable"] or err.code() not in REFUSED_AS_IS:
            return None
        if err.code() == KafkaError.INVALID_TIMESTAMP and record.get("timestamp"):
            record.pop("timestamp")  # the topic's time rule: x-dlq-timestamp keeps it
            step: str | None = "again"
        else:
            step = self._ladder(err, record)
        if step == "again" and (where := record.get("where")) is not None:
            level, before, timeless = self._steps.get(where, (1, err, False))
            self._steps[where] = (
                record.get("level", 1),
                err if record.get("level", 1) > level else before,
                timeless or "timestamp" not in record,
            )
            while len(self._steps) > _STEPS_KEPT:
                del self._steps[next(iter(self._steps))]
        return step

    def _ladder(self, err: Any, record: dict[str, Any]) -> str | None:
        """The ladder's next step for a letter refused for its size or content."""
        level = record.get("level", 1)
        value = record.get("value")
        if level == 1 and value:
            record["headers"] = [
                *record.get("headers", ()),
                (DLQ_PREFIX + "value-dropped-bytes", str(len(value)).encode()),
                (
                    DLQ_PREFIX + "value-sha256",
                    hashlib.sha256(value).hexdigest().encode(),
                ),
                (DLQ_PREFIX + "value-dropped-reason", err.name().encode()),
            ]
            record["original_value"] = value
            record["value"] = None
            record["dropped"] = True
            record["level"] = 2
            return "again"
        if level < 3:
            record["original_headers"] = record.get("headers")
            essentials(record, err.name())
            return "again"
        if self._spool is None:
            return None
        try:
            self._spool.write(record, err.name())
        except OSError as exc:
            raise DeliveryError(
                f"dead letter refused by {record['topic']!r} ({err.name()}) even "
                f"cut to its essentials, and the spool {self._spool.path} cannot be "
                f"written: {exc}"
            ) from None
        self.spooled += 1
        return "spooled"

    def _retry_or_raise(self) -> None:
        failed, self._failed = self._failed, []
        for err, record in failed:
            step = self._step_down(err, record)
            if step == "again":
                topic = record.pop("topic")
                self.produce(topic, **record)
                continue
            if step == "spooled":
                continue
            source = record.get("source")
            refused = err.code() in REFUSED_AS_IS and source is not None
            if refused and self.on_refused is not None:
                self.on_refused(source, err.name())
                continue
            raise _refused(record["topic"], err)


class RecordRefused(ValueError):
    """The client refused an output record for what it is (too large for the
    topic...): writing it again cannot help."""


class WriteRefused(DeliveryError):
    """A write the client or the broker refused, with librdkafka's error code."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def _refused(topic: str, err: Any) -> WriteRefused:
    """The error for a write `topic` refused, its code kept (`code`: the log's
    rate limit, `service.delivery.held_partitions`)."""
    hint = ""
    if err.code() in _NO_TOPIC:  # deleted since the start-up check
        hint = " (no such topic: create it; the worker retries until it exists)"
    elif err.code() == KafkaError._MSG_TIMED_OUT:
        hint = " (is the topic there, and its leader up? the worker retries)"
    return WriteRefused(
        f"write to {topic!r} failed: {err.name()}: {err.str()}" + hint, err.name()
    )
