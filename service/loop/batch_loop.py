"""The batch loop (the hot path): consume, then decode, handle and drop each message.

Per batch: each message is decoded, handled by the logic and dropped before the next
one is decoded (`service.loop.hotpath`), so the cost measured is the codec's, not that of
holding hundreds of decoded objects (a pydantic model costs 11 us to decode when
dropped at once and 29 us when 500 are kept alive: cache misses and cyclic-GC
walks). Poison messages are set aside (rare), results go to the output topic as
they are made; after the batch, its dead letters and outputs are confirmed by the
broker, and only then is each partition's position stored (at-least-once), at most
every `store_interval_s` (`_store` reads each partition's position under
librdkafka's locks, ~6 us a call in a running worker: ~200 a second at any rate
with 5 ms batches) and always before partitions are revoked and when the loop
stops or goes idle, so what auto-commit sends is always processed. Metrics
are updated once per batch; every k-th message's decode and logic are timed alone,
so the histograms are histograms of single decodes. Nothing in the per-message code
logs, resolves label children or tests the configuration.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from time import time_ns
from typing import Any, Final

import structlog
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from codec import Codec
from schemas.errors import DeliveryError, FatalError
from service.delivery.dead_letters import PoisonHandler
from service.delivery.gated_writes import ConfirmedProducer
from service.delivery.held_partitions import Hold
from service.delivery.outputs import emitter
from service.delivery.transactions import NoTransactions, Transactions
from service.kafka.headers import sent_ages
from service.kafka.protocols import KafkaConsumer, KafkaMessage
from service.loop import heap_trim
from service.loop.hotpath import MessagePath, Step, Tally, clock_overhead_ns
from service.loop.message_budget import BatchAbandoned, Budget, MessageBudget
from service.loop.registry_wait import RegistryWait, after_wait
from service.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)

BatchHook = Callable[[Sequence[KafkaMessage]], None]
"""Runs once per batch after its offsets are stored (the shadow decode); never raises."""

DECODE_SAMPLE_EVERY: Final = 32
"""Time the decode and logic of every 32nd message. A timed message costs two or
three `perf_counter_ns` calls and a slice and call for the run after it, ~0.4 us,
so ~0.013 us a message; 40k msg/s still gives 1,250 timed decodes a second."""

TIMER_WAIT_MAX_S: Final = 0.05
"""Waits up to this sleep between small batches, longer on the queue (`BatchLoop.run`)."""


class BatchLoop:
    """Consumes batches and handles them; see the module docstring for the order.

    Args:
        consumer: subscribed consumer with `enable.auto.offset.store=false`.
        codec: the configured codec (an `AutoCodec` reads `content-type`).
        step: the logic for one message, None for none (`noop`).
        metrics: the worker's metrics.
        poison: where rejected messages go (dead letters, or a fatal stop).
        output: where results go, with its topic; None for no output.
        max_payload_bytes: larger values are rejected before decoding.
        batch_size: messages per `consume()` at most.
        batch_max_bytes: payload bytes per batch at most: the next `consume()`
            asks for this over the last batch's mean message size, if fewer.
        batch_timeout_s: the longest wait for a batch.
        latency_sample_every: time the end-to-end latency of every k-th message.
        decode_sample_every: time the decode and logic of every k-th message.
        transactions: the delivery strategy per batch: `Transactions` for
            exactly-once (`service.delivery.transactions`), None for at-least-once.
        results: True if `step` returns the result to write (a team's handler),
            False if the decoded message is written (`service.delivery.outputs`).
        shadow: called with each batch once its offsets are stored and its metrics
            observed (`service.shadow.sampler`); None for none, which costs nothing.
        max_attempts: attempts of `step` per message before it is dead-lettered.
        retry_backoff_ms: the pause before the first retry, doubled after each.
        store_interval_s: store the processed positions at most this often (0:
            after every batch); pending ones are stored when partitions are
            revoked, when no message came, and when `run` stops.
        message_budget: seconds and record file (`service.loop.message_budget`).
    """

    def __init__(
        self,
        consumer: KafkaConsumer,
        *,
        codec: Codec[Any],
        step: Step | None,
        metrics: Metrics,
        poison: PoisonHandler,
        output: tuple[ConfirmedProducer, str] | None,
        max_payload_bytes: int,
        batch_size: int,
        batch_timeout_s: float,
        batch_max_bytes: int = 1 << 62,
        latency_sample_every: int = 1,
        decode_sample_every: int = DECODE_SAMPLE_EVERY,
        shadow: BatchHook | None = None,
        transactions: Transactions | None = None,
        results: bool = False,
        max_attempts: int = 1,
        retry_backoff_ms: float = 0.0,
        store_interval_s: float = 0.0,
        message_budget: Budget = (0.0, None),
    ) -> None:
        self._consumer = consumer
        self._m = metrics
        self._poison = poison
        self._output = output
        self._path = path = MessagePath(
            codec,
            step=step,
            emit=None if output is None else emitter(codec, *output, results=results),
            max_payload_bytes=max_payload_bytes,
            consumer_error=self._consumer_error,
            retried=metrics.logic_retries.inc,
            max_attempts=max_attempts,
            retry_backoff_s=retry_backoff_ms / 1000.0,
        )
        self.budget = MessageBudget(path, message_budget, batch_timeout_s)
        self._batch_size = batch_size
        self._max_bytes = batch_max_bytes
        self._size = batch_size
        """Messages the next `consume()` asks for (`_resize`)."""
        self._timeout = batch_timeout_s
        self._every = latency_sample_every
        self._phase = 0
        self._decode_every = decode_sample_every
        self._next_timed = decode_sample_every - 1
        self._clock_ns = clock_overhead_ns()
        metrics.timer_overhead.set(self._clock_ns * 1e-9)
        self._stored: dict[int, int] = {}
        self._store_every = store_interval_s
        self._store_at = 0.0
        self._unstored = False
        """Processed batches whose positions are not stored yet."""
        self._assignment: dict[int, TopicPartition] = {}
        self._positions: list[TopicPartition] = []
        self._shadow = shadow
        self._txn: Transactions | NoTransactions = transactions or NoTransactions()
        self._tally = Tally()
        """The batch's tally, used again while it stays empty (the common case)."""
        self.hold = Hold(consumer, metrics)
        self.processed = 0
        self.heartbeat = time.monotonic()

    def assign(self, partitions: Sequence[Any]) -> None:
        """Partitions given to this consumer (from the rebalance callback)."""
        for tp in partitions:
            self._assignment[tp.partition] = TopicPartition(tp.topic, tp.partition)
        self._positions = list(self._assignment.values())

    def revoke(self, partitions: Sequence[int]) -> None:
        """Partitions taken away (revoked or lost): no longer stored or held.
        Runs inside `consume()`, between batches: what was processed is stored
        first, so the commit on revoke sends it."""
        self.flush()
        for p in partitions:
            self._assignment.pop(p, None)
            self._stored.pop(p, None)
        self._positions = list(self._assignment.values())
        self.hold.forget(partitions)

    def run(self, should_stop: Callable[[], bool], tick: Callable[[], None]) -> None:
        """Process batches until `should_stop()`, within the message budget."""
        with self.budget.watching(should_stop, self):
            self._run(should_stop, tick)

    def _run(self, should_stop: Callable[[], bool], tick: Callable[[], None]) -> None:
        """Process batches until `should_stop()`; call `tick()` after each.

        How the next batch is waited for depends on how full the last one was. At
        least half full (a backlog, or a rate that fills a batch within the wait):
        `consume(size, timeout)`, which returns as soon as the batch is full. Less
        (a steady rate below that, or idle): sleep for the wait, then take what
        came, `consume(size, 0)`. librdkafka's `consume()` returns early only with
        a full batch, and meanwhile wakes its caller each time a fetch response
        puts a partition's messages in the queue (~500 a second at 2,000 msg/s on
        4 partitions, for 200 batches), where the sleep wakes it once. So while no
        batch fills within the wait the two take the same batches; when a burst
        starts after a small batch, its first batch is taken when the wait ends
        rather than when it is full, up to one wait later, and the queue is waited
        on from the next. Either way a message waits at most one wait (plus the
        batch before it) to be taken. Waits over `TIMER_WAIT_MAX_S` always wait on
        the queue: there a batch that fills early should not wait out the rest,
        and librdkafka counts a sleep, unlike a blocking `consume()`, against
        `max.poll.interval.ms`.
        """
        consume, process, hold = self._consumer.consume, self.process, self.hold
        timeout, sleep = self._timeout, time.sleep
        timer = timeout <= TIMER_WAIT_MAX_S
        on_queue = not timer
        while not should_stop():
            if on_queue:
                msgs = consume(self._size, timeout)
            else:
                sleep(timeout)
                msgs = consume(self._size, 0)
            on_queue = not timer or 2 * len(msgs) >= self._size
            if msgs:
                process(msgs)
            else:
                self.flush()  # the tail of a burst: stored, not left waiting
                if self._size < self._batch_size:  # idle after large values
                    self._size = self._batch_size
                    heap_trim.trim()
                if self._shadow is not None:
                    # Idle: the shadow serves its samples' delivery reports, so
                    # `written` does not wait for the next batch.
                    self._shadow(())
            if hold.active:
                hold.due()
            self.heartbeat = time.monotonic()
            tick()
        self.flush()

    def flush(self) -> None:
        """Store the processed positions not stored yet (between batches only)."""
        if self._unstored:
            self._store()

    def process(self, msgs: Sequence[KafkaMessage]) -> None:
        """Handle one batch completely, then store its offsets.

        If its dead letters or output are not confirmed, nothing of it is stored or
        counted: its partitions are rewound and paused (`service.delivery.held_partitions`).
        """
        hold = self.hold
        if hold.active:
            msgs = hold.filter(msgs)
            if not msgs:
                return
        tally = self._tally
        if tally.poison or tally.errors:  # the last batch's, handed on: a fresh one
            tally = self._tally = Tally()
        decode_ns: list[int] = []
        handle_ns: list[int] = []
        self._txn.begin()
        try:
            try:  # free unless it raises (zero-cost try since Python 3.11)
                nbytes = self._handle_each(msgs, tally, decode_ns, handle_ns)
            except RegistryWait as wait:  # that partition held, the others go on
                msgs, nbytes = after_wait(self._handle_each, wait, msgs, tally, hold)
            # Bytes per message, per batch: 1 MB messages must not come 500 at once.
            if nbytes > self._max_bytes // self._batch_size * len(msgs) or (
                self._size < self._batch_size
            ):
                mean = max(1, nbytes // max(1, len(msgs)))  # all waiting: none
                size = max(1, min(self._batch_size, self._max_bytes // mean))
                if size == self._batch_size:  # a burst of large values has ended
                    heap_trim.trim()
                self._size = size
            # Confirmed only if queued: dead letters are queued by this batch's
            # `reject` alone (a failed confirm abandons them), output by its emits.
            if tally.poison:
                self._poison.reject(tally.poison)
                self._poison.confirm()
            if self._output is not None and self._output[0].pending:
                self._output[0].confirm()
            self._txn.commit(self._positions, hold.held)
        except (DeliveryError, BatchAbandoned) as exc:  # stored never, read again
            rewind = self._txn.abort()
            self._poison.abandon()
            if self._output is not None:
                self._output[0].abandon()
            hold.fail(msgs, exc, rewind)
            return
        if hold.active:
            hold.confirmed(msgs)
        self._unstored = True
        if (now := time.monotonic()) >= self._store_at:  # interval 0: every batch
            self._store_at = now + self._store_every
            self._store()
        self._observe(msgs, tally, nbytes, decode_ns, handle_ns)
        if self._shadow is not None:
            self._shadow(msgs)

    def _handle_each(
        self,
        msgs: Sequence[KafkaMessage],
        tally: Tally,
        decode_ns: list[int],
        handle_ns: list[int],
    ) -> int:
        """Decode, handle and drop each message; return the payload bytes handled.

        Every k-th message of the stream goes to `timed` (the phase carries across
        batches, so each message is equally likely to be timed), the runs between
        them to `run`, which times nothing: a slice and a call per k messages
        instead of a countdown per message.
        """
        run, timed, every = self._path.run, self._path.timed, self._decode_every
        n, i = len(msgs), self._next_timed
        nbytes = start = 0
        while i < n:
            if i > start:
                nbytes += run(msgs[start:i], tally)
            nbytes += timed(msgs[i], tally, decode_ns, handle_ns)
            start, i = i + 1, i + every
        if start < n:
            nbytes += run(msgs[start:] if start else msgs, tally)
        self._next_timed = i - n
        return nbytes

    # -- confirmation, offsets, errors ---------------------------------------------------

    def _store(self) -> None:
        """Store each assigned partition's position: the offset after the last
        message `consume()` returned, all of which are handled by now.

        Two calls for the batch instead of a Python scan of every message's partition
        and offset (~0.12 us a message); partitions whose position did not move since
        the last store are left out. The assignment is the one the rebalance
        callbacks gave (`assign`, `revoke`): `consumer.assignment()` is a round trip
        to librdkafka's main thread, which cost the loop 20 % of its time when it
        was called once a batch."""
        consumer, stored, held = self._consumer, self._stored, self.hold.held
        self._unstored = False
        if not self._positions:
            return
        positions = [
            tp
            for at in consumer.position(self._positions)
            # rewound (held): stored up to where it was, nothing past it is confirmed
            if (tp := held.get(at.partition, at)).offset >= 0
            and stored.get(tp.partition) != tp.offset
        ]
        if not positions:
            return
        try:
            consumer.store_offsets(offsets=positions)
        except KafkaException as exc:
            # Raised only if no partition could be stored: they were all revoked
            # while the batch ran. Their new owner processes them again.
            if exc.args[0].code() != KafkaError._STATE:
                raise
            log.warning("offsets_not_stored", partitions=len(positions))
            return
        for tp in positions:
            stored[tp.partition] = tp.offset

    def _consumer_error(self, err: Any) -> None:
        self._m.consumer_errors.labels(err.name()).inc()
        if err.fatal():
            raise FatalError(f"fatal consumer error: {err.name()}: {err.str()}")
        log.error("consumer_error", code=err.name(), error=err.str())

    # -- metrics, once per batch ---------------------------------------------------------

    def _observe(
        self,
        msgs: Sequence[KafkaMessage],
        tally: Tally,
        nbytes: int,
        decode_ns: list[int],
        handle_ns: list[int],
    ) -> None:
        m, poison = self._m, tally.poison
        n = len(msgs) - tally.errors
        ok = n - len(poison)
        if ok:
            m.ok.value += ok  # `IntCounterChild`: one add, no call (the loop's alone)
        if poison:
            n_logic = sum(1 for p in poison if p.stage == "process")
            if n_logic:
                m.logic_errors.inc(n_logic)
            if len(poison) - n_logic:
                m.decode_errors.inc(len(poison) - n_logic)
        if decode_ns:
            m.decode_seconds.observe_many(_less_clock(decode_ns, self._clock_ns))
        if handle_ns:
            m.handle_seconds.observe_many(_less_clock(handle_ns, self._clock_ns))
        m.bytes.value += nbytes
        m.batch_messages.observe_n(n, 1)
        # Every k-th message of the stream (the phase carries across batches), so each
        # message is equally likely to be timed; consumer errors are not messages.
        every = self._every
        if every == 1:
            sampled = msgs
        else:
            phase = self._phase
            sampled = msgs[phase::every]
            self._phase = (phase - len(msgs)) % every
        if sampled:
            ages, unparsable = sent_ages(sampled, time_ns())
            if ages or unparsable:
                m.e2e_latency.add_ages(ages, unparsable)
        self.processed += n


def _less_clock(samples_ns: list[int], clock_ns: int) -> list[float]:
    """Each sample in seconds less the clock's own cost (`clock_overhead_ns`), >= 0."""
    return [(t - clock_ns) * 1e-9 if t > clock_ns else 0.0 for t in samples_ns]
