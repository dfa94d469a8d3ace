"""Wiring and lifecycle: builds the consumer, codec, metrics and logger; runs the loop.

Shutdown (SIGTERM or the first SIGINT): the loop finishes its batch, stores its
offsets, and `close()` commits them and leaves the group; exit status 0. A second
SIGINT exits at once. A fatal error in a batch (a dead-letter write that is never
acknowledged, a fatal consumer error in place of a message) stops the loop without
storing that batch; a fatal client error (`error_cb`) stops it after the current
batch. Either way the exit status is 1, so a supervisor restarts the worker.
"""

from __future__ import annotations

import gc
import signal
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from types import FrameType
from typing import Any, Protocol, TypeAlias

import structlog
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from prometheus_client import CollectorRegistry

from service import __version__
from service.codecs import get_codec
from service.codecs.protobuf_codec import protobuf_backend
from service.config import Settings
from service.consumer import BatchLoop
from service.control import ControlPlane
from service.delivery import ConfirmedProducer
from service.errors import ConfigError, DeliveryError, FatalError
from service.handlers import Handler
from service.histogram import quantile
from service.metrics import Metrics
from service.poison import PoisonHandler
from service.types import KafkaConsumer, KafkaProducer

log = structlog.get_logger(__name__)

_STALL_S = 60.0
"""/healthz fails when the loop has not come round for this long (consume() is
bounded by the batch timeout, so a live loop comes round many times a second)."""


class WorkerConsumer(KafkaConsumer, Protocol):
    """The parts of `confluent_kafka.Consumer` the worker calls beyond the loop's."""

    def subscribe(
        self,
        topics: list[str],
        on_assign: Any = ...,
        on_revoke: Any = ...,
        on_lost: Any = ...,
    ) -> None: ...
    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = ..., cached: bool = ...
    ) -> tuple[int, int]: ...
    def close(self) -> None: ...


ConsumerFactory: TypeAlias = Callable[[dict[str, Any]], WorkerConsumer]
"""Builds the consumer from librdkafka settings (`confluent_kafka.Consumer`)."""

ProducerFactory: TypeAlias = Callable[[dict[str, Any]], KafkaProducer]
"""Builds the dead-letter and output producer (`confluent_kafka.Producer`)."""


class Worker:
    """One consumer process: its Kafka clients, loop, metrics and control plane.

    Args:
        settings: the validated configuration.
        consumer_factory: builds the consumer from its librdkafka settings; tests
            pass a fake.
        producer_factory: builds the producer the same way.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        consumer_factory: ConsumerFactory = Consumer,
        producer_factory: ProducerFactory = Producer,
    ) -> None:
        self.settings = settings
        self._consumer_factory = consumer_factory
        self._producer_factory = producer_factory
        self.registry = CollectorRegistry()
        codec_settings = settings.codec
        self.codec = get_codec(
            codec_settings.name,
            codec_settings.schema_,
            auto_json=codec_settings.auto_json,
            auto_output=codec_settings.auto_output,
        )
        self.metrics = Metrics(
            self.registry, codec=codec_settings.name, schema=codec_settings.schema_
        )
        self.assigned: set[int] = set()
        self._stop = threading.Event()
        self._lag_children: dict[int, Any] = {}
        self._next_tick = 0.0
        self._lag_total = 0
        self._summary = _Summary(self.metrics)
        self._fatal: KafkaError | None = None
        self.consumer: WorkerConsumer | None = None
        self.loop: BatchLoop | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def run(self) -> int:
        """Run until stopped; return the process exit status."""
        s = self.settings
        with ExitStack() as stack:
            consumer = self.consumer = self._consumer()
            stack.callback(self._close_consumer)
            producer = self._producer()
            if producer is not None:
                stack.callback(producer.flush, s.processing.delivery_timeout_s)
            control = ControlPlane(
                self.registry,
                s.metrics.host,
                s.metrics.port,
                ready=lambda: bool(self.assigned),
                healthy=self._healthy,
            )
            port = control.start()
            stack.callback(control.stop)
            self.loop = self._build_loop(consumer, producer)
            consumer.subscribe(
                [s.consumer.topic],
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_lost,
            )
            log.info(
                "worker_started",
                version=__version__,
                metrics_port=port,
                protobuf_backend=protobuf_backend(),
                config=s.masked(),
            )
            # Everything built so far lives as long as the process: move it out of
            # the collector's sight so full collections scan only batch garbage.
            gc.freeze()
            stack.callback(self.metrics.gc.install())
            try:
                self.loop.run(self._stop.is_set, self._tick)
            except (FatalError, DeliveryError) as exc:
                log.error("worker_failed", error=str(exc))
                return 1
            if self._fatal is not None:
                # librdkafka reported the client unusable (see the module docstring).
                log.error("worker_failed", error=self._fatal.str())
                return 1
            self._summary.log(self.loop.processed, final=True)
        return 0

    def stop(self) -> None:
        """Ask the loop to stop after its current batch (signal-safe)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """True once a stop was asked for (signal, fatal client error, `stop()`)."""
        return self._stop.is_set()

    def install_signal_handlers(self) -> None:
        """SIGTERM and a first SIGINT stop gracefully; a second SIGINT exits now."""

        def graceful(signum: int, _frame: FrameType | None) -> None:
            if signum == signal.SIGINT and self._stop.is_set():
                raise KeyboardInterrupt
            log.info("shutdown_requested", signal=signal.Signals(signum).name)
            self.stop()

        signal.signal(signal.SIGTERM, graceful)
        signal.signal(signal.SIGINT, graceful)

    # -- construction ---------------------------------------------------------------------

    def _consumer(self) -> WorkerConsumer:
        conf = self.settings.consumer_config(plaintext_secrets=True)
        conf["error_cb"] = self._on_client_error
        conf["on_commit"] = self._on_commit
        try:
            return self._consumer_factory(conf)
        except KafkaException as exc:
            raise ConfigError(f"config error: kafka: {exc.args[0].str()}") from None

    def _producer(self) -> KafkaProducer | None:
        p = self.settings.processing
        if p.on_decode_error != "dead_letter" and p.output_topic is None:
            return None
        conf = self.settings.producer_config(plaintext_secrets=True)
        conf["message.timeout.ms"] = int(p.delivery_timeout_s * 1000)
        conf["message.max.bytes"] = max(
            1_000_000, self.settings.codec.max_payload_bytes + 65_536
        )
        return self._producer_factory(conf)

    def _build_loop(
        self, consumer: WorkerConsumer, producer: KafkaProducer | None
    ) -> BatchLoop:
        s = self.settings
        p = s.processing
        confirmed = (
            None
            if producer is None
            else ConfirmedProducer(producer, p.delivery_timeout_s)
        )
        dead_letters = None
        if p.on_decode_error == "dead_letter" and confirmed is not None:
            dead_letters = (confirmed, p.dlq_topic_for(s.consumer.topic))
        output = None
        if p.output_topic is not None and confirmed is not None:
            output = (confirmed, p.output_topic)
        poison = PoisonHandler(
            self.metrics,
            codec=s.codec.name,
            group=s.consumer.group_id,
            dead_letters=dead_letters,
        )
        return BatchLoop(
            consumer,
            codec=self.codec,
            step=Handler(s.codec.schema_, p.logic, p.work_us).step,
            metrics=self.metrics,
            poison=poison,
            output=output,
            max_payload_bytes=s.codec.max_payload_bytes,
            batch_size=p.batch_size,
            batch_timeout_s=p.batch_timeout_ms / 1000.0,
            latency_sample_every=s.metrics.latency_sample_every,
        )

    # -- callbacks (run inside consume(), on the loop's thread) --------------------------

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        topic = self.settings.consumer.topic
        for tp in partitions:
            self.assigned.add(tp.partition)
            self._lag_children[tp.partition] = self.metrics.consumer_lag.labels(
                topic, str(tp.partition)
            )
        self.metrics.assigned_partitions.set(len(self.assigned))
        log.info("partitions_assigned", partitions=sorted(self.assigned))

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        # Every batch is handled and stored before consume() returns to librdkafka,
        # so auto-commit on revoke commits exactly what was processed.
        self._forget(partitions)
        log.info("partitions_revoked", partitions=[tp.partition for tp in partitions])

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        self._forget(partitions)
        log.warning("partitions_lost", partitions=[tp.partition for tp in partitions])

    def _forget(self, partitions: list[Any]) -> None:
        topic = self.settings.consumer.topic
        for tp in partitions:
            self.assigned.discard(tp.partition)
            if self._lag_children.pop(tp.partition, None) is not None:
                self.metrics.consumer_lag.remove(topic, str(tp.partition))
        self.metrics.assigned_partitions.set(len(self.assigned))

    def _on_commit(self, err: KafkaError | None, partitions: list[Any]) -> None:
        # Background commits fail silently unless checked: a failed commit means a
        # restart would reprocess more than it should (never lose: offsets only grow).
        if err is not None and err.code() == KafkaError._NO_OFFSET:
            return  # an idle auto-commit: nothing new was stored
        failed = [tp for tp in partitions if tp.error is not None]
        if err is None and not failed:
            return
        code = err.name() if err is not None else failed[0].error.name()
        self.metrics.consumer_errors.labels(f"commit:{code}").inc()
        log.warning(
            "commit_failed", code=code, partitions=[tp.partition for tp in failed]
        )

    def _on_client_error(self, err: KafkaError) -> None:
        self.metrics.consumer_errors.labels(err.name()).inc()
        log.warning("kafka_client_error", code=err.name(), error=err.str())
        if err.fatal():
            self._fatal = err
            self.stop()

    # -- periodic work (once a second, between batches) ----------------------------------

    def _tick(self) -> None:
        now = time.monotonic()
        if now < self._next_tick:
            return
        self._next_tick = now + 1.0
        self._update_lag()
        assert self.loop is not None  # noqa: S101 (built before the loop runs)
        if self._summary.due(now, self.settings.metrics.summary_interval_s):
            self._summary.log(self.loop.processed, lag=self._lag_total)

    def _update_lag(self) -> None:
        """Set each partition's lag gauge; keep their sum for the summary line."""
        total = 0
        consumer = self.consumer
        if self._lag_children and consumer is not None:
            topic = self.settings.consumer.topic
            tps = [TopicPartition(topic, p) for p in self._lag_children]
            for tp in consumer.position(tps):
                child = self._lag_children.get(tp.partition)
                if child is None or tp.offset < 0:
                    continue
                _low, high = consumer.get_watermark_offsets(tp, cached=True)
                if high >= 0:
                    lag = max(0, high - tp.offset)
                    child.set(lag)
                    total += lag
        self._lag_total = total

    def _healthy(self) -> bool:
        loop = self.loop
        return loop is not None and time.monotonic() - loop.heartbeat < _STALL_S

    def _close_consumer(self) -> None:
        if self.consumer is not None:
            self.consumer.close()  # commits the stored offsets and leaves the group
            log.info("consumer_closed")


class _Summary:
    """Periodic summary lines: rate, CPU, p99 over the last interval."""

    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics
        self._t = time.monotonic()
        self._cpu = time.process_time()
        self._processed = 0
        self._counts, _ = metrics.e2e_latency.snapshot()

    def due(self, now: float, interval: float) -> bool:
        return now - self._t >= interval

    def log(
        self, processed: int, *, lag: int | None = None, final: bool = False
    ) -> None:
        now, cpu = time.monotonic(), time.process_time()
        wall = max(now - self._t, 1e-9)
        counts, _ = self._m.e2e_latency.snapshot()
        delta = [c - p for c, p in zip(counts, self._counts, strict=True)]
        log.info(
            "worker_final" if final else "worker_summary",
            processed=processed,
            rate=round((processed - self._processed) / wall, 1),
            cpu_pct=round(100 * (cpu - self._cpu) / wall, 1),
            e2e_p99_ms=_quantile_ms(delta, self._m.e2e_latency.bounds, 0.99),
            lag=lag,
        )
        self._t, self._cpu, self._processed, self._counts = now, cpu, processed, counts


def _quantile_ms(counts: list[int], bounds: list[float], q: float) -> float | None:
    """Quantile `q` in ms (None: no observations; inf: above the top bucket)."""
    value = quantile(bounds, counts, q)
    return None if value is None else round(value * 1000, 3)
