"""The batch loop (the hot path): consume, decode, handle, confirm, store.

Per batch: decode every message (one pass, timed as a whole), run the logic (one
pass, timed as a whole), write poison messages to the dead-letter topic and results
to the output topic, wait for those writes to be acknowledged, then store each
partition's next offset (at-least-once: stored only after the message is handled).
Metrics are updated once per batch; nothing in the per-message code logs, resolves
label children or tests the configuration: those choices are made at construction.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from time import thread_time, time_ns
from typing import Any, Final

import structlog
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from service.codecs import AutoCodec, Codec, as_decode_error
from service.delivery import ConfirmedProducer, dead_letter_headers
from service.errors import DecodeError, FatalError, LogicError
from service.handlers import Failures
from service.metrics import Metrics
from service.types import KafkaConsumer, KafkaMessage

log = structlog.get_logger(__name__)

SENT_HEADER: Final = "x-sent-ns"
CONTENT_TYPE_HEADER: Final = "content-type"

Rejected = list[tuple[int, Exception, str]]
"""(index in the batch, error, stage) for each message the batch could not use."""


def _oversize(codec: str, size: int, limit: int) -> DecodeError:
    return DecodeError(
        f"payload of {size} bytes exceeds max_payload_bytes={limit}",
        codec=codec,
        reason="oversize",
    )


def _empty(codec: str) -> DecodeError:
    return DecodeError("message has no value", codec=codec, reason="empty")


class BatchLoop:
    """Consumes batches and handles them; see the module docstring for the order.

    Args:
        consumer: subscribed consumer with `enable.auto.offset.store=false`.
        topic: the one topic the consumer reads.
        codec: the configured codec (an `AutoCodec` reads `content-type`).
        handle_batch: the logic; returns per-message failures.
        metrics: the worker's metrics.
        dead_letters: where poison messages go; None fails the loop instead.
        output: where results go, with its topic; None for no output.
        latency_sample_every: time the end-to-end latency of every k-th message.
    """

    def __init__(
        self,
        consumer: KafkaConsumer,
        *,
        codec: Codec[Any],
        handle_batch: Callable[[list[Any]], Failures | None],
        metrics: Metrics,
        topic: str,
        group: str,
        max_payload_bytes: int,
        batch_size: int,
        batch_timeout_s: float,
        dead_letters: tuple[ConfirmedProducer, str] | None,
        output: tuple[ConfirmedProducer, str] | None,
        latency_sample_every: int = 1,
    ) -> None:
        self._consumer = consumer
        self._codec = codec
        self._handle_batch = handle_batch
        self._m = metrics
        self._topic = topic
        self._group = group
        self._limit = max_payload_bytes
        self._batch_size = batch_size
        self._timeout = batch_timeout_s
        self._dead_letters = dead_letters
        self._output = output
        self._decode_batch = (
            self._decode_auto if isinstance(codec, AutoCodec) else self._decode_plain
        )
        self._every = latency_sample_every
        self._phase = 0
        self.processed = 0
        self.heartbeat = time.monotonic()

    def run(self, should_stop: Callable[[], bool], tick: Callable[[], None]) -> None:
        """Process batches until `should_stop()`; call `tick()` after each."""
        consume, process = self._consumer.consume, self.process
        size, timeout = self._batch_size, self._timeout
        while not should_stop():
            msgs = consume(size, timeout)
            if msgs:
                process(msgs)
            self.heartbeat = time.monotonic()
            tick()

    def process(self, msgs: Sequence[KafkaMessage]) -> None:
        """Handle one batch completely, then store its offsets.

        Decode and handle times are this thread's CPU time, not wall time: on a
        shared machine a preempted thread would otherwise charge the codec for time
        it spent waiting for a core.
        """
        t0 = thread_time()
        objs, nbytes, rejected = self._decode_batch(msgs)
        t1 = thread_time()
        failures = self._handle_batch(objs) if objs else None
        t2 = thread_time()
        kept = msgs if rejected is None else _kept(msgs, rejected)
        if self._output is not None:
            self._write_output(kept, objs, failures)
        errors = 0
        if rejected is not None or failures is not None:
            errors = self._reject(msgs, kept, rejected, failures)
        self._confirm()
        self._store(msgs if rejected is None else _stored(msgs, rejected))
        self._observe(msgs, len(objs), nbytes, t1 - t0, t2 - t1, failures, errors)

    # -- decoding ---------------------------------------------------------------------

    def _decode_plain(
        self, msgs: Sequence[KafkaMessage]
    ) -> tuple[list[Any], int, Rejected | None]:
        decode, limit = self._codec.decode_unchecked, self._limit
        objs: list[Any] = []
        append = objs.append
        nbytes = 0
        rejected: Rejected | None = None
        for m in msgs:
            value = m.value()
            try:
                if value is None or m.error() is not None:
                    raise _Unusable
                size = len(value)
                if size > limit:
                    raise _Unusable
                append(decode(value))
                nbytes += size
            except MemoryError:
                raise
            except Exception as exc:
                rejected = rejected or []
                index = len(objs) + len(rejected)
                rejected.append((index, self._why(m, value, exc), "decode"))
        return objs, nbytes, rejected

    def _decode_auto(
        self, msgs: Sequence[KafkaMessage]
    ) -> tuple[list[Any], int, Rejected | None]:
        codec_for, limit = self._auto_codec().codec_for, self._limit
        objs: list[Any] = []
        append = objs.append
        nbytes = 0
        rejected: Rejected | None = None
        for m in msgs:
            value = m.value()
            try:
                if value is None or m.error() is not None:
                    raise _Unusable
                size = len(value)
                if size > limit:
                    raise _Unusable
                content_type = None
                for key, header in m.headers() or ():
                    if key == CONTENT_TYPE_HEADER:
                        content_type = header
                        break
                append(codec_for(content_type).decode_unchecked(value))
                nbytes += size
            except MemoryError:
                raise
            except Exception as exc:
                rejected = rejected or []
                index = len(objs) + len(rejected)
                rejected.append((index, self._why(m, value, exc), "decode"))
        return objs, nbytes, rejected

    def _auto_codec(self) -> AutoCodec:
        assert isinstance(self._codec, AutoCodec)  # noqa: S101 (chosen at construction)
        return self._codec

    def _why(self, m: KafkaMessage, value: bytes | None, exc: Exception) -> Exception:
        """The error a rejected message is recorded with (slow path only)."""
        name = self._codec.name
        if m.error() is not None:
            return _ConsumerError(m.error())
        if value is None:
            return _empty(name)
        if not isinstance(exc, _Unusable):
            return as_decode_error(name, exc)
        return _oversize(name, len(value), self._limit)

    # -- poison, output and confirmation ----------------------------------------------

    def _reject(
        self,
        msgs: Sequence[KafkaMessage],
        kept: Sequence[KafkaMessage],
        rejected: Rejected | None,
        failures: Failures | None,
    ) -> int:
        """Dead-letter the batch's poison messages; return its consumer errors."""
        poison: list[tuple[KafkaMessage, Exception, str]] = []
        consumer_errors = 0
        for i, exc, stage in rejected or ():
            if isinstance(exc, _ConsumerError):
                consumer_errors += 1
                self._consumer_error(exc.error)
            else:
                poison.append((msgs[i], exc, stage))
        poison += [
            (kept[i], _as_logic_error(exc), "process") for i, exc in failures or ()
        ]
        if not poison:
            return consumer_errors
        if self._dead_letters is None:
            first = poison[0][0]
            raise FatalError(
                f"poison message at {first.topic()}[{first.partition()}]"
                f"@{first.offset()} with on_decode_error=fail"
            )
        producer, topic = self._dead_letters
        codec = self._codec.name
        for m, exc, stage in poison:
            producer.produce(
                topic,
                key=m.key(),
                value=m.value(),
                headers=dead_letter_headers(
                    m, exc, codec=codec, group=self._group, stage=stage
                ),
                timestamp=m.timestamp()[1],
            )
            reason = getattr(exc, "reason", "logic")
            self._m.dead_letters(reason).inc()
            log.warning(
                "dead_lettered",
                topic=m.topic(),
                partition=m.partition(),
                offset=m.offset(),
                reason=reason,
                stage=stage,
                error=str(exc)[:200],
            )
        return consumer_errors

    def _write_output(
        self,
        kept: Sequence[KafkaMessage],
        objs: list[Any],
        failures: Failures | None,
    ) -> None:
        assert self._output is not None  # noqa: S101 (checked by the caller)
        producer, topic = self._output
        encode = self._codec.encode
        content_type = (CONTENT_TYPE_HEADER, self._codec.content_type.encode())
        failed = {i for i, _ in failures} if failures else ()
        for i, (m, obj) in enumerate(zip(kept, objs, strict=True)):
            if i in failed:
                continue
            headers = [h for h in m.headers() or () if h[0] != CONTENT_TYPE_HEADER]
            headers.append(content_type)
            producer.produce(topic, key=m.key(), value=encode(obj), headers=headers)

    def _confirm(self) -> None:
        for writer in (self._dead_letters, self._output):
            if writer is not None and writer[0].pending:
                writer[0].confirm()

    def _consumer_error(self, err: Any) -> None:
        self._m.consumer_errors.labels(err.name()).inc()
        if err.fatal():
            raise FatalError(f"fatal consumer error: {err.name()}: {err.str()}")
        log.error("consumer_error", code=err.name(), error=err.str())

    # -- offsets and metrics ----------------------------------------------------------

    def _store(self, msgs: Sequence[KafkaMessage]) -> None:
        # One topic per worker, and offsets rise within a partition in a batch: the
        # last offset seen per partition is the highest.
        last: dict[int | None, int | None] = {}
        for m in msgs:
            last[m.partition()] = m.offset()
        topic = self._topic
        offsets = [
            TopicPartition(topic, p, o + 1)
            for p, o in last.items()
            if o is not None and p is not None
        ]
        if not offsets:
            return
        try:
            self._consumer.store_offsets(offsets=offsets)
        except KafkaException as exc:
            # Raised only if no partition could be stored: they were all revoked
            # while the batch ran. Their new owner processes them again.
            if exc.args[0].code() != KafkaError._STATE:
                raise
            log.warning("offsets_not_stored", partitions=len(offsets))

    def _observe(
        self,
        msgs: Sequence[KafkaMessage],
        n_ok: int,
        nbytes: int,
        decode_s: float,
        handle_s: float,
        failures: Failures | None,
        consumer_errors: int,
    ) -> None:
        m = self._m
        n = len(msgs) - consumer_errors
        n_logic = len(failures) if failures else 0
        n_decode = n - n_ok
        if n_ok:
            m.decode_seconds.observe_n(decode_s / n, n)
            m.handle_seconds.observe_n(handle_s / n_ok, n_ok)
            m.ok.inc(n_ok - n_logic)
        if n_decode:
            m.decode_errors.inc(n_decode)
        if n_logic:
            m.logic_errors.inc(n_logic)
        m.bytes.inc(nbytes)
        m.batch_messages.observe(n)
        every = self._every
        if every == 1:
            m.e2e_latency.observe_many(_latencies(msgs, time_ns()))
        else:
            # Every k-th message of the stream (the phase carries across batches),
            # so each message is equally likely to be timed: no bias to any batch.
            phase = self._phase
            m.e2e_latency.observe_many(_latencies(msgs[phase::every], time_ns()))
            self._phase = (phase - len(msgs)) % every
        self.processed += n


def _latencies(msgs: Sequence[KafkaMessage], now_ns: int) -> list[float]:
    """Seconds from each message's intended send time to `now_ns`."""
    out = []
    for m in msgs:
        sent = 0
        for key, value in m.headers() or ():
            if key == SENT_HEADER and value is not None:
                sent = int(value)
                break
        if not sent:
            sent = m.timestamp()[1] * 1_000_000
        out.append((now_ns - sent) * 1e-9)
    return out


def _as_logic_error(exc: Exception) -> Exception:
    """A logic failure as `LogicError`; a foreign exception's text is not kept."""
    if isinstance(exc, LogicError):
        return exc
    error = LogicError(type(exc).__name__)
    error.__cause__ = exc
    return error


def _kept(msgs: Sequence[KafkaMessage], rejected: Rejected) -> list[KafkaMessage]:
    """The messages that decoded, aligned with the decoded objects."""
    gone = {i for i, _, _ in rejected}
    return [m for i, m in enumerate(msgs) if i not in gone]


def _stored(msgs: Sequence[KafkaMessage], rejected: Rejected) -> list[KafkaMessage]:
    """Every message but consumer errors (which carry no offset of a record)."""
    errors = {i for i, exc, _ in rejected if isinstance(exc, _ConsumerError)}
    return [m for i, m in enumerate(msgs) if i not in errors] if errors else list(msgs)


class _Unusable(Exception):
    """Raised in the decode loop for a message that cannot be decoded at all."""


class _ConsumerError(Exception):
    """A consumer-level error delivered in place of a message."""

    def __init__(self, error: Any) -> None:
        super().__init__(error.str())
        self.error = error
