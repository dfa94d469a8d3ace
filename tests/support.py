"""Helpers for tests against a real broker: produce, consume, run a worker process.

The worker process is `abrunner.lab.processes.WorkerProcess`, the A/B runner's own.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import random
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor
from typing import Any, ParamSpec, TypeVar

from confluent_kafka import Consumer, Producer, TopicPartition

from abrunner.lab import processes

Record = dict[str, Any]
P = ParamSpec("P")
T = TypeVar("T")


def _cluster(bootstrap: str | Mapping[str, Any]) -> dict[str, Any]:
    """librdkafka settings of a cluster given by address or by settings."""
    if isinstance(bootstrap, str):
        return {"bootstrap.servers": bootstrap}
    return dict(bootstrap)


def produce(
    bootstrap: str | Mapping[str, Any], topic: str, records: Iterable[Record]
) -> int:
    """Produce records (`value`, `key`, `headers`, `partition`); wait for all acks."""
    producer = Producer(
        {
            **_cluster(bootstrap),
            "linger.ms": 5,
            "message.max.bytes": 16_000_000,
        }
    )
    errors: list[Any] = []
    count = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for record in records:
        producer.produce(topic, on_delivery=on_delivery, **record)
        producer.poll(0)
        count += 1
    assert producer.flush(30) == 0
    assert not errors, errors
    return count


def consume_all(
    bootstrap: str | Mapping[str, Any],
    topic: str,
    count: int,
    timeout: float = 60,
    *,
    committed: bool = False,
) -> list[Any]:
    """Read `count` messages of `topic` from the beginning (fresh group), then on to
    the end of every partition, so a duplicate beyond `count` is read too; with
    `committed`, as an exactly-once reader does (`isolation.level=read_committed`)."""
    consumer = Consumer(
        {
            **_cluster(bootstrap),
            "group.id": f"reader-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed" if committed else "read_uncommitted",
        }
    )
    consumer.subscribe([topic])
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            out += [m for m in consumer.consume(500, _READ_WAIT_S) if m.error() is None]
        # Anything beyond `count` would be a duplicate: read up to the partitions'
        # ends (for a committed reader, the last stable offsets).
        ends = _ends(consumer, topic)
        while time.monotonic() < deadline and not _reached(consumer, topic, ends):
            out += [m for m in consumer.consume(500, _READ_WAIT_S) if m.error() is None]
    finally:
        consumer.close()
    return out


_READ_WAIT_S = 0.1
"""librdkafka's `consume(n, timeout)` waits its whole timeout unless it has `n`
messages: each read's last call waits this long, not more."""


def _ends(consumer: Consumer, topic: str) -> dict[int, int]:
    """The end offset of each partition of `topic` that holds anything."""
    meta = consumer.list_topics(topic, timeout=10).topics[topic]
    ends = {}
    for partition in meta.partitions:
        tp = TopicPartition(topic, partition)
        _low, high = consumer.get_watermark_offsets(tp, timeout=10)
        if high > 0:
            ends[partition] = high
    return ends


def _reached(consumer: Consumer, topic: str, ends: dict[int, int]) -> bool:
    """Whether `consumer` has read every partition of `ends` to its end (its
    position passes transaction markers too)."""
    tps = [TopicPartition(topic, p) for p in ends]
    return all(tp.offset >= ends[tp.partition] for tp in consumer.position(tps))


def free_port_run(count: int, host: str = "127.0.0.1") -> int:
    """The first of `count` consecutive TCP ports free on `host` now, below the
    kernel's ephemeral range: `--processes N` serves metrics on port + i, and a port
    in that range can be taken meanwhile by any outgoing connection's local end (a
    Kafka client's, say), which no check before start-up can rule out.
    """
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 32768  # Linux's default low bound
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(10_000, ephemeral - count)
        with contextlib.ExitStack() as stack:
            try:
                for port in range(base, base + count):
                    sock = stack.enter_context(socket.socket())
                    sock.bind((host, port))
            except OSError:
                continue
            return base
    raise RuntimeError(f"no {count} consecutive free ports below {ephemeral}")


def in_fresh_interpreter(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """`fn(*args, **kwargs)` run in a new interpreter (spawned, not forked), its
    result pickled back. For a benchmark that collects garbage before each sample
    (codec-bench): each `gc.collect()` then walks its own heap, not the test
    process's, which holds every module of the suite (two to three times as long)."""
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=spawn) as pool:
        return pool.submit(fn, *args, **kwargs).result()


class WorkerProcess(processes.WorkerProcess):
    """`abrunner`'s worker process, tuned for tests: every message timed, 20 ms batches.

    `--batch-timeout-ms 20` keeps a test's few messages from waiting for a full
    batch; `--latency-sample-every 1` makes the latency count equal the messages.
    """

    DEFAULT_ARGS = ("--batch-timeout-ms", "20", "--latency-sample-every", "1")
