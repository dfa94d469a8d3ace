"""A load-generation run: topic probe, plan, producer processes, summary (`run()`).

`run(settings, on_progress=..., stop=...)` is the library entry point and the one
`codec-loadgen` calls. It binds its metrics port, then checks (or, with
`create_topics`, creates) the topic before anything starts, builds the
`Source` (synthetic or replayed), runs one `ProducerLoop` in this process or
`processes = N` of them in spawned processes (process i sends seqs i, i+N, ... on
the same global schedule, so together they send seq 0..n-1 at the rate asked),
merges their ticks into progress, metrics and the final `Summary`.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import queue as queue_mod
import signal
import sys
import time
from collections.abc import Callable
from typing import Any, Final

import msgspec
from confluent_kafka import KafkaException
from prometheus_client import CollectorRegistry

from loadgen.config import LoadgenSettings
from loadgen.metrics import LoadgenMetrics, MetricsServer
from loadgen.producer import ProducerLoop
from loadgen.replay import replay_source
from loadgen.report import Aggregator, Progress, Summary, Tick
from loadgen.schedule import build_schedule, plan
from loadgen.source import Source, synthetic_source
from schemas.errors import ConfigError, LoadgenError
from service.kafka.admin_topics import CONNECT_TIMEOUT_S, TopicAdmin, ensure_topics
from service.kafka.connection import client_error
from service.kafka.security_check import check_access
from service.settings.registry_start import reach
from service.telemetry.log_setup import cannot_reach, configure_logging

START_DELAY_S: Final = 0.2
"""Producers start this long after the last one is ready, on one shared instant."""
METADATA_TIMEOUT_S = CONNECT_TIMEOUT_S
"""How long the topic probe waits for the broker (not Final: tests shorten it)."""


def topic_partitions(s: LoadgenSettings) -> int:
    """The topic's partition count, checked (or created) before any process starts.

    Also validates the librdkafka settings: the probe is built from the producer's
    (an AdminClient is a producer inside librdkafka).

    Raises:
        ConfigError: librdkafka rejects a setting, or the topic does not exist
            (and `create_topics` is off), or the cluster refused to create it.
        LoadgenError: Kafka cannot be reached, or a created topic got no leaders.
    """
    # Not idempotent: a probe has no producer id to fetch.
    conf = s.producer_config(plaintext_secrets=True) | {"enable.idempotence": False}
    try:
        admin = TopicAdmin(conf)
    except KafkaException as exc:
        raise ConfigError(f"config error: {client_error(exc, conf)}") from None
    check_access(conf, refused=LoadgenError)
    try:
        counts = ensure_topics(
            admin,
            {s.topic: "--topic, LOADGEN_TOPIC"},
            create=s.create_topics,
            partitions=s.partitions,
            timeout=METADATA_TIMEOUT_S,
            connect=s.kafka.arguments(),
        )
    except KafkaException as exc:
        raise LoadgenError(cannot_reach(admin.bootstrap, admin.failure(exc))) from None
    except TimeoutError as exc:
        raise LoadgenError(str(exc)) from None
    return counts[s.topic]


def _child(
    s: LoadgenSettings, source: Source, shard: int, start: Any, out: Any, stop: Any
) -> None:
    """A producer process: report ready, wait for the shared start, run."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    configure_logging(s.log_level, "console", stream=sys.stderr)  # stdout: summary
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
    registry = CollectorRegistry()
    server = None  # bound first: a port in use is a config error, Kafka untouched
    if s.metrics_port is not None:
        server = MetricsServer(registry, s.metrics_host, s.metrics_port)
    try:
        return _run(s, registry, on_progress, should_stop)
    finally:
        if server is not None:
            with contextlib.suppress(Exception):
                server.close()


def _run(
    s: LoadgenSettings,
    registry: CollectorRegistry,
    on_progress: Callable[[Progress], None] | None,
    should_stop: Callable[[], bool],
) -> Summary:
    if s.framing != "none":  # before Kafka: a registry set up wrong is one line
        reach(s.registry, LoadgenError)
    partitions = topic_partitions(s)
    if s.replay is not None:
        source = replay_source(s, partitions)
    else:
        source = synthetic_source(s)
    schedule = build_schedule(s, source)
    total, window = plan(s, schedule, source)
    agg = Aggregator(s.processes, window, total if schedule is not None else None)
    metrics = LoadgenMetrics(registry, s.codec_label, agg.ack)

    def merge(tick: Tick) -> None:
        agg.merge(tick)
        progress = agg.progress()
        metrics.update(
            tick.sent,
            tick.acked,
            tick.failed,
            progress.target_rate,
            progress.last_second_rate,
        )
        if on_progress is not None:
            on_progress(progress)

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
    if agg.fatal:
        raise LoadgenError("; ".join(agg.fatal))
    meta = {
        "run_id": s.run_id,
        "topic": s.topic,
        "codec": s.codec_label,
        "profile": s.schema_spec,
        "pattern": "replay" if s.paced_replay else s.pattern,
    }
    summary = agg.summary(meta, interrupted=interrupted)
    if s.replay is not None:
        summary.recorded = len(source.values) + sum(source.not_carried.values())
        summary.replayed_as_recorded = source.as_recorded
        summary.not_carried = dict(source.not_carried)
    return summary
