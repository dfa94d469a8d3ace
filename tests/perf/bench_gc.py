"""Benchmark: what the cyclic-GC policy does to the worker's loop, per codec.

Run: `make bench-gc` (or `python -m tests.perf.bench_gc --help`). For each codec one
topic of medium order events is filled once; then, per round and policy, a fresh
process builds the worker's `BatchLoop` (aggregate logic, metrics on), applies the
policy and drains the topic with a new consumer group, as `codec-worker` would:

- `default`: CPython's thresholds (700, 10, 10), nothing frozen at start-up;
- `freeze`: `gc.freeze()` after start-up (what `codec-worker` does): the objects built
  at start-up (codecs, pydantic validators, metrics, imported modules) are never
  walked again by a full collection;
- `threshold`: `freeze` plus `gc.set_threshold(50_000, 20, 20)`: far fewer young
  collections;
- `between`: `freeze`, the collector disabled, and `gc.collect(0)` after every batch.

It reports the loop thread's CPU microseconds per message (best round; librdkafka's
own threads are left out, they do the same work under every policy), collections per
1,000 messages and GC milliseconds per 1,000 messages (all generations, from
`gc.callbacks`). The loop decodes, handles and drops each message, so most objects die
by reference counting; the policies differ only in how often the collector walks what
is left. Not a test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
import uuid
from contextlib import ExitStack

from confluent_kafka import Consumer
from prometheus_client import CollectorRegistry

from codec import REAL_CODECS, get_codec
from loadgen.config import LoadgenSettings
from loadgen.generator import run
from localkafka import LocalKafka, create_topic, delete_topic
from service.delivery.dead_letters import PoisonHandler
from service.logic.builtin import Handler
from service.loop.batch_loop import BatchLoop
from service.telemetry.metrics import Metrics

POLICIES = ("default", "freeze", "threshold", "between")


def fill(bootstrap: str, codec: str, count: int) -> str:
    """A new topic holding `count` medium events written with `codec`."""
    topic = f"bench-gc-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 4)
    kafka = {"bootstrap_servers": bootstrap}
    settings = LoadgenSettings(
        kafka=kafka, topic=topic, codec=codec, rate=0, count=count, progress="never"
    )
    run(settings)
    return topic


def drain(
    bootstrap: str, topic: str, codec: str, count: int, name: str
) -> dict[str, float]:
    """In this process: build the loop, apply policy `name`, drain `count` messages."""
    metrics = Metrics(CollectorRegistry(), codec=codec, schema="medium")
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": uuid.uuid4().hex,
            "auto.offset.reset": "earliest",
            "enable.auto.offset.store": False,
        }
    )
    consumer.subscribe([topic])
    loop = BatchLoop(
        consumer,
        codec=get_codec(codec, "medium"),  # type: ignore[arg-type]
        step=Handler("medium", "aggregate").step,
        metrics=metrics,
        poison=PoisonHandler(metrics, codec=codec, group="g", dead_letters=None),
        output=None,
        max_payload_bytes=4 << 20,
        batch_size=500,
        batch_timeout_s=0.005,
        latency_sample_every=8,
    )
    gc_s, started = [0.0], [0.0]

    def timed(phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            gc_s[0] += time.perf_counter() - started[0]

    if name != "default":
        gc.freeze()
    if name == "threshold":
        gc.set_threshold(50_000, 20, 20)
    if name == "between":
        gc.disable()
    before = sum(s["collections"] for s in gc.get_stats())
    gc.callbacks.append(timed)
    seen, start = 0, None
    while seen < count:
        msgs = consumer.consume(500, 0.005)
        if not msgs:
            continue
        if start is None:
            start = time.thread_time()
        loop.process(msgs)
        seen += len(msgs)
        if name == "between":
            gc.collect(0)
    cpu = time.thread_time() - (start or 0.0)
    gc.callbacks.remove(timed)
    collections = sum(s["collections"] for s in gc.get_stats()) - before
    consumer.close()
    return {
        "us_per_msg": 1e6 * cpu / seen,
        "gc_per_1k": 1000 * collections / seen,
        "gc_ms_per_1k": 1e6 * gc_s[0] / seen,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--codecs", default=",".join(REAL_CODECS))
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--child",
        nargs=4,
        metavar=("BOOTSTRAP", "TOPIC", "CODEC", "POLICY"),
        help=argparse.SUPPRESS,
    )
    args = parser.parse_args(argv)
    if args.child:
        bootstrap, topic, codec, name = args.child
        print(json.dumps(drain(bootstrap, topic, codec, args.messages, name)))
        return 0
    results: dict[str, dict[str, dict[str, float]]] = {}
    with ExitStack() as stack:
        bootstrap = stack.enter_context(LocalKafka()).bootstrap_servers
        for codec in args.codecs.split(","):
            topic = fill(bootstrap, codec, args.messages)
            best: dict[str, dict[str, float]] = {}
            for _ in range(args.rounds):
                for name in POLICIES:
                    cmd = [
                        sys.executable,
                        "-m",
                        "tests.perf.bench_gc",
                        "--messages",
                        str(args.messages),
                        "--child",
                        bootstrap,
                        topic,
                        codec,
                        name,
                    ]
                    got = json.loads(
                        subprocess.run(
                            cmd, capture_output=True, text=True, check=True
                        ).stdout
                    )
                    if (
                        got["us_per_msg"]
                        < best.get(name, {"us_per_msg": 1e9})["us_per_msg"]
                    ):
                        best[name] = got
            results[codec] = best
            delete_topic(bootstrap, topic)
    if args.json:
        print(json.dumps(results))
        return 0
    print(f"{'codec':22}" + "".join(f"{p:>26}" for p in POLICIES))
    for codec, row in results.items():
        cells = "".join(
            f"{row[p]['us_per_msg']:>8.2f} us {row[p]['gc_per_1k']:>5.1f} {row[p]['gc_ms_per_1k']:>6.2f}ms"
            for p in POLICIES
        )
        print(f"{codec:22}{cells}")
    print(
        "loop-thread CPU us per message (best round); GC collections and GC ms per 1k messages"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
