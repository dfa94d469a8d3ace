"""Poison messages: what the loop could not use, and where it goes (DLQ or a stop).

The hot loop only sets a rejected message aside as a `Poison`; after the batch a
`PoisonHandler` writes each to the dead-letter topic (original key, value, headers,
timestamp, plus `x-dlq-*` context) or, with `on_decode_error = fail`, stops the worker
without storing the batch. A dead letter is counted in `worker_dead_letters_total`
once the broker has acknowledged it, and logged at most once per reason every
`LOG_EVERY_S` seconds with the number of others since: at 40k msg/s of poison a
line per message would drown the logs.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import structlog

from codec import as_decode_error, as_encode_error
from schemas.errors import CodecError, DecodeError, FatalError, LogicError
from service.delivery.gated_writes import ConfirmedProducer, dead_letter_headers
from service.kafka.protocols import KafkaMessage
from service.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)

_QUOTED: Final = re.compile(r"'[^']*'|\"[^\"]*\"")
"""A quoted span of an exception's text: a value, masked in dead-letter headers."""

LOG_EVERY_S: Final = 10.0


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
        """A message with no value, or one over `max_payload_bytes` (not decoded)."""
        value = m.value()
        if value is None:
            error = DecodeError("message has no value", codec=codec, reason="empty")
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
        """A message whose result the output codec could not encode."""
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
    """

    def __init__(
        self,
        metrics: Metrics,
        *,
        codec: str,
        group: str,
        dead_letters: tuple[ConfirmedProducer, str] | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._m = metrics
        self._codec, self._group = codec, group
        self._dead_letters = dead_letters
        self._clock = clock
        self._pending: list[Poison] = []
        self._logged: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self._dropped_seen = 0

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
                key=m.key(),
                value=m.value(),
                headers=headers,
                timestamp=m.timestamp()[1],
            )
        self._pending += poison

    def confirm(self) -> None:
        """Wait for the queued dead letters' acknowledgements, then count them.

        Raises:
            DeliveryError: a dead letter was not acknowledged in time.
        """
        if not self._pending:
            return
        assert self._dead_letters is not None  # noqa: S101  # only queued with a DLQ
        producer = self._dead_letters[0]
        if producer.pending:
            producer.confirm()
        done, self._pending = self._pending, []
        dropped, self._dropped_seen = (
            producer.values_dropped - self._dropped_seen,
            producer.values_dropped,
        )
        if dropped:
            self._m.values_dropped.inc(dropped)
            self._log_dropped(dropped)
        counts: dict[str, int] = {}
        for p in done:
            counts[p.reason] = counts.get(p.reason, 0) + 1
        for reason, n in counts.items():
            self._m.dead_letters(reason).inc(n)
        self._log(done)

    def abandon(self) -> None:
        """Forget the queued dead letters: their batch is processed again later."""
        self._pending = []
        if self._dead_letters is not None:
            self._dead_letters[0].abandon()

    def _log_dropped(self, n: int) -> None:
        if not self._due("value_dropped"):
            return
        log.warning(
            "dead_letter_value_dropped",
            count=n,
            others_since_last=self._suppressed.pop("value_dropped", 0),
            why="too large for the dead-letter producer or topic; the letter keeps "
            "x-dlq-value-dropped-bytes and x-dlq-value-sha256",
        )

    def _due(self, key: str) -> bool:
        """Rate limit: True at most once per `LOG_EVERY_S` per key."""
        now = self._clock()
        if now - self._logged.get(key, -LOG_EVERY_S) < LOG_EVERY_S:
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
