"""The async path: a team's async handler, awaited on an event loop, at-least-once.

An `async def` handler (or a callable returning an awaitable) runs here instead of
in the sync batch loop (`service.loop.batch_loop`), which is left as it is. One
thread runs the event loop (uvloop, `service.loop.event_loop`); every consumer call
is made from it (librdkafka's batch consume is not safe beside a pause, resume or
seek from another thread). Each round:

1. `consume()`: blocking for the batch wait when nothing is in flight (no handler
   to starve), else without waiting, for at most the room left under
   `max_in_flight`;
2. each message gets an `Entry` in its partition's `PartitionTrack` and goes to its
   lane: `--ordering partition` handles a partition's messages one after another,
   `key` those of one key of a partition (keyless ones share a lane), `none` every
   message in a task of its own;
3. the messages finished at the front of each partition (the contiguous completed
   prefix, `service.loop.inflight`) are released: their results written to the
   output topic and their dead letters to the DLQ, both confirmed by the broker,
   then their offsets stored (exactly-once: written and committed in one
   transaction with exactly those offsets), then counted in the metrics;
4. wait up to the batch wait for the handlers (woken early when paused).

**Bounded.** Messages in flight (consumed, not released) never pass `max_in_flight`
by more than one `consume()`: at the bound every assigned partition is paused
(librdkafka drops what it had fetched for them) and resumed once half of it is
free; `consume()` is still called each round, so rebalances and
`max.poll.interval.ms` are served while handlers wait.

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
import inspect
import time
from collections import deque
from collections.abc import Callable, Sequence
from time import perf_counter_ns, time_ns
from typing import Any, Final

import structlog
from confluent_kafka import TopicPartition

from codec import Codec
from schemas.errors import DeliveryError, FatalError
from service.delivery.dead_letters import Poison, PoisonHandler
from service.delivery.gated_writes import ConfirmedProducer
from service.delivery.outputs import emitter
from service.delivery.transactions import NoTransactions, Transactions
from service.kafka.headers import sent_ages
from service.kafka.protocols import KafkaMessage, WorkerConsumer
from service.loop.event_loop import CpuTimed, new_event_loop
from service.loop.hotpath import _UNDECODED, MessagePath, Tally, _Unusable
from service.loop.inflight import Entry, PartitionTrack, ReleasedPositions
from service.loop.message_budget import OverBudget
from service.loop.timer_overhead import clock_overhead_ns
from service.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)

SAMPLE_EVERY: Final = 32
"""Time the decode and the handler's CPU of every 32nd message (`CpuTimed`)."""
SWEEP_S: Final = 0.1
"""How often the message budget is checked (its resolution)."""
Ordering = str
"""`partition`, `key` or `none` (`ProcessingSettings.ordering`)."""


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
    ) -> None:
        self._consumer = consumer
        self._m = metrics
        self._poison = poison
        self._output = output
        self._emit = None if output is None else emitter(codec, *output, results=True)
        self._path = MessagePath(
            codec,
            step=None,
            emit=None,
            max_payload_bytes=max_payload_bytes,
            consumer_error=self._consumer_error,
            retried=metrics.logic_retries.inc,
        )
        self._decode = codec.decode_unchecked
        self._codec_name = codec.name
        self._limit = max_payload_bytes
        self._step = step
        self._size = batch_size
        self._timeout = batch_timeout_s
        self._max = max_in_flight
        self._ordering = ordering
        self._attempts = max_attempts
        self._backoff_s = retry_backoff_ms / 1000.0
        self._txn: Transactions | NoTransactions = transactions or NoTransactions()
        self._positions = positions
        self._every = latency_sample_every
        self._phase = 0
        self._budget_s = budget_s
        self._grace_s = grace_s
        self._loop_kind = loop_kind
        self._clock_ns = clock_overhead_ns()
        metrics.timer_overhead.set(self._clock_ns * 1e-9)
        self._topic = ""
        self._assignment: dict[int, TopicPartition] = {}
        self._tracks: dict[int, PartitionTrack] = {}
        self._lanes: dict[Any, deque[tuple[Entry, PartitionTrack]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._running: dict[Entry, tuple[float, asyncio.Task[Any]]] = {}
        self._over: set[Entry] = set()
        self._in_flight = 0
        self._finished = 0
        self._paused = False
        self._wake: asyncio.Future[None] | None = None
        self._counter = 0
        self._handle_ns: list[int] = []
        self._cpu_ns: list[int] = []
        self._decode_ns: list[int] = []
        self._errors = 0
        self.hold = NoHold()
        self.processed = 0
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
        finally:
            loop.close()

    async def _main(
        self, should_stop: Callable[[], bool], tick: Callable[[], None]
    ) -> None:
        consume, size, timeout = self._consumer.consume, self._size, self._timeout
        next_sweep = 0.0
        while not should_stop():
            room = self._max - self._in_flight
            self._pace(room)
            if not self._in_flight:
                msgs = consume(size, timeout)
            else:
                msgs = consume(max(1, min(size, room)), 0)
            if msgs:
                self._dispatch(msgs)
                await asyncio.sleep(0)  # the new handlers start
            if self._finished:
                self._settle()
            now = self.heartbeat = time.monotonic()
            if self._budget_s and now >= next_sweep:
                next_sweep = now + SWEEP_S
                self._sweep(now)
            tick()
            if self._in_flight and len(msgs) < size:
                await self._wait(timeout)
        await self._stop()

    def _pace(self, room: int) -> None:
        """Pause every assigned partition at the bound; resume at half of it."""
        parts = list(self._assignment.values())
        if not self._paused and room <= 0:
            self._paused = True
            if parts:
                self._consumer.pause(parts)
            self._m.async_pauses.inc()
        elif self._paused and self._in_flight <= self._max // 2:
            self._paused = False
            if parts:
                self._consumer.resume(parts)

    async def _wait(self, timeout: float) -> None:
        """Until the timeout, or a handler finishing while paused."""
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
                self._errors += 1
                self._consumer_error(err)
                continue
            p = m.partition() or 0
            track = tracks.get(p)
            if track is None:
                track = tracks[p] = PartitionTrack()
            entry = track.add(m)
            self._in_flight += 1
            if ordering == "none":
                task = create(self._handle(entry, track))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                continue
            key = p if ordering == "partition" else (p, m.key())
            lane = lanes.get(key)
            if lane is not None:
                lane.append((entry, track))
                continue
            lanes[key] = lane = deque(((entry, track),))
            task = create(self._drain(key, lane))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

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
        """Decode, then await the handler (retried on a fresh decode); the entry
        is done with its result or its poison."""
        m = entry.message
        self._counter += 1
        sampled = self._counter % SAMPLE_EVERY == 0
        obj = self._decoded(entry, sampled)
        if obj is not _UNDECODED:
            self._running[entry] = (time.monotonic(), asyncio.current_task())  # type: ignore[assignment]
            try:
                await self._attempts_of(entry, obj, sampled)
            except asyncio.CancelledError:
                if entry not in self._over:
                    raise  # a stop: not done, never stored
                self._over.discard(entry)
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
                entry.poison = Poison.over_budget(
                    m,
                    self._codec_name,
                    OverBudget(self._budget_s, self._budget_s),
                    "process",
                )
            finally:
                self._running.pop(entry, None)
        entry.done = True
        if track.live:
            self._finished += 1
            if self._paused and self._wake is not None and not self._wake.done():
                self._wake.set_result(None)

    async def _attempts_of(self, entry: Entry, obj: Any, sampled: bool) -> None:
        m, step, clock = entry.message, self._step, perf_counter_ns
        attempt = 1
        while True:
            t0 = clock()
            try:
                out = step(obj)
                if inspect.isawaitable(out):
                    if sampled:
                        timed = CpuTimed(out)
                        out = await timed
                        self._cpu_ns.append(timed.cpu_ns)
                    else:
                        out = await out
            except Exception as exc:
                if attempt >= self._attempts:
                    entry.poison = Poison.rejected(m, exc, attempt)
                    return
                attempt += 1
                await asyncio.sleep(self._backoff_s * 2 ** (attempt - 2))
                self._m.logic_retries.inc()
                try:
                    obj = self._path._fresh(m)
                except Exception as again:  # decoded once: a fluke, but not lost
                    entry.poison = Poison.undecodable(m, self._codec_name, again)
                    return
                continue
            self._handle_ns.append(clock() - t0)
            entry.out = out
            return

    def _decoded(self, entry: Entry, sampled: bool) -> Any:
        m = entry.message
        value = m.value()
        path = self._path
        try:
            if len(value) > self._limit:  # type: ignore[arg-type]
                raise _Unusable
            decode = self._decode if path._pick is None else path._pick(m)
            if not sampled:
                return decode(value)  # type: ignore[arg-type]
            t0 = perf_counter_ns()
            obj = decode(value)  # type: ignore[arg-type]
            self._decode_ns.append(perf_counter_ns() - t0)
            return obj
        except MemoryError:
            raise
        except Exception as exc:
            tally = Tally()
            obj = path._failed(m, exc, tally)
            if obj is _UNDECODED:
                entry.poison = tally.poison[0]
            return obj

    def _sweep(self, now: float) -> None:
        """Cancel, where they await, the handlers past the message budget."""
        for entry, (start, task) in list(self._running.items()):
            if now - start > self._budget_s and entry not in self._over:
                self._over.add(entry)
                task.cancel()

    # -- release: writes confirmed, then offsets -----------------------------------------

    def _settle(self) -> None:
        """Release each partition's finished prefix: write, confirm, store, count."""
        self._finished = 0
        ready = [(p, t, n) for p, t in self._tracks.items() if (n := t.done_prefix())]
        if not ready:
            return
        emit = self._emit
        self._txn.begin()
        try:
            poison: list[Poison] = []
            for _p, track, n in ready:
                for i in range(n):
                    entry = track.entries[i]
                    if entry.poison is not None:
                        poison.append(entry.poison)
                    elif emit is not None and entry.out is not None:
                        self._write(emit, entry, poison)
            if poison:
                self._poison.reject(poison)
                self._poison.confirm()
            if self._output is not None and self._output[0].pending:
                self._output[0].confirm()
            released = {p: t.entries[n - 1].message.offset() + 1 for p, t, n in ready}  # type: ignore[operator]
            if self._positions is not None:
                self._positions.released = released
            self._txn.commit([TopicPartition(self._topic, p) for p in released], ())
        except DeliveryError as exc:
            self._txn.abort()
            self._poison.abandon()
            if self._output is not None:
                self._output[0].abandon()
            raise FatalError(
                f"writes not confirmed ({exc}): the worker stops, their offsets "
                "unstored, so a restart handles those messages again"
            ) from None
        entries: list[Entry] = []
        offsets = []
        for p, track, n in ready:
            done, offset = track.release(n)
            entries += done
            offsets.append(TopicPartition(self._topic, p, offset))
        self._in_flight -= len(entries)
        self._consumer.store_offsets(offsets=offsets)
        self._observe(entries)

    def _write(self, emit: Any, entry: Entry, poison: list[Poison]) -> None:
        try:
            emit(entry.message, None, entry.out)
        except (MemoryError, DeliveryError):
            raise
        except Exception as exc:
            entry.poison = Poison.unencodable(entry.message, self._codec_name, exc)
            poison.append(entry.poison)

    def _observe(self, entries: list[Entry]) -> None:
        m = self._m
        n = len(entries)
        bad = [e.poison for e in entries if e.poison is not None]
        if n - len(bad):
            m.ok.value += n - len(bad)
        logic = sum(1 for p in bad if p.stage in ("process", "encode"))
        if logic:
            m.logic_errors.inc(logic)
        if len(bad) - logic:
            m.decode_errors.inc(len(bad) - logic)
        clock = self._clock_ns
        for samples, hist in (
            (self._decode_ns, m.decode_seconds),
            (self._handle_ns, m.handle_seconds),
            (self._cpu_ns, m.handle_cpu_seconds),
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
