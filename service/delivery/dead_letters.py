"""Poison messages: what the loop could not use, and where it goes (DLQ or a stop).

The hot loop only sets a rejected message aside as a `Poison`; after the batch a
`PoisonHandler` writes each to the dead-letter topic (original key, value, headers,
timestamp, plus `x-dlq-*` context) or, with `on_decode_error = fail`, stops the worker
without storing the batch. A dead letter is counted in `worker_dead_letters_total`
once the broker has acknowledged it, and logged at most once per reason every
`LOG_EVERY_S` seconds with the number of others since: at 40k msg/s of poison a
line per message would drown the logs.

A letter is written once: one the broker acknowledged is remembered (by source
partition and offset, at-least-once only) and not written again when its batch
is read again after another write of the batch failed. Consumer errors that are
unreadable data (`service.delivery.unreadable`) become letters here too, and
their partitions move past them once the batch is confirmed (`skip`).
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import structlog

from codec import as_decode_error, as_encode_error
from schemas.errors import CodecError, DecodeError, EncodeError, FatalError, LogicError
from service.delivery.gated_writes import ConfirmedProducer, RecordRefused
from service.delivery.letter_headers import dead_letter_headers
from service.delivery.unreadable import (
    ConsumerErrors,
    Skip,
    UnreadableBatch,
    letter_for,
)
from service.kafka.protocols import KafkaMessage
from service.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)

_QUOTED: Final = re.compile(r"'[^']*'|\"[^\"]*\"")
"""A quoted span of an exception's text: a value, masked in dead-letter headers."""

LOG_EVERY_S: Final = 10.0
SPOOL_LOG_EVERY_S: Final = 30.0
ACKED_KEPT: Final = 100_000
"""Acknowledged letters remembered (a rewound batch is read again within
seconds; a letter is ~100 bytes of memory here)."""


@dataclass(frozen=True, slots=True)
class Poison:
    """One rejected message, its error and the stage that rejected it."""

    message: KafkaMessage
    error: Exception
    stage: str
    attempts: int = 1

    @property
    def reason(self) -> str:
        """A short, bounded label: decode, empty, oversize, content_type, logic,
        encode, budget."""
        return str(getattr(self.error, "reason", "logic"))

    @classmethod
    def unusable(cls, m: KafkaMessage, codec: str, limit: int) -> Poison:
        """A message with no value or an empty one, or one over
        `max_payload_bytes` (not decoded)."""
        value = m.value()
        if not value:
            what = "no value" if value is None else "an empty value"
            error = DecodeError(f"message has {what}", codec=codec, reason="empty")
        else:
            error = DecodeError(
                f"payload of {len(value)} bytes exceeds max_payload_bytes={limit}",
                codec=codec,
                reason="oversize",
            )
        return cls(m, error, "decode")

    @classmethod
    def undecodable(cls, m: KafkaMessage, codec: str, exc: Exception) -> Poison:
        """A message the codec rejected."""
        return cls(m, as_decode_error(codec, exc), "decode")

    @classmethod
    def unencodable(cls, m: KafkaMessage, codec: str, exc: Exception) -> Poison:
        """A message whose result the output codec could not encode, or the
        output topic refuses for what it is (`RecordRefused`: too large...)."""
        if isinstance(exc, RecordRefused):
            kind = f"{RecordRefused.__module__}.{RecordRefused.__qualname__}"
            error = EncodeError(str(exc), codec=codec, reason="encode", cause_type=kind)
            return cls(m, error, "encode")
        return cls(m, as_encode_error(codec, exc), "encode")

    @classmethod
    def over_budget(
        cls, m: KafkaMessage, codec: str, exc: BaseException, stage: str
    ) -> Poison:
        """A message whose decode and logic ran past `message_budget_ms` (reason
        `budget`; `stage` is where it was interrupted: decode or process)."""
        error = CodecError(
            str(exc), codec=codec, reason="budget", cause_type=type(exc).__name__
        )
        return cls(m, error, stage)

    @classmethod
    def rejected(cls, m: KafkaMessage, exc: Exception, attempts: int = 1) -> Poison:
        """A message the logic rejected `attempts` times.

        A foreign exception (a team's handler, `--logic MODULE:CALLABLE`) keeps its
        type and its message with every quoted span masked (`'...'`): handlers
        quote the values they refuse, and dead-letter headers never carry payload
        values. An `AttributeError` keeps the type and attribute it names."""
        if isinstance(exc, LogicError):
            return cls(m, exc, "process", attempts)
        text = _QUOTED.sub(lambda q: f"{q[0][0]}...{q[0][0]}", str(exc))
        if isinstance(exc, AttributeError) and exc.name is not None:
            # Names from the code, not values: what a switch of codec breaks.
            text = f"{type(exc.obj).__name__!r} object has no attribute {exc.name!r}"
        error = LogicError(
            f"{type(exc).__name__}: {text}" if text else type(exc).__name__
        )
        error.__cause__ = exc
        return cls(m, error, "process", attempts)


class PoisonHandler:
    """Dead-letters poison (or stops on it) and counts what the broker acknowledged.

    Args:
        metrics: the worker's metrics.
        codec: the worker's codec key (a DLQ header).
        group: the consumer group (a DLQ header).
        dead_letters: the DLQ producer and topic; None stops at the first poison.
        clock: monotonic seconds (tests pass a fake).
        probe: finds an unreadable batch's last offset
            (`service.kafka.batch_probe.BatchProbe.last_offset`); None: the
            partition moves past such a batch one offset at a time.
        exactly_once: letters go in the batch's transaction (an aborted one's
            land unseen, so none is remembered) and offsets with it (`skip`
            only seeks).
    """

    def __init__(
        self,
        metrics: Metrics,
        *,
        codec: str,
        group: str,
        dead_letters: tuple[ConfirmedProducer, str] | None,
        clock: Callable[[], float] = time.monotonic,
        probe: Callable[[str, int, int, int], int] | None = None,
        exactly_once: bool = False,
    ) -> None:
        self._m = metrics
        self._codec, self._group = codec, group
        self._dead_letters = dead_letters
        self._clock = clock
        self._pending: list[Poison] = []
        self._logged: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self._dropped_seen = self._cut_seen = self._spooled_seen = 0
        self.errors = ConsumerErrors(metrics, codec)
        self._probe = probe
        self._exactly_once = exactly_once
        self._acked: OrderedDict[tuple[str, int, int], None] = OrderedDict()
        self._skips: list[Skip] = []
        self.skips: list[Skip] = []
        """Partitions to move past unreadable ranges whose letters are confirmed
        (`skip` does; exactly-once commits them in the batch's transaction)."""
        if dead_letters is not None:
            dead_letters[0].on_refused = self._output_refused

    def _output_refused(self, m: KafkaMessage, code: str) -> None:
        """A result the output topic refused for what it is, after the loop had
        handled its message: the message is dead-lettered (reason `encode`)
        through the same producer and counted once acknowledged."""
        where = (m.topic() or "", m.partition() or 0, m.offset() or 0)
        if where in self._acked:  # written before its batch was rewound
            return
        refused = RecordRefused(f"the output topic refused its result: {code}")
        p = Poison.unencodable(m, self._codec, refused)
        counter, remember = self._m.dead_letters(p.reason), self._remember(where)

        def acked() -> None:
            counter.inc()
            if remember is not None:
                remember()

        assert self._dead_letters is not None  # noqa: S101 (set only with a DLQ)
        producer, topic = self._dead_letters
        producer.produce(
            topic,
            droppable=True,
            acked=acked,
            key=m.key(),
            value=m.value(),
            timestamp=m.timestamp()[1],
            headers=dead_letter_headers(
                m, p.error, codec=self._codec, group=self._group, stage=p.stage
            ),
        )
        self._log([p])

    def consumer_error(self, m: KafkaMessage) -> Poison | None:
        """The loop's consumer-error callback: a `Poison` for unreadable data
        (`service.delivery.unreadable`), else None (counted and logged).

        Raises:
            FatalError: a fatal client error.
        """
        error = self.errors(m)
        return None if error is None else Poison(m, error, "fetch")

    def skip(self, consumer: Any) -> None:
        """After the batch is confirmed: move `consumer`'s partitions past their
        unreadable ranges (`ConsumerErrors.skip`)."""
        if self.skips:
            self.errors.skip(consumer, self.skips, not self._exactly_once)
            self.skips = []
        self.errors.new_batch()

    def _remember(self, key: tuple[str, int, int]) -> Callable[[], None] | None:
        if self._exactly_once:
            return None
        acked = self._acked

        def remember() -> None:
            acked[key] = None
            if len(acked) > ACKED_KEPT:
                acked.popitem(last=False)

        return remember

    def reject(self, poison: Sequence[Poison]) -> None:
        """Queue a dead letter for each message (or stop at the first one).

        Raises:
            FatalError: the policy is `fail`.
        """
        if self._dead_letters is None:
            first = poison[0].message
            raise FatalError(
                f"poison message at {first.topic()}[{first.partition()}]"
                f"@{first.offset()} with on_decode_error=fail"
            )
        producer, topic = self._dead_letters
        for p in poison:
            m = p.message
            record: dict[str, Any]
            if isinstance(p.error, UnreadableBatch):
                e = letter_for(m, p.error, self._probe)
                self._skips.append(Skip(e.topic, e.partition, e.last + 1))
                where = (e.topic, e.partition, e.start)
                record = {}  # its key, value and headers are in the unread bytes
            else:
                where = (m.topic() or "", m.partition() or 0, m.offset() or 0)
                record = {"key": m.key(), "value": m.value()}
                record["timestamp"] = m.timestamp()[1]
            if where in self._acked:  # written before its batch was rewound
                continue
            headers = dead_letter_headers(
                m,
                p.error,
                codec=self._codec,
                group=self._group,
                stage=p.stage,
                attempts=p.attempts,
            )
            producer.produce(
                topic,
                droppable=True,
                acked=self._remember(where),
                headers=headers,
                where=where,
                **record,
            )
            self._pending.append(p)

    def confirm(self) -> None:
        """Wait for the queued dead letters' acknowledgements, then count them.

        Raises:
            DeliveryError: a dead letter was not acknowledged in time.
        """
        skips, self._skips = self._skips, []
        if not self._pending:
            self.skips += skips
            return
        assert self._dead_letters is not None  # noqa: S101  # only queued with a DLQ
        producer = self._dead_letters[0]
        if producer.pending:
            producer.confirm()  # raises: `abandon` follows, the skips are dropped
        self.skips += skips
        done, self._pending = self._pending, []
        dropped, self._dropped_seen = (
            producer.values_dropped - self._dropped_seen,
            producer.values_dropped,
        )
        if dropped:
            self._m.values_dropped.inc(dropped)
            self._log_dropped(dropped)
        self._count_ladder(producer)
        counts: dict[str, int] = {}
        for p in done:
            counts[p.reason] = counts.get(p.reason, 0) + 1
        for reason, n in counts.items():
            self._m.dead_letters(reason).inc(n)
        self._log(done)

    def abandon(self) -> None:
        """Forget the queued dead letters: their batch is processed again later."""
        self._pending = []
        self._skips, self.skips = [], []
        self.errors.new_batch()
        if self._dead_letters is not None:
            self._dead_letters[0].abandon()

    def _count_ladder(self, producer: ConfirmedProducer) -> None:
        """Count letters cut to their essentials and letters spooled
        (`service.delivery.letter_ladder`); say so, at most once every 30 s."""
        cut, self._cut_seen = producer.cut - self._cut_seen, producer.cut
        spooled, self._spooled_seen = (
            producer.spooled - self._spooled_seen,
            producer.spooled,
        )
        if cut:
            self._m.letters_cut.inc(cut)
        if spooled:
            self._m.letters_spooled.inc(spooled)
            self._say(
                "spooled",
                spooled,
                "refused by the dead-letter topic even cut to its essentials; "
                "kept in the worker's spool file",
                SPOOL_LOG_EVERY_S,
            )

    def _log_dropped(self, n: int) -> None:
        self._say(
            "value_dropped",
            n,
            "too large for the dead-letter producer or topic; the letter keeps "
            "x-dlq-value-dropped-bytes and x-dlq-value-sha256",
        )

    def _say(self, key: str, n: int, why: str, every_s: float = LOG_EVERY_S) -> None:
        """`dead_letter_<key>` (an error for `spooled`), rate-limited per key."""
        if self._due(key, every_s):
            level = log.error if key == "spooled" else log.warning
            others = self._suppressed.pop(key, 0)
            level(f"dead_letter_{key}", count=n, others_since_last=others, why=why)

    def _due(self, key: str, every_s: float = LOG_EVERY_S) -> bool:
        """Rate limit: True at most once per `every_s` per key."""
        now = self._clock()
        if now - self._logged.get(key, -every_s) < every_s:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return False
        self._logged[key] = now
        return True

    def _log(self, done: Sequence[Poison]) -> None:
        for p in done:
            reason = p.reason
            if not self._due(reason):
                continue
            m = p.message
            log.warning(
                "dead_lettered",
                topic=m.topic(),
                partition=m.partition(),
                offset=m.offset(),
                reason=reason,
                stage=p.stage,
                attempts=p.attempts,
                error=str(p.error)[:200],
                others_since_last=self._suppressed.pop(reason, 0),
            )
