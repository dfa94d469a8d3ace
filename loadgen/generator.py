"""The load generator's core: payload pool, rate schedule, paced producing, stamping.

Schedule: message k of a run is due at t_k = N^-1(k), where N(t) counts the
messages the rate pattern asks for by time t (message 0 at t = 0; a run of T
seconds sends the messages with t_k < T, so each second [s, s+1) holds its rate). Rates are piecewise linear (constant,
ramp, step, spike), so N is piecewise quadratic and inverts in closed form; a paced
replay uses its recorded timestamps instead. `x-sent-ns` and the Kafka timestamp are
t_k on the wall clock, whenever the message actually leaves (coordinated omission).

Pacing: every 1-50 ms the loop computes how many messages are due by now, stamps
them (a `range` of nanoseconds for a rate pattern: nothing is computed per
message) and hands them to `produce()` in one tight loop, then `poll(0)` once;
it sleeps until the next message is due (at least 1 ms, at most 50 ms). A late
slice sends its whole backlog at once, so the rate recovers and the delay shows up
in the send lag, not as a silently stretched schedule. `rate = 0` sends bursts of
`BURST` messages, unthrottled, each stamped with the time of its burst.

Processes: `processes = N` runs N producers; process i sends seqs i, i+N, ... on the
same global schedule, so together they send seq 0..n-1 at the rate asked.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import math
import multiprocessing as mp
import queue as queue_mod
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

import msgspec
import numpy as np
from confluent_kafka import KafkaException, Producer
from prometheus_client import CollectorRegistry

from loadgen.config import LoadgenSettings
from loadgen.metrics import LoadgenMetrics, MetricsServer
from loadgen.payloads import make_payloads
from loadgen.report import Aggregator, Progress, Summary, Tick, bucketize
from loadgen.schedule import RateSchedule, Schedule, TableSchedule, rate_pieces
from service.codecs import get_codec
from service.errors import ConfigError, LoadgenError

SLICE_MIN_S: Final = 0.001
SLICE_MAX_S: Final = 0.05
TICK_S: Final = 0.1
BURST: Final = 2000
"""Messages per slice when unthrottled (~10 ms at 200k msg/s)."""
MAX_SLICE: Final = 20_000
"""At most this many messages per slice when behind, so `poll()` stays frequent."""
START_DELAY_S: Final = 0.2
METADATA_TIMEOUT_S = 10.0
_ENTITY: Final = {"small": "id", "medium": "order_id", "large": "plan_id"}


@dataclass
class Source:
    """What to send, indexed by seq modulo its length (built once, before the run).

    Attributes:
        values: encoded payloads.
        keys: message keys (None: no key).
        content_type: the one `content-type` of every message, if they share one.
        content_types: per message (a replay without transcoding), else None.
        extra_headers: recorded headers kept as they were (replay), else None.
        partitions: partition per message (replay with kept partitions), else None.
        times_s: recorded send times for a paced replay, else None.
        period_s: a paced replay's length, gap to its first message included.
        builtins: payloads to encode per message (`encode_live`), else None.
    """

    values: list[bytes | None]
    keys: list[bytes | None]
    content_type: bytes | None = None
    content_types: list[bytes | None] | None = None
    extra_headers: list[tuple[tuple[str, bytes | None], ...]] | None = None
    partitions: list[int] | None = None
    times_s: list[float] | None = None
    period_s: float = 0.0
    builtins: list[dict[str, Any]] | None = None


def synthetic_source(s: LoadgenSettings) -> Source:
    """A pool of `pool_size` seeded payloads, encoded with the settings' codec."""
    codec = get_codec(s.codec, s.profile)
    payloads = make_payloads(
        s.profile, s.pool_size, seed=s.seed, large_bytes=s.large_bytes
    )
    values: list[bytes | None] = [
        codec.encode(codec.from_builtins(p)) for p in payloads
    ]
    field = _ENTITY[s.profile]
    keys = [None if s.key == "none" else str(p[field]).encode() for p in payloads]
    return Source(
        values,
        keys,
        content_type=codec.content_type.encode(),
        builtins=payloads if s.encode_live else None,
    )


def build_schedule(s: LoadgenSettings, source: Source) -> Schedule | None:
    """The run's schedule; None when unthrottled."""
    if s.paced_replay and source.times_s is not None:
        speed = s.speed or 1.0
        return TableSchedule(
            [t / speed for t in source.times_s], source.period_s / speed
        )
    return RateSchedule(rate_pieces(s)) if s.rate > 0 else None


def plan(
    s: LoadgenSettings, schedule: Schedule | None, source: Source
) -> tuple[int | None, float]:
    """(messages to send or None, planned window in seconds) for the run."""
    count, duration = s.count, s.duration
    if count is None and duration is None:
        count, duration = (len(source.values), None) if s.replay else (None, 60.0)
    if schedule is None:
        return count, duration or 0.0
    by_time = schedule.count_before(duration) if duration is not None else None
    if count is not None and (by_time is None or count < by_time):
        return count, schedule.time_of(count)
    assert by_time is not None and duration is not None  # noqa: S101  # one is set
    return by_time, duration


def shard_count(total: int, shard: int, shards: int) -> int:
    """How many of seqs 0..total-1 are congruent to `shard` modulo `shards`."""
    return max(0, (total - shard + shards - 1) // shards)


Stamps = Iterable[int] | int
"""Intended send times (ns since the epoch) of a slice: one each, or one for all."""

Sender = Callable[[int, int, Stamps], int]
"""`send(first_seq, n, stamps_ns) -> sent`: produce seqs first, first+stride, ..."""


def make_sender(
    produce: Callable[..., None],
    s: LoadgenSettings,
    source: Source,
    stride: int,
) -> Sender:
    """The hot loop for this run's options, chosen once.

    Performance note: the common case (a pre-encoded pool, one content type, keys
    from the pool) builds 4 header tuples and calls `produce()`; anything else
    takes the general loop, which costs ~0.3 us more per message.
    """
    topic, values, keys, count = s.topic, source.values, source.keys, len(source.values)
    run_h = ("x-run-id", s.run_id.encode())
    general = (
        source.content_type is None
        or source.extra_headers is not None
        or source.partitions is not None
        or source.builtins is not None
        or s.key == "seq"
    )
    if not general:
        ct_h = ("content-type", source.content_type)

        def send(first: int, n: int, stamps: Stamps) -> int:
            seq = first
            seqs = range(first, first + n * stride, stride)
            try:
                if isinstance(stamps, int):  # unthrottled: one stamp per burst
                    sent_h, ms = ("x-sent-ns", b"%d" % stamps), stamps // 1_000_000
                    for seq in seqs:
                        i = seq % count
                        produce(topic, values[i], keys[i], -1, None, None, ms, [sent_h, ct_h, ("x-seq", b"%d" % seq), run_h])  # fmt: skip
                    return n
                for seq, ns in zip(seqs, stamps, strict=False):
                    i = seq % count
                    # Positional (topic, value, key, partition, callback,
                    # on_delivery, timestamp, headers): 0.4 us less than keywords.
                    produce(topic, values[i], keys[i], -1, None, None, ns // 1_000_000, [("x-sent-ns", b"%d" % ns), ct_h, ("x-seq", b"%d" % seq), run_h])  # fmt: skip
            except BufferError:
                return (seq - first) // stride
            return n

        return send
    return _general_sender(produce, s, source, stride, run_h)


def _general_sender(
    produce: Callable[..., None],
    s: LoadgenSettings,
    source: Source,
    stride: int,
    run_h: tuple[str, bytes],
) -> Sender:
    topic, values, keys, count = s.topic, source.values, source.keys, len(source.values)
    value_of: Callable[[int], bytes | None] = values.__getitem__
    if source.builtins is not None:
        codec = get_codec(s.codec, s.profile)
        natives, encode = (
            [codec.from_builtins(b) for b in source.builtins],
            codec.encode,
        )
        value_of = lambda i: encode(natives[i])  # noqa: E731
    cts = source.content_types or [source.content_type] * count
    pre = [(("content-type", ct),) if ct is not None else () for ct in cts]
    post = [(run_h, *extra) for extra in source.extra_headers or [()] * count]
    parts = source.partitions or [-1] * count
    seq_keys = s.key == "seq" and s.replay is None

    def send(first: int, n: int, stamps: Stamps) -> int:
        seq = first
        if isinstance(stamps, int):
            stamps = itertools.repeat(stamps)
        try:
            for seq, ns in zip(
                range(first, first + n * stride, stride), stamps, strict=False
            ):
                i = seq % count
                key = b"%d" % seq if seq_keys else keys[i]
                headers = [("x-sent-ns", b"%d" % ns), *pre[i], ("x-seq", b"%d" % seq), *post[i]]  # fmt: skip
                produce(topic, value_of(i), key, parts[i], None, None, ns // 1_000_000, headers)  # fmt: skip
        except BufferError:
            return (seq - first) // stride
        return n

    return send


def value_bytes_sent(source: Source, s: LoadgenSettings, shard: int, sent: int) -> int:
    """Value bytes of seqs shard, shard+stride, ... (computed once, at the end).

    Seq s sends payload s mod L, so the payloads cycle every L / gcd(stride, L)
    messages: one cycle is summed, not every message of an hour-long run.
    """
    if s.encode_live and source.builtins is not None:
        codec = get_codec(s.codec, s.profile)
        sizes = np.array(
            [len(codec.encode(codec.from_builtins(b))) for b in source.builtins]
        )
    else:
        sizes = np.array([len(v or b"") for v in source.values])
    pool, stride = len(sizes), s.processes
    cycle = sizes[(shard + np.arange(pool // math.gcd(stride, pool)) * stride) % pool]
    laps, rest = divmod(sent, len(cycle))
    return int(laps * cycle.sum() + cycle[:rest].sum())


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
    ) -> None:
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
        conf.update(on_delivery=on_delivery, stats_cb=on_stats)
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
        send = make_sender(self.producer.produce, s, self.source, stride)
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
            return [wall0 + int(sched.time_of(q) * 1e9) for q in range(first, first + n * stride, stride)]  # fmt: skip
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


def topic_partitions(s: LoadgenSettings) -> int:
    """The topic's partition count, checked before any process starts.

    Also validates the librdkafka settings (a probe producer is built from them).

    Raises:
        ConfigError: librdkafka rejects a setting, or the topic does not exist.
        LoadgenError: Kafka cannot be reached.
    """
    # Not idempotent (no producer id to fetch); no auto-creation (a typo in the
    # topic must not create a topic); log_level 2: an unreachable broker is
    # reported once, below, rather than every 50 ms.
    conf = s.producer_config(plaintext_secrets=True)
    conf.update(
        {"enable.idempotence": False, "allow.auto.create.topics": False, "log_level": 2}
    )
    try:
        probe = Producer(conf)
    except KafkaException as exc:
        msg = exc.args[0].str() if exc.args else exc
        raise ConfigError(
            f"config error: librdkafka refused a setting: {msg}"
        ) from None
    try:
        meta = probe.list_topics(s.topic, timeout=METADATA_TIMEOUT_S).topics.get(
            s.topic
        )
    except KafkaException as exc:
        raise LoadgenError(
            f"cannot reach Kafka at {s.bootstrap_servers}: {exc}"
        ) from None
    if meta is None or meta.error is not None or not meta.partitions:
        raise ConfigError(
            f"config error: topic (--topic, LOADGEN_TOPIC) = {s.topic!r}: no such "
            f"topic on {s.bootstrap_servers} (create it first)"
        )
    return len(meta.partitions)


def _child(
    s: LoadgenSettings, source: Source, shard: int, start: Any, out: Any, stop: Any
) -> None:
    """A producer process: report ready, wait for the shared start, run."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    encode = msgspec.msgpack.encode
    try:
        runner = ProducerLoop(s, source, shard, lambda t: out.put(encode(t)))
        runner.warm_up()
        out.put(encode(Tick(shard=shard, elapsed_s=-1.0)))
        while not start.value:
            time.sleep(0.005)
        if stop.is_set():  # another process failed before the start
            runner.sink(Tick(shard=shard, done=True))
        else:
            runner.run(start.value, stop.is_set)
        runner.close()
    except Exception as exc:  # reported to the parent, which fails the run
        out.put(encode(Tick(shard=shard, done=True, fatal=repr(exc))))


def _run_processes(
    s: LoadgenSettings, source: Source, merge: Callable[[Tick], None], stop: Any
) -> bool:
    ctx = mp.get_context("spawn")
    out, stop_ev, start = ctx.Queue(), ctx.Event(), ctx.Value("q", 0)
    procs = [
        ctx.Process(
            target=_child, args=(s, source, i, start, out, stop_ev), daemon=True
        )
        for i in range(s.processes)
    ]
    for proc in procs:
        proc.start()
    decode, ready, done = msgspec.msgpack.Decoder(Tick).decode, 0, 0
    try:
        while done < len(procs):
            if stop() and not stop_ev.is_set():
                stop_ev.set()
            try:
                tick = decode(out.get(timeout=0.1))
            except queue_mod.Empty:
                if any(p.exitcode not in (None, 0) for p in procs):
                    raise LoadgenError("a producer process died") from None
                continue
            if tick.elapsed_s < 0:
                ready += 1
                if ready == len(procs):
                    start.value = time.time_ns() + int(START_DELAY_S * 1e9)
                continue
            if tick.fatal:  # stop the others, and release any still waiting
                stop_ev.set()
                start.value = start.value or time.time_ns()
            done += tick.done
            merge(tick)
    finally:
        stop_ev.set()
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
    return bool(stop())


def run(
    settings: LoadgenSettings,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> Summary:
    """Run one load-generation run and return its summary (the library API).

    Args:
        settings: the validated settings.
        on_progress: called with a snapshot after every tick (~10 times a second).
        stop: polled every tick; returning True ends the run early (graceful).

    Raises:
        ConfigError: the topic is missing, or the replay file or its options are bad.
        LoadgenError: Kafka is unreachable or a producer process failed.
    """
    s, should_stop = settings, stop or (lambda: False)
    if s.replay is not None:
        from loadgen.recording import replay_source

        source = replay_source(s, topic_partitions(s))
    else:
        topic_partitions(s)
        source = synthetic_source(s)
    schedule = build_schedule(s, source)
    total, window = plan(s, schedule, source)
    agg = Aggregator(s.processes, window, total if schedule is not None else None)
    registry = CollectorRegistry()
    metrics = LoadgenMetrics(registry, s.codec_label, agg.ack)
    server = None
    if s.metrics_port is not None:
        server = MetricsServer(registry, s.metrics_host, s.metrics_port)

    def merge(tick: Tick) -> None:
        agg.merge(tick)
        progress = agg.progress()
        metrics.update(
            tick.sent, tick.acked, tick.failed, progress.target_rate,
            progress.last_second_rate,
        )  # fmt: skip
        if on_progress is not None:
            on_progress(progress)

    try:
        if s.processes == 1:
            shard = ProducerLoop(s, source, 0, merge)
            try:
                shard.warm_up()
                start = time.time_ns() + int(START_DELAY_S * 1e9)
                interrupted = shard.run(start, should_stop)
            finally:
                shard.close()
        else:
            interrupted = _run_processes(s, source, merge, should_stop)
    finally:
        if server is not None:
            with contextlib.suppress(Exception):
                server.close()
    if agg.fatal:
        raise LoadgenError("; ".join(agg.fatal))
    meta = {
        "run_id": s.run_id,
        "topic": s.topic,
        "codec": s.codec_label,
        "profile": s.profile,
        "pattern": "replay" if s.paced_replay else s.pattern,
    }
    return agg.summary(meta, interrupted=interrupted)
