"""Errors the consumer delivers in place of messages: which stop the worker, which
are data to dead-letter and move past, which are only counted and logged.

`ConsumerErrors` is the loop's consumer-error callback (off the per-message path:
only a message whose `error()` is set comes here). Every error is counted in
`worker_consumer_errors_total{code}` and logged as `consumer_error` at most once
per code every 30 s (`others_since_last` counts the rest): librdkafka repeats a
partition's error at every fetch, ~2 a second. A fatal one stops the worker. One
that says a partition's bytes at an offset cannot become messages
(`service.kafka.batch_probe.UNREADABLE_CODES`: a batch that does not inflate, a
corrupt one, one too large to fetch) would stop that partition for ever, since
librdkafka fetches the same offset again and again: it becomes a `Poison` whose
dead letter names the partition and the range of offsets (`x-dlq-offset` to
`x-dlq-last-offset`, reason `unreadable`, librdkafka's error as the exception;
no key, value or original headers: they are inside the bytes that could not be
read). Once the batch's writes are confirmed, `skip` seeks the partition past
the range and stores that offset, so the partition moves on and nothing behind
the range is held up.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog
from confluent_kafka import KafkaException, TopicPartition

from schemas.errors import CodecError, FatalError
from service.kafka.batch_probe import BASE_OFFSET_ERRORS, is_unreadable
from service.kafka.protocols import KafkaMessage
from service.telemetry.log_setup import RateLimiter
from service.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)


class UnreadableBatch(CodecError):
    """Offsets `start` to `last` of a partition that librdkafka could not read.

    Attributes:
        topic, partition: where.
        first: the failing batch's first offset, as librdkafka named it (for the
            probe: its errors name this offset for every fetch inside the batch).
        start: the first offset of the range not yet handled (`first`, or later
            when the worker moved past part of the batch already).
        last: the range's last offset (`start` until `PoisonHandler` probes it).
        code: librdkafka's error code name (`_BAD_COMPRESSION`).
    """

    def __init__(
        self,
        err: Any,
        *,
        codec: str,
        topic: str,
        partition: int,
        first: int,
        start: int,
    ) -> None:
        super().__init__(
            err.str(),
            codec=codec,
            reason="unreadable",
            cause_type=f"confluent_kafka.KafkaError.{err.name()}",
        )
        self.topic, self.partition = topic, partition
        self.first, self.start, self.last = first, start, start
        self.code = err.code()
        self.probed = self.code in BASE_OFFSET_ERRORS


@dataclass(frozen=True, slots=True)
class Skip:
    """Where a partition goes past an unreadable range once its letter is written."""

    topic: str
    partition: int
    offset: int


class ConsumerErrors:
    """The loop's consumer-error callback; see the module docstring.

    Args:
        metrics: the worker's metrics.
        codec: the worker's codec key (the dead letter's `x-dlq-codec`).
        limiter: the log's rate limit (tests pass one with a fake clock).
    """

    def __init__(
        self, metrics: Metrics, codec: str, limiter: RateLimiter | None = None
    ) -> None:
        self._m = metrics
        self._codec = codec
        self._limiter = limiter or RateLimiter()
        self._floor: dict[tuple[str, int], int] = {}
        """Per partition, the offset the worker last moved it to past a range: an
        error naming an earlier first offset (the same batch, met again) starts
        its range there."""
        self._batch: set[tuple[str, int, int]] = set()
        """Ranges already set aside in this batch (librdkafka may repeat one)."""

    def __call__(self, m: KafkaMessage) -> UnreadableBatch | None:
        """Count and log one consumer error; the range to dead-letter, if any.

        Raises:
            FatalError: librdkafka says the client cannot go on.
        """
        err = m.error()
        code = err.name()
        self._m.consumer_errors.labels(code).inc()
        if err.fatal():
            raise FatalError(f"fatal consumer error: {code}: {err.str()}")
        topic, partition, offset = m.topic() or "", m.partition(), m.offset()
        others = self._limiter.allow(code)
        if others is not None:
            log.error(
                "consumer_error",
                code=code,
                error=err.str(),
                topic=topic,
                partition=partition,
                offset=offset,
                others_since_last=others,
            )
        if not is_unreadable(err, partition, offset):
            return None
        assert partition is not None and offset is not None  # noqa: S101 (checked)
        start = max(offset, self._floor.get((topic, partition), -1))
        if (topic, partition, start) in self._batch:
            return None
        self._batch.add((topic, partition, start))
        return UnreadableBatch(
            err,
            codec=self._codec,
            topic=topic,
            partition=partition,
            first=offset,
            start=start,
        )

    def new_batch(self) -> None:
        """Forget the ranges set aside in the last batch."""
        self._batch.clear()

    def skip(self, consumer: Any, skips: list[Skip], store: bool) -> None:
        """Move each partition past its written range: seek, then store the
        offset (at-least-once; exactly-once committed it in the batch's
        transaction). A partition revoked meanwhile is left to its new owner."""
        for s in skips:
            tp = TopicPartition(s.topic, s.partition, s.offset)
            try:
                consumer.seek(tp)
                if store:
                    consumer.store_offsets(offsets=[tp])
            except KafkaException as exc:
                if (others := self._limiter.allow("not_skipped")) is not None:
                    log.warning(
                        "unreadable_not_skipped",
                        partition=s.partition,
                        offset=s.offset,
                        error=exc.args[0].str(),
                        others_since_last=others,
                    )
                continue
            self._floor[(s.topic, s.partition)] = s.offset
            if (others := self._limiter.allow("skipped")) is not None:
                log.info(
                    "unreadable_skipped",
                    partition=s.partition,
                    to_offset=s.offset,
                    others_since_last=others,
                )


def letter_for(
    m: KafkaMessage, error: UnreadableBatch, probe: Callable[..., int] | None
) -> UnreadableBatch:
    """Resolve the range's last offset (`BatchProbe.last_offset`) if it can be
    probed; `error` is updated in place and returned."""
    if error.probed and probe is not None:
        with contextlib.suppress(KafkaException):
            error.last = max(
                error.start,
                probe(error.topic, error.partition, error.first, error.start),
            )
    return error
