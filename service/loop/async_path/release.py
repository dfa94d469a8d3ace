"""The async path's release: each partition's finished prefix written, confirmed,
stored and counted, in that order.

For each partition, the messages finished at its front (the contiguous completed
prefix, `PartitionTrack.done_prefix`) are released together: their results are
written to the output topic and their dead letters to the DLQ (in offset order,
whatever order the handlers finished in), both confirmed by the broker, and only
then their offsets stored; with exactly-once, the writes and exactly those offsets
go in one transaction (`service.delivery.transactions`, which reads the released
offsets through `ReleasedPositions`). A write that is not confirmed stops the
worker (`FatalError`, exit status 1) with those offsets unstored: a restart
handles the messages again. The metrics are updated once per release.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from time import time_ns
from typing import Any

import structlog
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from codec import Codec
from schemas.errors import DeliveryError, FatalError
from service.delivery.dead_letters import Poison, PoisonHandler
from service.delivery.gated_writes import ConfirmedProducer
from service.delivery.outputs import emitter
from service.delivery.transactions import NoTransactions, Transactions
from service.kafka.headers import sent_ages
from service.kafka.protocols import KafkaMessage, WorkerConsumer
from service.loop.async_path.handling import Handling
from service.loop.async_path.inflight import Entry, PartitionTrack, ReleasedPositions
from service.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)


class Release:
    """Releases finished prefixes (see the module docstring).

    Args:
        consumer: the consumer whose offsets are stored.
        codec: the output codec (the worker's).
        metrics: the worker's metrics.
        handling: whose timing samples are observed at each release.
        poison: where dead letters go.
        output: the output producer and topic, None for none.
        transactions: exactly-once's, None for at-least-once.
        positions: what exactly-once's transactions read the offsets from.
        latency_sample_every: time the end-to-end latency of every k-th message.
        clock_ns: the clock's own cost, taken off each timed sample.
        shadow: called with the released messages once stored (the shadow
            decode, `service.shadow.sampler`); None for none.
    """

    def __init__(
        self,
        consumer: WorkerConsumer,
        codec: Codec[Any],
        metrics: Metrics,
        handling: Handling,
        *,
        poison: PoisonHandler,
        output: tuple[ConfirmedProducer, str] | None,
        transactions: Transactions | None,
        positions: ReleasedPositions | None,
        latency_sample_every: int,
        clock_ns: int,
        shadow: Callable[[Sequence[KafkaMessage]], None] | None = None,
    ) -> None:
        self._consumer = consumer
        self._codec = codec.name
        self._m = metrics
        self._handling = handling
        self._poison = poison
        self._output = output
        self._emit = None if output is None else emitter(codec, *output, results=True)
        self._txn: Transactions | NoTransactions = transactions or NoTransactions()
        self._positions = positions
        self._every = latency_sample_every
        self._phase = 0
        self._clock_ns = clock_ns
        self._shadow = shadow
        self.processed = 0

    def settle(self, tracks: Mapping[int, PartitionTrack], topic: str) -> int:
        """Release each partition's finished prefix; return how many messages.

        Raises:
            FatalError: a write was not confirmed (nothing of it stored).
        """
        ready = [(p, t, n) for p, t in tracks.items() if (n := t.done_prefix())]
        if not ready:
            return 0
        self._txn.begin()
        try:
            self._write(ready)
            released = {p: t.entries[n - 1].message.offset() + 1 for p, t, n in ready}  # type: ignore[operator]
            if self._positions is not None:
                self._positions.released = released
            self._txn.commit([TopicPartition(topic, p) for p in released], {})
        except DeliveryError as exc:
            self._txn.abort()
            self._poison.abandon()
            if self._output is not None:
                self._output[0].abandon()
            raise FatalError(
                f"writes not confirmed ({exc}): the worker stops with their "
                "offsets unstored, so a restart handles those messages again"
            ) from None
        entries: list[Entry] = []
        offsets = []
        for p, track, n in ready:
            done, offset = track.release(n)
            entries += done
            offsets.append(TopicPartition(topic, p, offset))
        self._store(offsets)
        self._observe(entries)
        if self._shadow is not None:  # the released messages, as the sync loop's batch
            self._shadow([e.message for e in entries])
        return len(entries)

    def _write(self, ready: list[tuple[int, PartitionTrack, int]]) -> None:
        """Write the released results and dead letters; wait for their acks."""
        emit, poison = self._emit, []
        for _p, track, n in ready:
            for i in range(n):
                entry = track.entries[i]
                if entry.poison is None and emit is not None and entry.out is not None:
                    try:
                        emit(entry.message, None, entry.out)
                    except (MemoryError, DeliveryError):
                        raise
                    except Exception as exc:  # the output codec refused the result
                        entry.poison = Poison.unencodable(
                            entry.message, self._codec, exc
                        )
                if entry.poison is not None:
                    poison.append(entry.poison)
        if poison:
            self._poison.reject(poison)
            self._poison.confirm()
        if self._output is not None and self._output[0].pending:
            self._output[0].confirm()

    def _store(self, offsets: list[TopicPartition]) -> None:
        try:
            self._consumer.store_offsets(offsets=offsets)
        except KafkaException as exc:
            # Raised only if no partition could be stored: all revoked meanwhile.
            if exc.args[0].code() != KafkaError._STATE:
                raise
            log.warning("offsets_not_stored", partitions=len(offsets))

    def _observe(self, entries: list[Entry]) -> None:
        m, n = self._m, len(entries)
        bad = [e.poison for e in entries if e.poison is not None]
        if n - len(bad):
            m.ok.value += n - len(bad)
        logic = sum(1 for p in bad if p.stage == "process")
        if logic:
            m.logic_errors.inc(logic)
        if len(bad) - logic:
            m.decode_errors.inc(len(bad) - logic)
        h, clock = self._handling, self._clock_ns
        for samples, hist in (
            (h.decode_ns, m.decode_seconds),
            (h.handle_ns, m.handle_seconds),
            (h.cpu_ns, m.handle_cpu_seconds),
        ):
            if samples:
                hist.observe_many([max(0, t - clock) * 1e-9 for t in samples])
                samples.clear()
        m.bytes.value += sum(len(e.message.value() or b"") for e in entries)
        m.batch_messages.observe_n(n, 1)
        every, phase = self._every, self._phase
        sampled = [e.message for e in entries[phase::every]]
        self._phase = (phase - n) % every
        if sampled:
            ages, unparsable = sent_ages(sampled, time_ns())
            if ages or unparsable:
                m.e2e_latency.add_ages(ages, unparsable)
        self.processed += n
