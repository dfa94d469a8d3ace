"""Wiring and lifecycle: builds the consumer, codec, metrics and logger; runs the loop.

Shutdown (SIGTERM or the first SIGINT): the loop finishes its batch, stores its
offsets, and `close()` commits them and leaves the group, all within one budget
(`shutdown_timeout_s` from the signal, `service.loop.shutdown_budget`; a batch whose writes a
stalled broker does not acknowledge is left unstored); exit status 0. A second
SIGINT exits at once. Poison, a missing DLQ topic or a stalled broker never stop
the worker: a batch whose writes are not confirmed is rewound, paused and retried (`service.delivery.held_partitions`). A fatal consumer
error in place of a message stops the loop without storing that batch; a fatal
client error (`error_cb`) stops it after the current batch. Either way the exit
status is 1, so a supervisor restarts the worker.

Start-up, before any consumer exists: the control plane binds its port, the schema
registry is reached (`service.settings.registry_start`), then the input,
dead-letter and output topics are checked (or created, `--create-topics`).
A port in use or a missing topic is a configuration error (exit status 2); a
cluster that does not answer is reported after `CONNECT_TIMEOUT_S` and every
`REMIND_S` after that while the worker keeps trying; one that refuses this client's
credentials, certificates or protocol ends it (`service.kafka.security_check`, exit status 1).
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from functools import partial
from typing import Any, TypeAlias

import structlog
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from prometheus_client import CollectorRegistry

from codec.protobuf_codec import protobuf_backend
from schemas.errors import ConfigError, DeliveryError, FatalError
from service import __version__
from service.delivery.batch_writes import BatchWrites, batch_writes
from service.delivery.gated_writes import writer_config
from service.kafka.admin_topics import TopicAdmin, Topics, await_topics
from service.kafka.group_lag import watch_group
from service.kafka.protocols import KafkaProducer, WorkerConsumer
from service.kafka.security_check import check_access
from service.lifecycle import signals
from service.loop.async_path.loop import AsyncLoop
from service.loop.batch_loop import BatchLoop
from service.loop.partition_starts import start_uncommitted
from service.loop.shutdown_budget import Shutdown
from service.loop.worker_loops import LoopChoice
from service.settings.registry_start import prepare_worker
from service.settings.worker import Settings
from service.shadow.sampler import Shadow, shadow_for
from service.telemetry.consumer_lag import LagGauges
from service.telemetry.control_server import ControlPlane
from service.telemetry.log_setup import KafkaErrors, kafka_logger
from service.telemetry.metrics import Metrics
from service.telemetry.summary_line import Summary

log = structlog.get_logger(__name__)

_STALL_S = 60.0
"""/healthz fails when the loop has not come round for this long (consume() is
bounded by the batch timeout, so a live loop comes round many times a second)."""
_ASSIGNOR = "partition.assignment.strategy"
READY_STALL_S = 3.0
"""/readyz fails when the loop has not come round for this long plus the batch
timeout: a batch whose writes wait for acknowledgements (a stalled broker) makes
the worker unready within seconds, long before the delivery timeout."""


ConsumerFactory: TypeAlias = Callable[[dict[str, Any]], WorkerConsumer]
"""Builds the consumer from librdkafka settings (`confluent_kafka.Consumer`)."""

ProducerFactory: TypeAlias = Callable[[dict[str, Any]], KafkaProducer]
"""Builds the dead-letter and output producer (`confluent_kafka.Producer`)."""

AdminFactory: TypeAlias = Callable[[dict[str, Any]], Topics]
"""Builds the start-up topic check's admin client (`service.kafka.admin_topics.TopicAdmin`)."""


class Worker:
    """One consumer process: its Kafka clients, loop, metrics and control plane.

    Args:
        settings: the validated configuration.
        consumer_factory: builds the consumer from its librdkafka settings; tests
            pass a fake.
        producer_factory: builds the producer the same way.
        admin_factory: builds the admin client of the start-up topic check.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        consumer_factory: ConsumerFactory = Consumer,
        producer_factory: ProducerFactory = Producer,
        admin_factory: AdminFactory = TopicAdmin,
    ) -> None:
        self.settings = settings
        self._consumer_factory = consumer_factory
        self._producer_factory = producer_factory
        self._admin_factory = admin_factory
        self.errors = KafkaErrors(settings.kafka.bootstrap_servers)
        self.registry = CollectorRegistry()
        codec_settings = settings.codec
        self.codec = settings.build_codec()
        self.metrics = Metrics(
            self.registry, codec=codec_settings.name, schema=codec_settings.schema_
        )
        self.assigned: set[int] = set()
        self._stop = threading.Event()
        self._shutdown = Shutdown(settings.processing.shutdown_timeout_s)
        self._subscribed_ms = 0
        self._lag = LagGauges(
            self.metrics, settings.consumer.topic, settings.consumer.auto_offset_reset
        )
        self._next_tick = 0.0
        self._summary = Summary(self.metrics)
        self._processed_seen = 0
        self._waiting_for_kafka = False
        self._fatal: KafkaError | None = None
        self._admin: Topics | None = None
        self.consumer: WorkerConsumer | None = None
        self.loop: BatchLoop | AsyncLoop | None = None
        self._choice: LoopChoice | None = None
        self._renew: Callable[[], KafkaProducer] | None = None
        self._writes: BatchWrites | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def run(self) -> int:
        """Run until stopped; return the process exit status."""
        s = self.settings
        s.check_clients()  # a value librdkafka refuses: ConfigError, nothing contacted
        with ExitStack() as stack:
            control = ControlPlane(
                self.registry,
                s.metrics.host,
                s.metrics.port,
                ready=self._ready,
                healthy=self._healthy,
            )
            port = control.start()  # a port in use: ConfigError, Kafka untouched
            stack.callback(control.stop)
            try:
                prepare_worker(s, self.codec)  # before Kafka: nothing consumed
                if not self._check_topics():
                    return 0  # stopped while Kafka was unreachable
                log.info(
                    "worker_started",
                    version=__version__,
                    metrics_port=port,
                    protobuf_backend=protobuf_backend(),
                    config=s.masked(),
                )
                consumer = self.consumer = self._consumer()
                stack.callback(self._close_consumer)
                producer = self._producer()
                self._admin = None  # checks done: free its four librdkafka threads
                if producer is not None:  # bounded: a stalled broker must not hang us
                    stack.callback(self._flush, producer)
                shadow = shadow_for(
                    s, self.codec, self.registry, self._producer_factory
                )
                if shadow is not None:
                    stack.callback(shadow.close)
                self.loop = self._build_loop(consumer, producer, shadow)
                real = self._admin_factory is TopicAdmin  # tests' fakes: no group
                stack.enter_context(watch_group(s, self.metrics, real=real))
                self._subscribed_ms = time.time_ns() // 1_000_000
                consumer.subscribe(
                    [s.consumer.topic],
                    on_assign=self._on_assign,
                    on_revoke=self._on_revoke,
                    on_lost=self._on_lost,
                )
                # Everything built so far lives as long as the process: move it
                # out of the collector's sight so full collections scan only batch
                # garbage.
                gc.freeze()
                stack.callback(self.metrics.gc.install())
                self._choice.run(self.loop, self._stop.is_set, self._tick, self._move)  # type: ignore[union-attr]
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
        self._shutdown.start()
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """True once a stop was asked for (signal, fatal client error, `stop()`)."""
        return self._stop.is_set()

    def install_signal_handlers(self) -> None:
        """SIGTERM and a first SIGINT stop gracefully; a second SIGINT exits now
        (`service.lifecycle.signals.install`)."""
        signals.install(self.stop, self._stop.is_set)

    # -- construction ---------------------------------------------------------------------

    def _check_topics(self) -> bool:
        """Check (or create) the topics, waiting for Kafka as long as it takes.

        Returns:
            True when every topic is there; False if a stop came first.

        Raises:
            ConfigError: a topic is missing (and not to be created) or refused.
            FatalError: a topic got no leader, or the cluster refused this client.
        """
        s = self.settings
        conf = s.admin_config(plaintext_secrets=True)
        if self._admin_factory is TopicAdmin:  # a fake one (tests): no cluster to ask
            check_access(conf, refused=FatalError)  # retrying cannot help
        admin = self._admin = self._admin_factory({**conf, "logger": kafka_logger()})
        self._waiting_for_kafka = True
        try:
            return await_topics(
                admin,
                s.topic_roles(),
                create=s.topics.create,
                partitions=s.topics.partitions,
                errors=self.errors,
                stopped=self._stop.is_set,
                connect=s.kafka.arguments(),
                give_up_s=s.processing.startup_timeout_s,
            )
        except TimeoutError as exc:
            raise FatalError(str(exc)) from None
        finally:
            self._waiting_for_kafka = False

    def _consumer(self) -> WorkerConsumer:
        conf = self.settings.consumer_config(plaintext_secrets=True)
        conf["error_cb"] = self._on_client_error
        conf["on_commit"] = self._on_commit
        conf["logger"] = kafka_logger()
        try:
            return self._consumer_factory(conf)
        except KafkaException as exc:
            raise ConfigError(f"config error: kafka: {exc.args[0].str()}") from None

    def _producer(self) -> KafkaProducer | None:
        s = self.settings
        if (
            s.processing.on_decode_error != "dead_letter"
            and not s.processing.output_topic
            and not s.exactly_once  # its offsets go through the producer
        ):
            return None
        conf = writer_config(s, self._admin)
        conf["error_cb"] = partial(self._on_client_error, source="producer:")
        conf["logger"] = kafka_logger()
        self._renew = partial(self._producer_factory, conf)  # exactly-once's new one
        return self._producer_factory(conf)

    def _flush(self, producer: KafkaProducer) -> None:
        """Flush the writer at shutdown (exactly-once: the current producer)."""
        txn = self._writes and self._writes.transactions
        self._shutdown.flush(txn.producer if txn else producer)

    def _build_loop(
        self,
        consumer: WorkerConsumer,
        producer: KafkaProducer | None,
        shadow: Shadow | None = None,
    ) -> BatchLoop | AsyncLoop:
        s = self.settings
        choice = self._choice = LoopChoice(s, self.codec, self.metrics)
        writes = self._writes = batch_writes(
            s,
            self.metrics,
            choice.writes_consumer(consumer),
            producer,
            self._stop.is_set,
            self._renew,
        )
        return choice.build(consumer, writes, shadow)

    def _move(self) -> AsyncLoop:
        """A probed handler turned out async: the event loop, with what is held."""
        assert self.consumer is not None and self._choice is not None  # noqa: S101
        self.loop = self._choice.async_loop(self.consumer, self.assigned)
        return self.loop

    # -- callbacks (run inside consume(), on the loop's thread) --------------------------

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        c = self.settings.consumer
        if c.auto_offset_reset == "latest":  # see service.loop.partition_starts
            coop = "cooperative" in str(self.settings.kafka.extra.get(_ASSIGNOR, ""))
            start_uncommitted(
                consumer, c.topic, partitions, self._subscribed_ms, cooperative=coop
            )
        self.assigned.update(tp.partition for tp in partitions)
        self._lag.assign([tp.partition for tp in partitions])
        if self.loop is not None:
            self.loop.assign(partitions)
        self._next_tick = 0.0  # the new partitions' lag now, not in a second
        self.metrics.assigned_partitions.set(len(self.assigned))
        self.errors.reachable()  # the group coordinator answered
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
        numbers = [tp.partition for tp in partitions]
        self.assigned.difference_update(numbers)
        self._lag.forget(numbers)
        if self.loop is not None:
            self.loop.revoke(numbers)
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

    def _on_client_error(self, err: KafkaError, source: str = "") -> None:
        self.metrics.consumer_errors.labels(source + err.name()).inc()
        self.errors(err)  # logged rate-limited: librdkafka retries ~20 times a second
        if err.fatal() and not (source and self._writes and self._writes.transactions):
            self._fatal = err  # (exactly-once's producer: `Transactions` decides)
            self.stop()

    # -- periodic work (once a second, between batches) ----------------------------------

    def _tick(self) -> None:
        now = time.monotonic()
        if now < self._next_tick:
            return
        self._next_tick = now + 1.0
        self._lag.update(self.consumer)
        assert self.loop is not None  # noqa: S101 (built before the loop runs)
        if self.loop.processed != self._processed_seen:
            self._processed_seen = self.loop.processed
            self.errors.reachable()  # messages arrived: a broker answers again
        if self._summary.due(now, self.settings.metrics.summary_interval_s):
            self._summary.log(self.loop.processed, lag=self._lag.total)

    def _healthy(self) -> bool:
        if self._waiting_for_kafka:  # alive and retrying: a restart would not help
            return True
        loop = self.loop
        return loop is not None and time.monotonic() - loop.heartbeat < _STALL_S

    def _ready(self) -> str | None:
        if not self.assigned:
            return "no partitions assigned"
        loop = self.loop
        if loop is None:
            return None
        still = time.monotonic() - loop.heartbeat
        if still > READY_STALL_S + self.settings.processing.batch_timeout_ms / 1000:
            return (
                f"stalled: the loop has not come round for {still:.0f} s "
                "(waiting for writes to be acknowledged?)"
            )
        return loop.hold.reason

    def _close_consumer(self) -> None:
        if self.consumer is not None:
            self._shutdown.close(self.consumer)
