"""Benchmark: what the worker's loop adds to a bare decode loop, in-process, per codec.

Run: `make bench-overhead` (or `python -m tests.perf.bench_overhead --help`). Per codec
a topic of medium order events is filled by `codec-loadgen` and `--messages` of them are
consumed once with a real confluent-kafka consumer and held, in batches of 500; then,
on those same message objects, `--passes` times each (interleaved):

- `bare`: `decode_unchecked(m.value())` per message, the object dropped;
- `process`: the worker's `BatchLoop.process` per batch (noop logic, metrics on, the
  worker's default sampling: decode timed every 16th message, e2e latency every
  32nd), storing offsets on the real consumer;
- `per-message`: only its per-message part (`_handle_each`);
- `per-batch`: only the per-batch metrics (`_observe`) and offset store (`_store`).

CPU microseconds per message (`thread_time_ns`), min and median over the passes; the
line `overhead` is process - bare. The Kafka path's own cost (`consume()`, librdkafka's
threads) is the same for both and left out here: `make bench` measures it whole. Not a
test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from confluent_kafka import Consumer
from prometheus_client import CollectorRegistry

from localkafka import LocalKafka
from service.codecs import REAL_CODECS, get_codec
from service.config import MetricsSettings
from service.consumer import BatchLoop
from service.metrics import Metrics
from service.poison import PoisonHandler
from tests.perf.bench_support import fill_topic, fresh_topic, log
from tests.perf.bench_worker import DEFAULT_CODECS

BATCH = 500


def _held(
    bootstrap: str, topic: str, count: int
) -> tuple[Consumer, list[Any], list[Any]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-overhead-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.offset.store": False,
        }
    )
    assigned: list[Any] = []
    consumer.subscribe([topic], on_assign=lambda _c, ps: assigned.extend(ps))
    msgs: list[Any] = []
    deadline = time.monotonic() + 120
    while len(msgs) < count and time.monotonic() < deadline:
        msgs += [m for m in consumer.consume(BATCH, 1.0) if m.error() is None]
    if len(msgs) < count:
        raise RuntimeError(f"consumed {len(msgs)} of {count} messages")
    return consumer, msgs[:count], assigned


def _codec(args: argparse.Namespace, bootstrap: str, name: str) -> dict[str, Any]:
    with ExitStack() as stack:
        topic = fresh_topic(stack, bootstrap, name, 4)
        fill_topic(bootstrap, topic, name, args.messages)
        consumer, msgs, assigned = _held(bootstrap, topic, args.messages)
        stack.callback(consumer.close)
        batches = [msgs[i : i + BATCH] for i in range(0, len(msgs), BATCH)]
        codec = get_codec(name, "medium")  # type: ignore[arg-type]
        metrics = Metrics(CollectorRegistry(), codec=name, schema="medium")
        loop = BatchLoop(
            consumer,
            codec=codec,
            step=None,
            metrics=metrics,
            poison=PoisonHandler(metrics, codec=name, group="g", dead_letters=None),
            output=None,
            max_payload_bytes=1 << 22,
            batch_size=BATCH,
            batch_timeout_s=0.005,
            latency_sample_every=MetricsSettings().latency_sample_every,
        )
        loop.assign(assigned)
        decode = codec.decode_unchecked
        decode_ns = [1000] * (BATCH // 16)

        def bare() -> None:
            for batch in batches:
                for m in batch:
                    decode(m.value())

        def process() -> None:
            for batch in batches:
                loop.process(batch)

        def per_message() -> None:
            for batch in batches:
                loop._handle_each(batch, [], [])

        def per_batch() -> None:
            for batch in batches:
                loop._observe(batch, len(batch), 0, None, 0, decode_ns, [])
                loop._store()

        contenders: dict[str, Callable[[], None]] = {
            "bare": bare,
            "process": process,
            "per-message": per_message,
            "per-batch": per_batch,
        }
        gc.freeze()  # as the worker does after start-up
        times: dict[str, list[float]] = {k: [] for k in contenders}
        for _ in range(args.passes):
            for key, fn in contenders.items():
                t0 = time.thread_time_ns()
                fn()
                times[key].append((time.thread_time_ns() - t0) / len(msgs) / 1000)
        gc.unfreeze()
    out: dict[str, Any] = {
        k: {"min_us": round(min(v), 3), "median_us": round(statistics.median(v), 3)}
        for k, v in times.items()
    }
    out["overhead_us"] = {
        stat: round(out["process"][stat] - out["bare"][stat], 3)
        for stat in ("min_us", "median_us")
    }
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tests.perf.bench_overhead",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--codecs", default=",".join(DEFAULT_CODECS), help="comma-separated")
    p.add_argument(
        "--messages", type=int, default=20_000, help="held messages per codec"
    )
    p.add_argument("--passes", type=int, default=15, help="timed passes per contender")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    codecs = [c.strip() for c in args.codecs.split(",") if c.strip()]
    unknown = sorted(set(codecs) - set(REAL_CODECS))
    if unknown:
        parser().error(f"unknown codec(s) {unknown}; known: {REAL_CODECS}")
    with LocalKafka() as kafka:
        results = {}
        for name in codecs:
            log(f"{name}: {args.messages:,} held messages, {args.passes} passes")
            results[name] = _codec(args, kafka.bootstrap_servers, name)
    if args.json:
        print(json.dumps({"messages": args.messages, "codecs": results}))
        return
    print(f"CPU us per message, min / median of {args.passes} passes")
    keys = ("bare", "process", "per-message", "per-batch")
    print(f"{'codec':22}" + "".join(f"{k:>16}" for k in keys) + f"{'overhead':>16}")
    for name, r in results.items():
        cells = [f"{r[k]['min_us']:.3f} / {r[k]['median_us']:.3f}" for k in keys]
        over = f"{r['overhead_us']['min_us']:.3f} / {r['overhead_us']['median_us']:.3f}"
        print(f"{name:22}" + "".join(f"{c:>16}" for c in cells) + f"{over:>16}")


if __name__ == "__main__":
    main()
