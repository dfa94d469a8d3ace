"""One producer's paced run: `ProducerLoop` sends its share of a run on schedule.

Pacing: every 1-50 ms the loop computes how many messages are due by now, stamps
them (a `range` of nanoseconds for a rate pattern: nothing is computed per
message) and hands them to the sender (`loadgen.sender`) in one tight loop, then
`poll(0)` once; it sleeps until the next message is due (at least 1 ms, at most
50 ms). A late slice sends its whole backlog at once, so the rate recovers and the
delay shows up in the send lag, not as a silently stretched schedule. `rate = 0`
sends bursts of `BURST` messages, unthrottled, each stamped with the time of its
burst. With `processes = N`, shard i sends seqs i, i+N, ... on the same global
schedule.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from confluent_kafka import Producer

from loadgen.config import LoadgenSettings
from loadgen.report import Tick, bucketize
from loadgen.schedule import Schedule, TableSchedule, build_schedule, plan, shard_count
from loadgen.sender import SenderFactory, Stamps, make_sender
from loadgen.source import Source, value_bytes_sent
from service.telemetry.log_setup import KafkaErrors

SLICE_MIN_S: Final = 0.001
"""Shortest sleep between slices: at most 1000 slices a second, each worth a `poll()`."""
SLICE_MAX_S: Final = 0.05
"""Longest sleep between slices: the loop still ticks and checks `stop` every 100 ms."""
TICK_S: Final = 0.1
"""Seconds between `Tick`s (progress, metrics and the stop check: 10 a second)."""
BURST: Final = 2000
"""Messages per slice when unthrottled (~10 ms at 200k msg/s)."""
MAX_SLICE: Final = 20_000
"""At most this many messages per slice when behind, so `poll()` stays frequent."""


@dataclass(frozen=True)
class Clock:
    """The time sources of the loop (tests pass a fake one)."""

    now: Callable[[], float] = time.perf_counter
    sleep: Callable[[float], None] = time.sleep
    wall_ns: Callable[[], int] = time.time_ns


class ProducerLoop:
    """One producer process's run: pace, produce, stamp, count, report ticks.

    Args:
        s: the settings.
        source: what to send.
        shard: this process's index (it sends seqs shard, shard + processes, ...).
        sink: receives a `Tick` every `TICK_S` and a final one (`done`).
        clock: time sources.
        producer_factory: builds the producer from a librdkafka config dict.
        sender_factory: builds the per-message send loop (`loadgen.sender`;
            `loadgen.fanout` writes each message to several topics).
    """

    def __init__(
        self,
        s: LoadgenSettings,
        source: Source,
        shard: int,
        sink: Callable[[Tick], None],
        *,
        clock: Clock = Clock(),  # immutable
        producer_factory: Callable[[dict[str, Any]], Any] = Producer,
        sender_factory: SenderFactory = make_sender,
    ) -> None:
        self.make_sender = sender_factory
        self.s, self.source, self.shard, self.sink = s, source, shard, sink
        self.clock = clock
        self.acks: list[float] = []
        self.errors: list[Any] = []
        self.lags: list[float] = []
        self.lag_weights: list[int] = []
        self.per_second: dict[int, int] = {}
        self.sent = self.reported = self.due = 0
        self.last_send = 0.0
        self.cpu0 = (0.0, 0.0)
        self.schedule = build_schedule(s, source)
        total, _ = plan(s, self.schedule, source)
        self.limit = None if total is None else shard_count(total, shard, s.processes)
        ack, err = self.acks.append, self.errors.append

        def on_delivery(error: Any, msg: Any) -> None:
            if error is None:
                ack(msg.latency() or 0.0)
            else:
                err(error)

        self.ready = not s.idempotence

        def on_stats(stats: str) -> None:
            if not self.ready:
                self.ready = '"idemp_state": "Assigned"' in stats

        conf = s.producer_config(plaintext_secrets=True)
        # A broker that goes away mid-run: one clear line, then a reminder every
        # 30 s, instead of an error line per reconnect (~20 a second).
        errors = KafkaErrors(s.kafka.bootstrap_servers)
        conf.update(on_delivery=on_delivery, stats_cb=on_stats, error_cb=errors)
        if s.idempotence:  # stats are the only place librdkafka shows its PID state
            conf["statistics.interval.ms"] = 100
        self.producer = producer_factory(conf)

    def warm_up(self, timeout: float = 15.0) -> None:
        """Fetch the topic's metadata and, if idempotent, the producer id.

        Otherwise the first messages would wait for both, and the start-up delay
        would show up as acknowledgement latency of the run.
        """
        self.producer.list_topics(self.s.topic, timeout=10)
        deadline = time.monotonic() + timeout
        while not self.ready and time.monotonic() < deadline:
            self.producer.poll(0.02)

    def close(self) -> None:
        """Shut the producer down (its threads would otherwise outlive the run)."""
        self.producer.close()

    def run(self, start_wall_ns: int, should_stop: Callable[[], bool]) -> bool:
        """Produce until done; return True if stopped early."""
        clock = self.clock
        t0 = clock.now() + (start_wall_ns - clock.wall_ns()) / 1e9
        while (wait := t0 - clock.now()) > 0:
            clock.sleep(min(wait, 0.05))
        self.cpu0 = (time.thread_time(), time.process_time())
        # Millions of short-lived header lists would trigger a young-generation
        # collection every 700 allocations; the pool and settings never change.
        threshold, freeze = gc.get_threshold(), gc.get_freeze_count() == 0
        if freeze:  # not if the embedding program froze objects of its own
            gc.freeze()
        gc.set_threshold(100_000, 50, 50)
        try:
            interrupted = self._loop(t0, start_wall_ns, should_stop)
        finally:
            gc.set_threshold(*threshold)
            if freeze:
                gc.unfreeze()
        self._drain(t0)
        return interrupted

    def _loop(self, t0: float, wall0: int, should_stop: Callable[[], bool]) -> bool:
        s, shard, stride, sched = self.s, self.shard, self.s.processes, self.schedule
        send = self.make_sender(self.producer.produce, s, self.source, stride)
        poll, clock, sleep = self.producer.poll, self.clock.now, self.clock.sleep
        limit = math.inf if self.limit is None else self.limit
        end = s.duration if sched is None and s.duration else math.inf
        per_second, lags, lag_w = self.per_second, self.lags, self.lag_weights
        next_tick, sent = t0 + TICK_S, 0
        while sent < limit:
            now = clock()
            rel = now - t0
            if rel >= end:
                break
            if sched is None:
                want = int(min(sent + BURST, limit))
                first = shard + sent * stride
                stamps: Stamps = wall0 + int(rel * 1e9)
            else:
                want = int(min(shard_count(sched.due(rel), shard, stride), limit))
                first = shard + sent * stride
            n = min(want - sent, MAX_SLICE)
            if n > 0:
                if sched is not None:
                    stamps = self._stamps(sched, wall0, first, n, stride)
                    lags.append(rel - sched.time_of(first))
                    lag_w.append(n)
                k = send(first, n, stamps)
                sent += k
                second = int(rel)
                per_second[second] = per_second.get(second, 0) + k
                self.last_send = rel
                if k < n:  # queue full: serve delivery reports, then retry
                    poll(0.005)
            poll(0)
            self.sent, self.due = sent, want
            if now >= next_tick:
                next_tick = now + TICK_S
                self._tick(rel)
                if should_stop():
                    return True
            if sched is not None and sent < limit:
                wait = sched.time_of(shard + sent * stride) - (clock() - t0)
                if wait > 0:
                    sleep(min(max(wait, SLICE_MIN_S), SLICE_MAX_S))
        return False

    @staticmethod
    def _stamps(
        sched: Schedule, wall0: int, first: int, n: int, stride: int
    ) -> Iterable[int]:
        start = wall0 + int(sched.time_of(first) * 1e9)
        if n == 1:
            return (start,)
        if isinstance(sched, TableSchedule):
            seqs = range(first, first + n * stride, stride)
            return [wall0 + int(sched.time_of(q) * 1e9) for q in seqs]
        last = wall0 + int(sched.time_of(first + (n - 1) * stride) * 1e9)
        step = max(1, round((last - start) / (n - 1)))
        return range(start, start + n * step, step)

    def _drain(self, t0: float) -> None:
        now = self.clock.now
        deadline = now() + self.s.delivery_timeout_s + 5
        while len(self.producer) and now() < deadline:
            self.producer.poll(0.05)
            self._tick(now() - t0)
        if len(self.producer):  # fail what is left: reported, never dropped silently
            self.producer.purge()
            self.producer.poll(1.0)
        self.errors.extend(["undelivered at exit"] * len(self.producer))
        self._tick(now() - t0, done=True)

    def _tick(self, rel: float, *, done: bool = False) -> None:
        acks, errors = self.acks.copy(), self.errors.copy()
        self.acks.clear()
        self.errors.clear()
        ack_idx, ack_cnt = bucketize(acks)
        lag_idx, lag_cnt = bucketize(self.lags, self.lag_weights)
        names: dict[str, int] = {}
        for e in errors:
            name = e if isinstance(e, str) else e.name()
            names[name] = names.get(name, 0) + 1
        sched = self.schedule
        tick = Tick(
            shard=self.shard,
            elapsed_s=rel,
            sent=self.sent - self.reported,
            acked=len(acks),
            failed=len(errors),
            due=self.due,
            target_rate=sched.rate_at(rel) / self.s.processes if sched else 0.0,
            last_send_s=self.last_send,
            per_second=self.per_second.copy(),
            ack_idx=ack_idx,
            ack_cnt=ack_cnt,
            ack_sum=float(sum(acks)),
            ack_max=max(acks, default=0.0),
            lag_idx=lag_idx,
            lag_cnt=lag_cnt,
            lag_max=max(self.lags, default=0.0),
            errors=names,
            done=done,
        )
        if done:
            tick.value_bytes = value_bytes_sent(
                self.source, self.s, self.shard, self.sent
            )
            tick.main_cpu_s = time.thread_time() - self.cpu0[0]
            tick.process_cpu_s = time.process_time() - self.cpu0[1]
        self.reported = self.sent
        self.per_second.clear()
        self.lags.clear()
        self.lag_weights.clear()
        self.sink(tick)
