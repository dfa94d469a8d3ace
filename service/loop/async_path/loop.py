"""The async path: a team's async handler, awaited on an event loop, at-least-once.

An `async def` handler (or a callable returning an awaitable) runs here instead of
in the sync batch loop (`service.loop.batch_loop`), which is left as it is. One
thread runs both the consumer and the event loop (uvloop,
`service.loop.async_path.event_loop`), taking turns: every consumer call is made
with the event loop stopped (librdkafka's batch consume is not safe beside a pause,
resume or seek from another thread), and the event loop runs in slices between
them (`Slices`). That thread is not the main one (`on_own_thread`: a slice of uvloop's
costs a seventh as much off it). Each round:

1. the messages finished at the front of each partition (the contiguous completed
   prefix) are released (`service.loop.async_path.release`): their results and
   dead letters written and confirmed, then their offsets stored (exactly-once:
   one transaction with exactly those offsets), then counted in the metrics;
2. `consume()`: blocking for the batch wait when nothing is in flight (no handler
   to starve), else without waiting, for at most the room left under
   `max_in_flight`;
3. each message goes to its partition's track and its lane
   (`service.loop.async_path.lanes`);
4. the event loop runs: one pass (the new handlers start) if `consume()` filled
   the room it asked for, else up to the batch wait (ended early at the bound once
   a quarter of it finished).

**Bounded.** Messages in flight (consumed, not released) never pass `max_in_flight`:
`consume()` asks for the room left, and at the bound for nothing. Behind the input
(no `consume()` came back short) and at the bound, for `PAUSE_AFTER_S`, every
assigned partition is paused (librdkafka drops what it had fetched for them) and
resumed once half of the bound is free; while paused, `consume()` is called each
round, so rebalances and `max.poll.interval.ms` are served while handlers wait.

**Each attempt on the message as consumed.** A handler that raises is retried up to
`max_attempts` with the same back-off as the sync loop's (awaited: other messages
go on meanwhile), each retry on the message decoded again (one decode per retry);
then it is dead-lettered as a logic error. A message over `message_budget_ms` is
cancelled where it awaits and dead-lettered with reason `budget` (checked every
`SWEEP_S`); a handler that blocks the event loop without awaiting is not
interrupted: it is measured and reported (`Slices`).

**Held partitions, as in the sync loop** (`service.delivery.held_partitions`). A
framed message whose schema the registry cannot give, and a release whose writes
the broker does not acknowledge, hold their partition: paused and rewound (to the
waiting message; to the release's first message), nothing stored past it, its
later messages in flight dropped, `/readyz` 503 with the reason, retried after a
back-off of 1 s doubling to 30 s; the other partitions go on.

**Revoke and stop.** A revoke (inside `consume()`) runs the event loop for up to
`revoke_grace_s` while the revoked partitions' handlers finish (the other
partitions' go on meanwhile), releases and stores what finished (the contiguous
prefix), then drops the rest unstored and cancels its handlers: their next owner
handles them again. A lost partition is not waited for (another member may own it
already). A stop waits up to `grace_s` for every handler in flight, releases what
finished and cancels the rest, unstored.

**Timed as the team's time.** `worker_handle_seconds` is each message's handler
wall time, awaits included (every message); `worker_handle_cpu_seconds` the CPU
of the handler's own steps (one message in 128, `CpuTimed`); decodes are timed one
in 128 as in the sync loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

import structlog
from confluent_kafka import TopicPartition

from codec import Codec
from schemas.errors import FatalError
from service.delivery.dead_letters import PoisonHandler
from service.delivery.gated_writes import ConfirmedProducer
from service.delivery.held_partitions import Hold
from service.delivery.transactions import Transactions
from service.kafka.protocols import KafkaMessage, WorkerConsumer
from service.loop.async_path.event_loop import Slices, new_event_loop, on_own_thread
from service.loop.async_path.handling import SWEEP_S, Handling
from service.loop.async_path.inflight import ReleasedPositions
from service.loop.async_path.lanes import InFlight
from service.loop.async_path.release import Release
from service.loop.sample_clock import clock_overhead_ns
from service.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)

Ordering = str
"""`partition`, `key` or `none` (`ProcessingSettings.ordering`)."""

PAUSE_AFTER_S: Final = 1.0
"""How long the worker must stay behind its input before the partitions are
paused. A pause drops what librdkafka had fetched for them, fetched again at the
resume: pausing as soon as the bound was reached made a worker whose in-flight
messages hovered at the bound (100 awaiting 0.1 s each at 1,000 msg/s) pause 145
times in 2.5 minutes and fall to 130 msg/s. Meanwhile nothing more is consumed
than the bound allows, so librdkafka's prefetch queue (`queued_max_messages_kbytes`)
is the most that waits."""


class AsyncLoop:
    """Consumes and hands each message to the async handler; see the module docstring.

    Args:
        consumer: subscribed consumer with `enable.auto.offset.store=false`.
        codec: the configured codec.
        step: the team's handler (its calls return awaitables, or values).
        metrics: the worker's metrics.
        poison: where rejected messages go.
        output: the output producer and topic, None for none.
        max_payload_bytes: larger values are dead-lettered undecoded.
        batch_size: messages per `consume()` at most.
        batch_timeout_s: the batch wait, and the longest wait between rounds.
        max_in_flight: messages consumed and not released, at most (see above).
        ordering: `partition`, `key` or `none`.
        max_attempts: attempts of the handler per message.
        retry_backoff_ms: the pause before the first retry, doubled after each.
        transactions: exactly-once's transactions (None: at-least-once); its
            consumer must be `positions`.
        positions: the consumer as exactly-once's transactions see it.
        latency_sample_every: time the end-to-end latency of every k-th message.
        budget_s: the per-message budget (0: none).
        grace_s: how long a stop waits for the handlers in flight.
        revoke_grace_s: how long a revoke waits for the revoked partitions'.
        loop_kind: `uvloop` or `asyncio`.
        shadow: the shadow decode's hook, called with each release's messages.
    """

    def __init__(
        self,
        consumer: WorkerConsumer,
        *,
        codec: Codec[Any],
        step: Callable[[Any], object],
        metrics: Metrics,
        poison: PoisonHandler,
        output: tuple[ConfirmedProducer, str] | None,
        max_payload_bytes: int,
        batch_size: int,
        batch_timeout_s: float,
        max_in_flight: int,
        ordering: Ordering = "partition",
        max_attempts: int = 1,
        retry_backoff_ms: float = 0.0,
        transactions: Transactions | None = None,
        positions: ReleasedPositions | None = None,
        latency_sample_every: int = 1,
        budget_s: float = 0.0,
        grace_s: float = 5.0,
        revoke_grace_s: float = 5.0,
        loop_kind: str = "uvloop",
        shadow: Callable[[Sequence[KafkaMessage]], None] | None = None,
    ) -> None:
        self._consumer = consumer
        self._m = metrics
        clock_ns = clock_overhead_ns()
        metrics.timer_overhead.set(clock_ns * 1e-9)
        self._handling = Handling(
            codec,
            step,
            metrics,
            max_payload_bytes=max_payload_bytes,
            max_attempts=max_attempts,
            retry_backoff_s=retry_backoff_ms / 1000.0,
            budget_s=budget_s,
            consumer_error=poison.consumer_error,
        )
        self._flight = InFlight(
            self._handling, ordering, max_in_flight, poison.consumer_error
        )
        self.hold = Hold(consumer, metrics)
        self._release = Release(
            consumer,
            codec,
            metrics,
            self._handling,
            self.hold,
            self._flight.drop,
            poison=poison,
            output=output,
            transactions=transactions,
            positions=positions,
            latency_sample_every=latency_sample_every,
            clock_ns=clock_ns,
            shadow=shadow,
        )
        self._shadow = shadow
        self._size = batch_size
        self._timeout = batch_timeout_s
        self._max = max_in_flight
        self._grace_s = grace_s
        self._revoke_grace_s = revoke_grace_s
        self._loop_kind = loop_kind
        self._slices: Slices | None = None
        """The event loop's slices while `run` runs (None before and after)."""
        self._assignment: dict[int, TopicPartition] = {}
        self._paused = False
        self._behind_since: float | None = None
        """Since when every `consume()` filled the room it asked for."""
        self.heartbeat = time.monotonic()

    @property
    def _in_flight(self) -> int:
        return self._flight.count

    # -- rebalance callbacks (inside consume(), the event loop stopped) ------------

    def assign(self, partitions: Sequence[Any]) -> None:
        """Partitions given to this consumer; paused at once if the bound is reached."""
        new = []
        for tp in partitions:
            self._flight.topic = tp.topic
            new.append(TopicPartition(tp.topic, tp.partition))
            self._assignment[tp.partition] = new[-1]
        if self._paused and new:
            self._consumer.pause(new)

    def revoke(self, partitions: Sequence[int], lost: bool = False) -> None:
        """Partitions taken away: their handlers get up to `revoke_grace_s` to
        finish (none if `lost`), what finished is released and stored, the rest
        dropped unstored and cancelled."""
        tasks = self._flight.of(partitions)
        slices = self._slices
        if tasks and not lost and slices is not None and self._revoke_grace_s:
            slices.loop.run_until_complete(
                asyncio.wait(tasks, timeout=self._revoke_grace_s)
            )
        self._hold_waiting()
        self._settle()
        for p in partitions:
            self._assignment.pop(p, None)
        if dropped := self._flight.forget(partitions):
            log.warning(
                "revoked_in_flight_dropped",
                partitions=sorted(partitions),
                messages=dropped,
                waited_s=0.0 if lost else self._revoke_grace_s,
            )
        self.hold.forget(partitions)

    # -- the loop ---------------------------------------------------------------------

    def run(self, should_stop: Callable[[], bool], tick: Callable[[], None]) -> None:
        """Run rounds with a new event loop until `should_stop()`, then finish, on
        a thread of the loop's own (`on_own_thread`); raise what it raised."""
        abandoned = threading.Event()  # a signal handler raised: stop now
        on_own_thread(
            lambda: self._run(lambda: abandoned.is_set() or should_stop(), tick),
            abandoned.set,
        )

    def _run(self, should_stop: Callable[[], bool], tick: Callable[[], None]) -> None:
        loop = new_event_loop(self._loop_kind)
        self._slices = Slices(loop, self._handling.budget_s, lambda: self._in_flight)
        self._flight.wake = self._slices.wake
        try:
            self._rounds(should_stop, tick)
            self._stop(loop)
        finally:  # a failure: the handlers still in flight are cancelled, unstored
            if left := list(self._flight.tasks):
                for task in left:
                    task.cancel()
                loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            self._slices = None
            loop.close()

    def _rounds(
        self, should_stop: Callable[[], bool], tick: Callable[[], None]
    ) -> None:
        consume, timeout = self._consumer.consume, self._timeout
        flight, hold, slices = self._flight, self.hold, self._slices
        assert slices is not None  # noqa: S101 (set by run)
        next_sweep = 0.0
        while not should_stop():
            if flight.failed is not None:
                raise FatalError(
                    f"async loop failed: {flight.failed!r}"
                ) from flight.failed
            if flight.finished:
                self._settle()
            if hold.active and not self._paused:
                hold.due()
            asked = self._pace(self._max - flight.count)
            if not flight.count:  # nothing in flight to starve: wait here
                msgs = consume(asked, timeout)
            elif asked:
                msgs = consume(asked, 0)
            else:
                msgs = consume(1, 0) if self._paused else []  # rebalances, polls
            if asked and len(msgs) < asked:
                self._behind_since = None  # caught up with the input
            if msgs:
                self._dispatch(msgs)
            elif self._shadow is not None:
                self._shadow(())  # idle: its samples' delivery reports are served
            now = self.heartbeat = time.monotonic()
            if self._handling.budget_s and now >= next_sweep:
                next_sweep = now + SWEEP_S
                self._handling.sweep(now)
            tick()
            if flight.count:  # behind: one pass; caught up or at the bound: the wait
                slices.run(timeout if len(msgs) < max(1, asked) else 0)
            self._hold_waiting()
            if slices.lags:
                self._m.event_loop_lag.observe_many(slices.lags)
                slices.lags.clear()

    def _dispatch(self, msgs: Sequence[KafkaMessage]) -> None:
        hold = self.hold
        self._hold_waiting()  # before any later message of a waiting partition
        if hold.active:
            msgs = hold.filter(msgs)  # fetched before their partition was paused
        slices = self._slices
        assert slices is not None  # noqa: S101 (set by run)
        self._flight.dispatch(slices.loop, msgs)

    def _pace(self, room: int) -> int:
        """How many messages to ask for: the room left. Behind the input (every
        `consume()` since `_behind_since` filled the room it asked for, none came
        back short) and at the bound, for `PAUSE_AFTER_S`: the handlers are slower
        than the input, and every assigned partition is paused; resumed (all but
        the held ones) once half of the bound is free."""
        self._flight.at_bound = room <= 0
        now = time.monotonic()
        if self._behind_since is None:
            self._behind_since = now
        if room <= 0:
            if now - self._behind_since >= PAUSE_AFTER_S and not self._paused:
                self._paused = True
                if self._assignment:
                    self._consumer.pause(list(self._assignment.values()))
                self._m.async_pauses.inc()
            return 0
        if self._paused and self._flight.count <= self._max // 2:
            self._paused = False
            self._behind_since = None
            held = self.hold.held
            if tps := [tp for p, tp in self._assignment.items() if p not in held]:
                self._consumer.resume(tps)
        return min(self._size, room)

    def _hold_waiting(self) -> None:
        """Pause and rewind each partition at its message whose schema the registry
        could not give (`service.loop.registry_wait`); retried after the back-off."""
        flight = self._flight
        if not flight.waits:
            return
        waits, flight.waits = flight.waits, []
        msgs = sorted(
            (e.message for e in waits if e.message.partition() in self._assignment),
            key=lambda m: m.offset() or 0,  # the earliest of a partition first
        )
        if msgs:
            self.hold.fail(msgs, waits[0].wait or RuntimeError(), registry=True)

    def _settle(self) -> None:
        flight = self._flight
        flight.finished = 0
        released = self._release.settle(flight.tracks, flight.topic)
        flight.count -= released  # after: a failed release drops its messages itself

    @property
    def processed(self) -> int:
        """Messages released (handled, written, stored) so far."""
        return self._release.processed

    def _stop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wait up to the grace period for the handlers in flight; release what
        finished; cancel the rest (never stored)."""
        if tasks := list(self._flight.tasks):
            loop.run_until_complete(asyncio.wait(tasks, timeout=self._grace_s))
        if left := list(self._flight.tasks):
            for task in left:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            log.warning("handlers_cancelled_at_stop", tasks=len(left))
        self._settle()
