"""Benchmark: what the worker's loop adds to a bare decode loop, in-process, per codec.

Run: `make bench-overhead` (or `python -m tests.perf.bench_overhead --help`). Against
`KAFKA_BOOTSTRAP_SERVERS` if set, else a `LocalKafka` started for the run. Per codec a
topic of medium order events is filled by `codec-loadgen`, and one real
confluent-kafka consumer reads it in batches of 500. For each of `--passes` passes,
each contender gets `--messages` messages of its own, consumed just before (not
timed) and never seen before: a message's headers are converted by confluent-kafka
on their first read (1.8-4.5 us on a fresh message, ~50 ns after), and its memory is
cold, as it is in a worker. The contenders, interleaved:

- `bare`: `decode_unchecked(m.value())` per message, the object dropped, then per
  batch one `time_ns()` and, for every k-th message of the stream
  (`--latency-sample-every`, the worker's 64 by default), its `x-sent-ns` header's
  age appended to an `array('q')`, as `make bench-fixed-rate`'s bare loop does;
- `process`: the worker's `BatchLoop.process` per batch (noop logic, metrics on,
  decode and logic timed for every 128th message, e2e latency for every k-th),
  storing offsets on the real consumer;
- `per-message`: only its per-message part (`_handle_each`);
- `per-batch`: only the per-batch metrics (`_observe`) and offset store (`_store`).

Batches hold `--batch` messages (500: a drain; ~10 is what a worker at 2,000 msg/s
gets from its 5 ms consume, ~100 at 20,000 msg/s). CPU microseconds per message
(`thread_time_ns`), min and median over the passes; the column `overhead` is
process - bare. The Kafka path's own cost (`consume()`, librdkafka's
threads) is the same for both and left out here: `make bench` measures it whole. Not a
test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import time
import uuid
from array import array
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from confluent_kafka import Consumer

from codec import get_codec
from localkafka import LocalKafka
from service.kafka.headers import SENT_NS
from service.loop.batch_loop import DECODE_SAMPLE_EVERY
from service.loop.hotpath import Tally
from tests.perf.bench_support import (
    LATENCY_SAMPLE_EVERY,
    fill_topic,
    fresh_topic,
    in_process_loop,
    log,
)
from tests.perf.bench_worker import DEFAULT_CODECS, _codecs

CONTENDERS = ("bare", "process", "per-message", "per-batch")
_SETTLE_S = 0.2


class _Fresh:
    """Batches of messages nobody has read yet, from one consumer of `topic`."""

    def __init__(self, bootstrap: str, topic: str, batch: int) -> None:
        self.batch = batch
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-overhead-{uuid.uuid4().hex[:8]}",
                "auto.offset.reset": "earliest",
                "enable.auto.offset.store": False,
            }
        )
        self.assigned: list[Any] = []
        self.consumer.subscribe(
            [topic], on_assign=lambda _c, ps: self.assigned.extend(ps)
        )

    def batches(self, count: int) -> list[list[Any]]:
        msgs: list[Any] = []
        deadline = time.monotonic() + 120
        while len(msgs) < count and time.monotonic() < deadline:
            msgs += [m for m in self.consumer.consume(500, 1.0) if m.error() is None]
        if len(msgs) < count:
            raise RuntimeError(f"consumed {len(msgs)} of {count} messages")
        # librdkafka refills its queue in the background after a consume: let it
        # finish before the timing starts, or it competes for the CPU caches.
        time.sleep(_SETTLE_S)
        return [msgs[i : i + self.batch] for i in range(0, count, self.batch)]


def _codec(args: argparse.Namespace, bootstrap: str, name: str) -> dict[str, Any]:
    with ExitStack() as stack:
        topic = fresh_topic(stack, bootstrap, name, 4)
        total = args.messages * args.passes * len(CONTENDERS) + 500
        fill_topic(bootstrap, topic, name, total)
        fresh = _Fresh(bootstrap, topic, args.batch)
        stack.callback(fresh.consumer.close)
        codec = get_codec(name, "medium")  # type: ignore[arg-type]
        every = args.latency_sample_every
        loop = in_process_loop(
            fresh.consumer,
            codec,
            name,
            batch_size=args.batch,
            latency_sample_every=every,
        )
        fresh.batches(500)  # the assignment arrives with the first messages
        loop.assign(fresh.assigned)
        decode = codec.decode_unchecked
        decode_ns = [1000] * (args.batch // DECODE_SAMPLE_EVERY)
        ages = array("q")

        def bare(batches: list[list[Any]]) -> None:
            append, n = ages.append, 0
            for batch in batches:
                for m in batch:
                    decode(m.value())
                now = time.time_ns()
                for m in batch[(-n) % every :: every]:
                    for key, value in m.headers():
                        if key == SENT_NS:
                            append(now - int(value))
                            break
                n += len(batch)

        def process(batches: list[list[Any]]) -> None:
            for batch in batches:
                loop.process(batch)

        def per_message(batches: list[list[Any]]) -> None:
            for batch in batches:
                loop._handle_each(batch, Tally(), [], [])

        def per_batch(batches: list[list[Any]]) -> None:
            for batch in batches:
                loop._observe(batch, Tally(), 0, decode_ns, [])
                loop._store()

        contenders: dict[str, Callable[[list[list[Any]]], None]] = dict(
            zip(CONTENDERS, (bare, process, per_message, per_batch), strict=True)
        )
        gc.freeze()  # as the worker does after start-up
        times: dict[str, list[float]] = {k: [] for k in contenders}
        for _ in range(args.passes):
            for key, fn in contenders.items():
                batches = fresh.batches(args.messages)
                t0 = time.thread_time_ns()
                fn(batches)
                elapsed = time.thread_time_ns() - t0
                times[key].append(elapsed / args.messages / 1000)
                del batches
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
    p.add_argument(
        "--codecs",
        type=_codecs,
        default=",".join(DEFAULT_CODECS),
        help="comma-separated wire codecs",
    )
    p.add_argument(
        "--messages", type=int, default=10_000, help="fresh messages per timed pass"
    )
    p.add_argument("--passes", type=int, default=11, help="timed passes per contender")
    p.add_argument(
        "--batch", type=int, default=500, help="messages per batch (see above)"
    )
    p.add_argument(
        "--latency-sample-every",
        type=int,
        default=LATENCY_SAMPLE_EVERY,
        help="both read the e2e stamp of every k-th message (1: every message)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    codecs: list[str] = args.codecs
    with ExitStack() as stack:
        bootstrap = (
            os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
            or stack.enter_context(LocalKafka()).bootstrap_servers
        )
        results = {}
        for name in codecs:
            log(f"{name}: {args.passes} passes of {args.messages:,} fresh messages")
            results[name] = _codec(args, bootstrap, name)
    if args.json:
        print(json.dumps({"messages": args.messages, "codecs": results}))
        return
    print(
        f"CPU us per message, min / median of {args.passes} passes; batches of "
        f"{args.batch}, e2e stamp read for every {args.latency_sample_every}. message"
    )
    print(
        f"{'codec':22}" + "".join(f"{k:>16}" for k in CONTENDERS) + f"{'overhead':>16}"
    )
    for name, r in results.items():
        cells = [f"{r[k]['min_us']:.3f} / {r[k]['median_us']:.3f}" for k in CONTENDERS]
        over = f"{r['overhead_us']['min_us']:.3f} / {r['overhead_us']['median_us']:.3f}"
        print(f"{name:22}" + "".join(f"{c:>16}" for c in cells) + f"{over:>16}")


if __name__ == "__main__":
    main()
