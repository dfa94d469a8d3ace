"""Shadow decoding: a second codec checks a sample of live messages, off the hot path."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

import structlog
from confluent_kafka import KafkaError
from prometheus_client import CollectorRegistry

from codec import Codec, CodecName, get_codec
from schemas.errors import ConfigError
from schemas.registry import SchemaForms
from service.kafka.headers import CONTENT_TYPE, last_header
from service.kafka.protocols import Headers, KafkaMessage, KafkaProducer
from service.shadow.verdict import Comparer, Verdict, shape_of
from service.telemetry.log_setup import RateLimiter, kafka_logger
from service.telemetry.metrics import SHADOW_OUTCOMES, ShadowMetrics

log = structlog.get_logger(__name__)

SHADOW_PREFIX: Final = "x-shadow-"
SAMPLES_PER_S: Final = 1.0
"""Disagreement samples written per second at most, after a burst of `SAMPLE_BURST`:
enough to see what differs, never a copy of a topic whose every message differs."""
SAMPLE_BURST: Final = 10
LOG_EVERY_S: Final = 60.0
"""A failing shadow logs at most one line per kind this often (it counts every one)."""
CLOSE_TIMEOUT_S: Final = 2.0
"""Samples still queued at shutdown get this long: best effort, never a slow stop."""
_MAX_PATHS: Final = 10
_MAX_HEADER: Final = 200


class SampleWriter:
    """Writes disagreement samples to `<topic>.shadow`: rate limited, fire and forget.

    A sample is the original key, value and headers plus `x-shadow-*` headers.
    Nothing waits for an acknowledgement and nothing gates an offset: a full local
    queue drops the sample, a failed write is counted, both never raise.

    Args:
        producer: a producer of its own (never flushed by the batch loop).
        topic: where samples go.
        metrics: the shadow's metrics.
        per_s: samples per second at most, after a burst of `burst`.
        burst: samples that may go out back to back.
        clock: monotonic seconds (tests pass a fake).
    """

    def __init__(
        self,
        producer: KafkaProducer,
        topic: str,
        metrics: ShadowMetrics,
        *,
        per_s: float = SAMPLES_PER_S,
        burst: int = SAMPLE_BURST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._producer = producer
        self.topic = topic
        self._results = metrics.samples
        self._per_s, self._burst, self._clock = per_s, float(burst), clock
        self._tokens = float(burst)
        self._last = clock()
        self.pending = 0

    def offer(self, m: KafkaMessage, headers: Headers) -> None:
        """Write `m` with `headers` unless the rate limit or a full queue says no."""
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._per_s)
        self._last = now
        if self._tokens < 1.0:
            self._results["rate_limited"].inc()
            return
        self._tokens -= 1.0
        try:
            self._producer.produce(
                self.topic,
                key=m.key(),
                value=m.value(),
                headers=headers,
                on_delivery=self._delivered,
            )
        except BufferError:
            self._results["queue_full"].inc()
            return
        except Exception:  # e.g. too large for the client: a count, never a crash
            self._results["failed"].inc()
            return
        self.pending += 1

    def _delivered(self, err: KafkaError | None, _msg: Any) -> None:
        self.pending -= 1
        self._results["failed" if err is not None else "written"].inc()

    def serve(self) -> None:
        """Serve delivery reports without waiting (once per batch)."""
        if self.pending:
            self._producer.poll(0)

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Give queued samples `timeout_s` to go out (at shutdown)."""
        if self.pending:
            self._producer.flush(timeout_s)


def sample_headers(
    m: KafkaMessage, verdict: Verdict, *, primary: str, shadow: str
) -> Headers:
    """The original headers plus both verdicts; never a payload value."""
    headers: Headers = list(m.headers() or ())
    extra = {
        "codec": shadow,
        "primary": primary,
        "outcome": verdict.outcome,
        "mode": verdict.mode,
        "paths": ",".join(verdict.paths[:_MAX_PATHS]),
        "error-type": verdict.error_type,
        "error-path": verdict.error_path,
        "error-reason": verdict.error_reason,
        "topic": m.topic() or "",
        "partition": str(m.partition()),
        "offset": str(m.offset()),
        "timestamp": str(m.timestamp()[1]),
    }
    headers += [
        (SHADOW_PREFIX + k, v[:_MAX_HEADER].encode()) for k, v in extra.items() if v
    ]
    return headers


class Shadow:
    """The per-batch hook: shadow-decode every k-th message, count, sample.

    Runs after the batch's offsets are stored and its metrics observed, so the live
    path's offsets, metrics and dead letters never depend on it; any failure of its
    own is counted in `worker_shadow_errors_total` and logged (rate limited), never
    raised. Its time is counted in `worker_shadow_seconds_total`, apart from the
    primary's decode metrics. Messages with no value, over `max_payload_bytes`, or
    whose content-type names no codec are the live path's business and left out.

    Args:
        comparer: decodes and compares one message.
        metrics: the shadow's metrics.
        sample_every: shadow every k-th message of the stream (1: all).
        max_payload_bytes: larger values are not decoded (the live limit).
        samples: where disagreement samples go; None for nowhere.
        primary: the live codec's key (a sample header).
        shadow: the shadow codec's key (a sample header).
    """

    def __init__(
        self,
        comparer: Comparer,
        metrics: ShadowMetrics,
        *,
        sample_every: int,
        max_payload_bytes: int,
        samples: SampleWriter | None,
        primary: str,
        shadow: str,
    ) -> None:
        self._comparer = comparer
        self._m = metrics
        self._every = sample_every
        self._phase = 0
        self._limit = max_payload_bytes
        self._samples = samples
        self._names = {"primary": primary, "shadow": shadow}
        self._log_limit = RateLimiter(LOG_EVERY_S)

    def __call__(self, msgs: Sequence[KafkaMessage]) -> None:
        """Shadow this batch's share of the sample; never raises."""
        # Every k-th message of the stream: the phase carries across batches.
        every, phase = self._every, self._phase
        self._phase = (phase - len(msgs)) % every
        sampled = msgs[phase::every] if every > 1 else msgs
        if not sampled and (self._samples is None or not self._samples.pending):
            return
        started = time.perf_counter()
        try:
            if sampled:
                self._run(sampled)
            if self._samples is not None:
                self._samples.serve()
        except Exception as exc:
            self._failed(exc)
        self._m.seconds.inc(time.perf_counter() - started)

    def close(self) -> None:
        """Give queued samples a moment to go out; never raises."""
        try:
            if self._samples is not None:
                self._samples.close()
        except Exception as exc:
            self._failed(exc)

    def _run(self, sampled: Sequence[KafkaMessage]) -> None:
        compare, limit, samples = self._comparer.compare, self._limit, self._samples
        counts = dict.fromkeys(SHADOW_OUTCOMES, 0)
        paths: dict[str, int] = {}
        for m in sampled:
            value = m.value()
            if m.error() is not None or value is None or len(value) > limit:
                continue
            try:
                verdict = compare(value, last_header(m.headers(), CONTENT_TYPE))
                if verdict is None:
                    continue
                counts[verdict.outcome] += 1
                for path in verdict.paths:
                    paths[path] = paths.get(path, 0) + 1
                if samples is not None and verdict.outcome != "agree":
                    samples.offer(m, sample_headers(m, verdict, **self._names))
            except Exception as exc:
                self._failed(exc)
        for outcome, n in counts.items():
            if n:
                self._m.outcomes[outcome].inc(n)
        for path, n in paths.items():
            self._m.difference(path).inc(n)

    def _failed(self, exc: Exception) -> None:
        self._m.errors.inc()
        kind = f"{type(exc).__module__}.{type(exc).__qualname__}"
        others = self._log_limit.allow(kind)
        if others is not None:
            # The type only: an exception's text may quote the payload.
            log.warning("shadow_failed", error_type=kind, others_since_last=others)


class _CodecSettings(Protocol):
    @property
    def shadow(self) -> CodecName | None: ...
    @property
    def shadow_sample_every(self) -> int: ...
    @property
    def max_payload_bytes(self) -> int: ...
    @property
    def forms(self) -> SchemaForms: ...


class _ConsumerSettings(Protocol):
    @property
    def topic(self) -> str: ...


class WorkerSettings(Protocol):
    """What the shadow reads of the worker's settings (`service.settings.worker.Settings`)."""

    @property
    def codec(self) -> _CodecSettings: ...
    @property
    def consumer(self) -> _ConsumerSettings: ...
    def producer_config(self, *, plaintext_secrets: bool = ...) -> dict[str, Any]: ...


def shadow_for(
    settings: WorkerSettings,
    codec: Codec[Any],
    registry: CollectorRegistry,
    producer_factory: Callable[[dict[str, Any]], KafkaProducer],
) -> Shadow | None:
    """The worker's shadow hook (`--shadow-codec`); None without a shadow codec.

    Samples go to `<topic>.shadow`, which the start-up check looks for (or creates).
    """
    c = settings.codec
    if c.shadow is None:
        return None
    return build_shadow(
        codec,
        c.shadow,
        c.forms,
        registry=registry,
        sample_every=c.shadow_sample_every,
        max_payload_bytes=c.max_payload_bytes,
        topic=f"{settings.consumer.topic}.shadow",
        producer_factory=producer_factory,
        producer_config=settings.producer_config(plaintext_secrets=True),
    )


def build_shadow(
    primary: Codec[Any],
    shadow_name: CodecName,
    schema: SchemaForms,
    *,
    registry: CollectorRegistry,
    sample_every: int,
    max_payload_bytes: int,
    topic: str,
    producer_factory: Callable[[dict[str, Any]], KafkaProducer],
    producer_config: Mapping[str, Any],
    samples_per_s: float = SAMPLES_PER_S,
    sample_burst: int = SAMPLE_BURST,
) -> Shadow:
    """The shadow hook for `BatchLoop(shadow=...)`, with its metrics and producer.

    Args:
        primary: the live codec.
        shadow_name: the shadow codec's key (not `auto`).
        schema: the forms the live codec is bound to (`schemas.registry.resolve`).
        registry: the worker's registry (the shadow's metrics are added to it).
        sample_every: shadow every k-th message.
        max_payload_bytes: the live limit; larger values are not shadowed.
        topic: where disagreement samples go (`<topic>.shadow`).
        producer_factory: builds the samples' own producer from librdkafka settings.
        producer_config: the worker's producer settings, adapted here.
        samples_per_s: disagreement samples written per second at most.
        sample_burst: samples that may go out back to back.

    Raises:
        ConfigError: for the `auto` shadow codec.
    """
    if shadow_name == "auto":
        raise ConfigError(
            "config error: worker.codec.shadow = 'auto': a shadow decodes with one "
            "codec; choose a codec key other than auto"
        )
    shadow = get_codec(shadow_name, schema)
    metrics = ShadowMetrics(registry, codec=primary.name, shadow=shadow.name)
    conf = shadow_producer_config(producer_config, max_payload_bytes)
    writer = SampleWriter(
        producer_factory(conf), topic, metrics, per_s=samples_per_s, burst=sample_burst
    )
    return Shadow(
        Comparer(primary, shadow, shape_of(schema)),
        metrics,
        sample_every=sample_every,
        max_payload_bytes=max_payload_bytes,
        samples=writer,
        primary=primary.name,
        shadow=shadow.name,
    )


def shadow_producer_config(
    base: Mapping[str, Any], max_payload_bytes: int
) -> dict[str, Any]:
    """The samples' producer: bounded queue, short timeout, no fatal errors.

    Its client errors reach the log through librdkafka's own lines (no `error_cb`):
    the consumer already reports the cluster's state, and nothing here may stop
    the worker.
    """
    return {
        **base,
        # An idempotent producer can fail fatally; samples need no ordering.
        "enable.idempotence": False,
        "message.timeout.ms": 10_000,
        # A sample holds a value up to max_payload_bytes: at most 64 MiB queued,
        # beyond that a sample is dropped and counted (queue_full).
        "queue.buffering.max.kbytes": 65_536,
        "queue.buffering.max.messages": 1_000,
        "message.max.bytes": max(1_000_000, max_payload_bytes + 65_536),
        "logger": kafka_logger(),
    }
