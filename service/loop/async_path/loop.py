"""The async path: a team's async handler, awaited on an event loop, at-least-once.

An `async def` handler (or a callable returning an awaitable) runs here instead of
in the sync batch loop (`service.loop.batch_loop`), which is left as it is. One
thread runs the event loop (uvloop, `service.loop.async_path.event_loop`); every
consumer call is made from it (librdkafka's batch consume is not safe beside a pause, resume or
seek from another thread). Each round:

1. `consume()`: blocking for the batch wait when nothing is in flight (no handler
   to starve), else without waiting, for at most the room left under
   `max_in_flight`;
2. each message gets an `Entry` in its partition's `PartitionTrack` and goes to its
   lane: `--ordering partition` handles a partition's messages one after another,
   `key` those of one key of a partition (keyless ones share a lane), `none` every
   message in a task of its own;
3. the messages finished at the front of each partition (the contiguous completed
   prefix) are released (`service.loop.async_path.release`): their results and
   dead letters written and confirmed, then their offsets stored (exactly-once:
   one transaction with exactly those offsets), then counted in the metrics;
4. wait up to the batch wait for the handlers (woken early when paused).

**Bounded.** Messages in flight (consumed, not released) never pass `max_in_flight`:
`consume()` asks for the room left, and at the bound for nothing. Behind the input
(no `consume()` came back short) and at the bound, for `PAUSE_AFTER_S`, every
assigned partition is paused (librdkafka drops what it had fetched for them) and
resumed once half of the bound is free; while paused,
`consume()` is called each round, so rebalances and `max.poll.interval.ms` are
served while handlers wait.

**Each attempt on the message as consumed.** A handler that raises is retried up to
`max_attempts` with the same back-off as the sync loop's (awaited: other messages
go on meanwhile), each retry on the message decoded again (one decode per retry);
then it is dead-lettered as a logic error. A message over `message_budget_ms` is
cancelled where it awaits and dead-lettered with reason `budget` (checked every
`SWEEP_S`); a handler that blocks the event loop without awaiting is not
interrupted.

**Revoke and stop.** A revoke (inside `consume()`) releases and stores what is
finished, then forgets the partition: its messages still in flight are not
stored, and their handlers' results are dropped (the new owner handles them
again: duplicates at most what was in flight). A stop waits up to `grace_s` for
the handlers in flight, releases what finished and cancels the rest, unstored.

**Timed as the team's time.** `worker_handle_seconds` is each message's handler
wall time, awaits included (every message); `worker_handle_cpu_seconds` the CPU
of the handler's own steps (one message in 32, `CpuTimed`); decodes are timed one
in 32 as in the sync loop.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import structlog
from confluent_kafka import TopicPartition

from codec import Codec
from schemas.errors import FatalError
from service.delivery.dead_letters import PoisonHandler
from service.delivery.gated_writes import ConfirmedProducer
from service.delivery.transactions import Transactions
from service.kafka.protocols import KafkaMessage, WorkerConsumer
from service.loop.async_path.event_loop import new_event_loop
from service.loop.async_path.handling import SWEEP_S, Handling
from service.loop.async_path.inflight import Entry, PartitionTrack, ReleasedPositions
from service.loop.async_path.release import Release
from service.loop.timer_overhead import clock_overhead_ns
from service.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)

Ordering = str
"""`partition`, `key` or `none` (`ProcessingSettings.ordering`)."""

PAUSE_AFTER_S = 1.0
"""How long the worker must stay behind its input before the partitions are
paused. A pause drops what librdkafka had fetched for them, fetched again at the
resume: pausing as soon as the bound was reached made a worker whose in-flight
messages hovered at the bound (100 awaiting 0.1 s each at 1,000 msg/s) pause 145
times in 2.5 minutes and fall to 130 msg/s. Meanwhile nothing more is consumed
than the bound allows, so librdkafka's prefetch queue (`queued_max_messages_kbytes`)
is the most that waits."""


class NoHold:
    """The async path pauses for its bound, not for failed writes: never unready."""

    reason: str | None = None


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
            consumer_error=self._consumer_error,
        )
        self._release = Release(
            consumer,
            codec,
            metrics,
            self._handling,
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
        self._ordering = ordering
        self._grace_s = grace_s
        self._loop_kind = loop_kind
        self._topic = ""
        self._assignment: dict[int, TopicPartition] = {}
        self._tracks: dict[int, PartitionTrack] = {}
        self._lanes: dict[Any, deque[tuple[Entry, PartitionTrack]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._in_flight = 0
        self._finished = 0
        self._paused = False
        self._failed: BaseException | None = None
        """What a lane's or a message's task raised (a defect: `_ended`)."""
        self._at_bound = False
        """The in-flight messages were at the bound this round."""
        self._behind_since: float | None = None
        """Since when every `consume()` filled the room it asked for."""
        self._wake: asyncio.Future[None] | None = None
        self.hold = NoHold()
        self.heartbeat = time.monotonic()

    # -- rebalance callbacks (inside consume(), on the loop's thread) ---------------

    def assign(self, partitions: Sequence[Any]) -> None:
        """Partitions given to this consumer; paused at once if the bound is reached."""
        new = []
        for tp in partitions:
            self._topic = tp.topic
            new.append(TopicPartition(tp.topic, tp.partition))
            self._assignment[tp.partition] = new[-1]
        if self._paused and new:
            self._consumer.pause(new)

    def revoke(self, partitions: Sequence[int]) -> None:
        """Partitions taken away: what finished is released and stored; the rest
        is forgotten, never stored (its handlers' results are dropped)."""
        self._settle()
        for p in partitions:
            self._assignment.pop(p, None)
            track = self._tracks.pop(p, None)
            if track is not None:
                track.live = False
                self._in_flight -= len(track.entries)
                track.entries.clear()

    # -- the loop ---------------------------------------------------------------------

    def run(self, should_stop: Callable[[], bool], tick: Callable[[], None]) -> None:
        """Run rounds on a new event loop until `should_stop()`; then finish."""
        loop = new_event_loop(self._loop_kind)
        try:
            loop.run_until_complete(self._main(should_stop, tick))
        finally:  # a failure: the handlers still in flight are cancelled, unstored
            if left := list(self._tasks):
                for task in left:
                    task.cancel()
                loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            loop.close()

    async def _main(
        self, should_stop: Callable[[], bool], tick: Callable[[], None]
    ) -> None:
        consume, timeout = self._consumer.consume, self._timeout
        next_sweep = 0.0
        while not should_stop():
            if self._failed is not None:
                raise FatalError(
                    f"async loop failed: {self._failed!r}"
                ) from self._failed
            if self._finished:
                self._settle()
            asked = self._pace(self._max - self._in_flight)
            if not self._in_flight:  # nothing in flight to starve: wait here
                msgs = consume(asked, timeout)
            elif asked:
                msgs = consume(asked, 0)
            else:
                msgs = consume(1, 0) if self._paused else []  # rebalances, polls
            if asked and len(msgs) < asked:
                self._behind_since = None  # caught up with the input
            if msgs:
                self._dispatch(msgs)
                await asyncio.sleep(0)  # the new handlers start
            elif self._shadow is not None:
                self._shadow(())  # idle: its samples' delivery reports are served
            now = self.heartbeat = time.monotonic()
            if self._handling.budget_s and now >= next_sweep:
                next_sweep = now + SWEEP_S
                self._handling.sweep(now)
            tick()
            if self._in_flight and len(msgs) < max(1, asked):
                await self._wait(timeout)  # caught up, or full: let handlers run
        await self._stop()

    def _pace(self, room: int) -> int:
        """How many messages to ask for: the room left. Behind the input (every
        `consume()` since `_behind_since` filled the room it asked for, none came
        back short) and at the bound, for `PAUSE_AFTER_S`: the handlers are slower
        than the input, and every assigned partition is paused; resumed once half
        of the bound is free."""
        self._at_bound = room <= 0
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
        if self._paused and self._in_flight <= self._max // 2:
            self._paused = False
            self._behind_since = None
            if self._assignment:
                self._consumer.resume(list(self._assignment.values()))
        return min(self._size, room)

    async def _wait(self, timeout: float) -> None:
        """Until the timeout, or (at the bound) a quarter of it finished."""
        loop = asyncio.get_running_loop()
        self._wake = wake = loop.create_future()
        timer = loop.call_later(timeout, _wake_up, wake)
        try:
            await wake
        finally:
            timer.cancel()
            self._wake = None

    def _dispatch(self, msgs: Sequence[KafkaMessage]) -> None:
        tracks, lanes, ordering = self._tracks, self._lanes, self._ordering
        create = asyncio.get_running_loop().create_task
        for m in msgs:
            err = m.error()
            if err is not None:
                self._consumer_error(err)
                continue
            p = m.partition() or 0
            track = tracks.get(p)
            if track is None:
                track = tracks[p] = PartitionTrack()
                self._topic = m.topic() or self._topic  # where its offsets go
            entry = track.add(m)
            self._in_flight += 1
            if ordering == "none":
                self._watch(create(self._handle(entry, track)))
                continue
            key = p if ordering == "partition" else (p, m.key())
            lane = lanes.get(key)
            if lane is not None:
                lane.append((entry, track))
                continue
            lanes[key] = lane = deque(((entry, track),))
            self._watch(create(self._drain(key, lane)))

    def _watch(self, task: asyncio.Task[None]) -> None:
        """Keep `task` referenced until it ends; a failure of the loop's own code
        (a handler's exceptions are caught in `Handling`) stops the worker."""
        self._tasks.add(task)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            self._failed = self._failed or exc
            if self._wake is not None and not self._wake.done():
                self._wake.set_result(None)

    async def _drain(self, key: Any, lane: deque[tuple[Entry, PartitionTrack]]) -> None:
        """Handle a lane's messages one after another (a revoked partition's are
        skipped: the new owner handles them)."""
        try:
            while lane:
                entry, track = lane[0]
                if track.live:
                    await self._handle(entry, track)
                lane.popleft()
        finally:
            if self._lanes.get(key) is lane:
                del self._lanes[key]

    async def _handle(self, entry: Entry, track: PartitionTrack) -> None:
        await self._handling.handle(entry)
        entry.done = True
        if track.live:
            self._finished += 1
            wake, full = self._wake, self._at_bound
            if full and wake and not wake.done() and self._finished * 4 >= self._max:
                wake.set_result(None)

    def _settle(self) -> None:
        self._finished = 0
        self._in_flight -= self._release.settle(self._tracks, self._topic)

    @property
    def processed(self) -> int:
        """Messages released (handled, written, stored) so far."""
        return self._release.processed

    async def _stop(self) -> None:
        """Wait up to the grace period for the handlers in flight; release what
        finished; cancel the rest (never stored)."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=self._grace_s)
        left = list(self._tasks)
        for task in left:
            task.cancel()
        if left:
            await asyncio.gather(*left, return_exceptions=True)
            log.warning("handlers_cancelled_at_stop", tasks=len(left))
        self._settle()

    def _consumer_error(self, err: Any) -> None:
        self._m.consumer_errors.labels(err.name()).inc()
        if err.fatal():
            raise FatalError(f"fatal consumer error: {err.name()}: {err.str()}")
        log.error("consumer_error", code=err.name(), error=err.str())


def _wake_up(wake: asyncio.Future[None]) -> None:
    if not wake.done():
        wake.set_result(None)
