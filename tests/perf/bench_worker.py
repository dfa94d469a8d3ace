"""Benchmark: the worker against a bare confluent-kafka loop, messages per CPU-second.

Run: `make bench` (or `python -m tests.perf.bench_worker --help`). One topic is
filled once with msgspec-msgpack order events carrying the load generator's headers;
then each contender consumes all of it in its own process with a fresh group:

- `bare-consume`: `consume()` only (the floor: what librdkafka costs);
- `bare-msgspec`: `consume()` + `msgspec.msgpack.Decoder(OrderEvent).decode`;
- `worker`: `codec-worker --codec msgspec-msgpack --logic noop`, metrics on, offsets
  stored per batch, dead-letter producer armed.

CPU is read from /proc/<pid>/stat by this harness (user + system time), sampled
together with the process's progress, so start-up is excluded and the measured
process pays nothing for being measured (the worker is scraped twice a second; that
cost, ~0.4 % of a core, is counted against it). Not a test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from confluent_kafka import Producer

from loadgen.payloads import make_payloads
from localkafka import LocalKafka, create_topic
from service.codecs import get_codec

_TICKS = os.sysconf("SC_CLK_TCK")
_SAMPLE_S = 0.5
"""Progress and CPU are read together at this interval; a scrape costs the worker ~2 ms."""


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of `pid` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def fill_topic(bootstrap: str, topic: str, count: int, partitions: int) -> int:
    """Produce `count` msgpack order events with load-generator headers."""
    create_topic(bootstrap, topic, partitions)
    codec = get_codec("msgspec-msgpack", "medium")
    pool = [codec.encode(codec.from_builtins(p)) for p in make_payloads("medium", 2000)]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    ct, run = codec.content_type.encode(), uuid.uuid4().hex.encode()
    for seq in range(count):
        headers: list[tuple[str, str | bytes | None]] = [
            ("content-type", ct),
            ("x-seq", str(seq).encode()),
            ("x-sent-ns", str(time.time_ns()).encode()),
            ("x-run-id", run),
        ]
        while True:
            try:
                producer.produce(
                    topic, pool[seq % len(pool)], str(seq).encode(), headers=headers
                )
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)
    return sum(map(len, pool)) // len(pool)


def bare_loop(bootstrap: str, topic: str, decode: bool, done: Any, batch: int) -> None:
    """The reference: a consume loop with nothing else (progress in `done`)."""
    import msgspec
    from confluent_kafka import Consumer

    from service.models import OrderEvent

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": uuid.uuid4().hex,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    dec = msgspec.msgpack.Decoder(OrderEvent).decode
    n = 0
    while True:
        msgs = consumer.consume(batch, 0.005)
        if decode:
            for m in msgs:
                dec(m.value() or b"")
        n += len(msgs)
        done.value = n


def measure(
    pid: int, progress: Callable[[], int], total: int, limit: float
) -> dict[str, float]:
    """Sample CPU and progress until `total` messages are done."""
    deadline = time.monotonic() + limit
    first: tuple[float, float, int] | None = None
    while time.monotonic() < deadline:
        n, cpu, now = progress(), cpu_seconds(pid), time.monotonic()
        if first is None and n > 0:
            first = (now, cpu, n)
        if n >= total and first is not None:
            msgs, secs = n - first[2], cpu - first[1]
            return {
                "messages": msgs,
                "cpu_s": round(secs, 3),
                "wall_s": round(now - first[0], 3),
                "msgs_per_cpu_s": round(msgs / max(secs, 1e-9)),
            }
        time.sleep(_SAMPLE_S)
    raise TimeoutError(f"pid {pid}: {progress()} of {total} messages in {limit}s")


def run_bare(
    bootstrap: str, topic: str, total: int, decode: bool, batch: int
) -> dict[str, float]:
    done = mp.Value("q", 0)
    proc = mp.get_context("fork").Process(
        target=bare_loop, args=(bootstrap, topic, decode, done, batch), daemon=True
    )
    proc.start()
    try:
        assert proc.pid is not None
        return measure(proc.pid, lambda: int(done.value), total, 300)
    finally:
        proc.kill()
        proc.join()


def _scrape(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("worker_messages_total{") and 'outcome="ok"' in line:
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def run_worker(
    bootstrap: str, topic: str, total: int, batch: int, port: int
) -> dict[str, float]:
    cmd = [
        sys.executable, "-m", "service", "--bootstrap-servers", bootstrap,
        "--topic", topic, "--group", uuid.uuid4().hex, "--codec", "msgspec-msgpack",
        "--schema", "medium", "--logic", "noop", "--batch-size", str(batch),
        "--metrics-port", str(port), "--log-level", "warning",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    try:
        return measure(proc.pid, lambda: _scrape(port), total, 300)
    finally:
        proc.terminate()
        proc.wait(30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--bootstrap-servers", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    )
    parser.add_argument("--messages", type=int, default=400_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument(
        "--rounds", type=int, default=3, help="alternating rounds; best kept"
    )
    parser.add_argument("--metrics-port", type=int, default=19187)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    with ExitStack() as stack:
        bootstrap = (
            args.bootstrap_servers
            or stack.enter_context(LocalKafka()).bootstrap_servers
        )
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        size = fill_topic(bootstrap, topic, args.messages, args.partitions)
        results: dict[str, list[dict[str, float]]] = {
            "bare-consume": [],
            "bare-msgspec": [],
            "worker": [],
        }
        for _ in range(args.rounds):
            results["bare-consume"].append(
                run_bare(bootstrap, topic, args.messages, False, args.batch_size)
            )
            results["bare-msgspec"].append(
                run_bare(bootstrap, topic, args.messages, True, args.batch_size)
            )
            results["worker"].append(
                run_worker(
                    bootstrap, topic, args.messages, args.batch_size, args.metrics_port
                )
            )
    best = {k: max(v, key=lambda r: r["msgs_per_cpu_s"]) for k, v in results.items()}
    ratio = best["worker"]["msgs_per_cpu_s"] / best["bare-msgspec"]["msgs_per_cpu_s"]
    medians = {
        k: statistics.median(r["msgs_per_cpu_s"] for r in v) for k, v in results.items()
    }
    median_ratio = medians["worker"] / medians["bare-msgspec"]
    summary = {
        "messages": args.messages,
        "value_bytes": size,
        "rounds": results,
        "best": best,
        "worker_vs_bare_msgspec": round(ratio, 3),
        "median_ratio": round(median_ratio, 3),
    }
    if args.json:
        print(json.dumps(summary))
        return 0
    print(
        f"{args.messages} msgpack order events (~{size} B), {args.rounds} rounds, best of each:"
    )
    print(
        f"{'contender':14} {'msgs/CPU-s':>11} {'CPU s':>7} {'wall s':>7}   all rounds (msgs/CPU-s)"
    )
    for name, row in best.items():
        rounds = ", ".join(str(r["msgs_per_cpu_s"]) for r in results[name])
        print(
            f"{name:14} {row['msgs_per_cpu_s']:>11} {row['cpu_s']:>7} {row['wall_s']:>7}   {rounds}"
        )
    print(
        f"worker / bare-msgspec = {ratio:.3f} best of {args.rounds}, "
        f"{median_ratio:.3f} by medians (target >= 0.85)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
