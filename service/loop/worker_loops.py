"""Which loop a worker runs, built from its settings: sync batches or the event loop.

A stub logic and a team's sync handler run in the sync batch loop
(`service.loop.batch_loop`); a team's async handler (`Handler.awaits`) on the
event loop (`service.loop.async_path.loop`). A team's plain callable, which may return
awaitables, starts in the batch loop behind its `FirstCallProbe`; the probe's first
answer either rebinds the loop to the handler itself (sync: no wrapper left) or
asks the worker to move to the event loop after the batch (`async_loop_for`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, cast

import structlog
from confluent_kafka import TopicPartition

from codec import Codec
from service.delivery.batch_writes import BatchWrites
from service.kafka.protocols import WorkerConsumer
from service.logic.builtin import Handler
from service.loop.async_path.inflight import ReleasedPositions
from service.loop.async_path.loop import AsyncLoop
from service.loop.batch_loop import BatchHook, BatchLoop
from service.settings.worker import Settings
from service.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)

GRACE_SHARE = 0.5
"""Of `shutdown_timeout_s`, what a stop waits for async handlers in flight; the
rest is left for the final commit and `close()`."""


class LoopChoice:
    """The worker's loop for its logic (see the module docstring).

    Args:
        s: the worker's settings.
        codec: the worker's codec.
        metrics: the worker's metrics.
    """

    def __init__(self, s: Settings, codec: Codec[Any], metrics: Metrics) -> None:
        p = s.processing
        self._s, self._codec, self._metrics = s, codec, metrics
        self.handler = Handler(s.codec.forms, p.logic, p.work_us, p.read_fields)
        self.moved = threading.Event()
        """Set when a probed handler turned out async."""
        self._positions: ReleasedPositions | None = None
        self._writes: BatchWrites | None = None
        self._shadow: BatchHook | None = None

    def writes_consumer(self, consumer: WorkerConsumer) -> WorkerConsumer:
        """The consumer the writes see: a team's handler may turn out async, and
        exactly-once then commits the offsets the async loop released."""
        if not self.handler.results:
            return consumer
        self._positions = ReleasedPositions(consumer)
        return cast(WorkerConsumer, self._positions)

    def build(
        self, consumer: WorkerConsumer, writes: BatchWrites, shadow: BatchHook | None
    ) -> BatchLoop | AsyncLoop:
        """The loop to start with (`writes` made with `writes_consumer`); a probed
        handler's first answer rebinds the batch loop or sets `moved`."""
        self._writes, self._shadow = writes, shadow
        if self.handler.awaits:
            return self.async_loop(consumer)
        s, p, handler = self._s, self._s.processing, self.handler
        loop = BatchLoop(
            consumer,
            codec=self._codec,
            step=handler.step,
            results=handler.results,
            transactions=writes.transactions,
            metrics=self._metrics,
            poison=writes.poison,
            output=writes.output,
            max_payload_bytes=s.codec.max_payload_bytes,
            batch_size=p.batch_size,
            batch_max_bytes=p.batch_max_bytes,
            batch_timeout_s=p.batch_timeout_ms / 1000.0,
            store_interval_s=p.offset_store_interval_ms / 1000.0,
            latency_sample_every=s.metrics.latency_sample_every,
            shadow=shadow,
            max_attempts=p.max_attempts,
            retry_backoff_ms=p.retry_backoff_ms,
            message_budget=s.message_budget(),
        )
        if handler.probe is not None:
            handler.probe.on_sync = loop._path.rebind
            handler.probe.on_async = self.moved.set
        return loop

    def async_loop(
        self, consumer: WorkerConsumer, assigned: Iterable[int] = ()
    ) -> AsyncLoop:
        """The event loop for the handler, with the partitions held `assigned`
        (when the worker moves from the batch loop)."""
        writes, positions = self._writes, self._positions
        assert writes is not None and positions is not None  # noqa: S101
        s, p, handler = self._s, self._s.processing, self.handler
        step = handler.step if handler.probe is None else handler.probe.handler
        assert step is not None  # noqa: S101 (a team's handler always has a step)
        loop = AsyncLoop(
            consumer,
            codec=self._codec,
            step=step,
            metrics=self._metrics,
            poison=writes.poison,
            output=writes.output,
            max_payload_bytes=s.codec.max_payload_bytes,
            batch_size=p.batch_size,
            batch_timeout_s=p.batch_timeout_ms / 1000.0,
            max_in_flight=p.max_in_flight,
            ordering=p.ordering,
            max_attempts=p.max_attempts,
            retry_backoff_ms=p.retry_backoff_ms,
            transactions=writes.transactions,
            positions=positions,
            latency_sample_every=s.metrics.latency_sample_every,
            budget_s=p.message_budget_ms / 1000.0,
            grace_s=p.shutdown_timeout_s * GRACE_SHARE,
            shadow=self._shadow,
        )
        topic = s.consumer.topic
        loop.assign([TopicPartition(topic, n) for n in sorted(assigned)])
        return loop

    def run(
        self,
        loop: BatchLoop | AsyncLoop,
        should_stop: Callable[[], bool],
        tick: Callable[[], None],
        move: Callable[[], AsyncLoop],
    ) -> None:
        """Run `loop` until `should_stop()`; if the handler turns out async on the
        way, end the batch loop after its batch (stored) and run `move()`'s."""
        moved = self.moved.is_set
        if self.handler.probe is None:  # the stop test as it was: nothing to probe
            loop.run(should_stop, tick)
            return
        loop.run(lambda: should_stop() or moved(), tick)
        if not moved() or should_stop():
            return
        if self.handler.probe is not None:
            self.handler.probe.close()
        log.info("async_handler_found", handler=self._s.processing.logic)
        move().run(should_stop, tick)
