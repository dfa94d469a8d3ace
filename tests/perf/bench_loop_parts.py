"""Benchmark: where the worker's fixed cost at a steady rate goes, part by part.

Run: `make bench-loop-parts`, or `python -m tests.perf.bench_loop_parts --help`.
Against `KAFKA_BOOTSTRAP_SERVERS` if set (or `--bootstrap-servers`), else a
`LocalKafka` started for the run. Not a test: nothing is asserted.

`make bench-fixed-rate` says how much more CPU the worker uses than a bare loop at
a steady rate; this says which part of the worker it comes from. Every contender
runs in its own process and consumer group, all on the same paced traffic at the
same time (`codec-loadgen --rate R`, msgspec-msgpack medium events), so what the
machine does to one it does to all; all read the e2e stamp of every
`--latency-sample-every`-th message (1 by default: every one):

- `bare`, `bare-2`: `bench_worker`'s bare loop, twice: how far two identical loops
  differ in one run (the noise floor).
- `bare+timer`: the bare loop waiting for a batch as the worker does
  (`BatchLoop.run`: after a batch under half full, sleep the 5 ms wait, then
  `consume(500, 0)`; the bare loop's `consume(500, 0.005)` is woken each time a
  fetch response puts messages in the queue meanwhile).
- `bare+settings`: the bare loop on a consumer built with the worker's librdkafka
  settings and callbacks (error, commit, log), storing its position every 100 ms
  as the worker does (`enable.auto.offset.store=false`).
- `loop`: the worker's `BatchLoop` (per-message checks, decode timing, per-batch
  metrics and e2e stamps, offset store every 100 ms) on such a consumer, in a
  process of its own: none of the rest of the worker (control plane, dead-letter
  producer, settings, logging).
- `loop-no-metrics`: the same loop with its per-batch metrics replaced by a count
  of the messages (`BatchLoop._observe`: counters, histograms, e2e stamps).
- `worker`: `python -m service --logic noop`, as `bench_worker` runs it.

Per contender: CPU % of a core over the window (first message to all caught up),
that of its Python threads, and the difference from the mean of the two bare
loops in % of a core; for the bare loops also their exact e2e latency p50 and p99.
A part costs what separates two rows: `worker` against `loop`, the rest of the
worker; `loop` against `loop-no-metrics`, the metrics; `bare+settings` against
`bare`, the settings and offset store; `bare+timer` against `bare`, the way of
waiting. Differences within the bare twins' spread say nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from contextlib import ExitStack
from functools import partial
from typing import Any, Final

from tests.perf.bench_support import (
    _ASSIGNED,
    _DONE,
    _STOP,
    PROFILE,
    WORKER_DEFAULTS,
    BareConsumer,
    SpawnedLoop,
    WorkerProcess,
    _bare_timed,
    by_role,
    fresh_topic,
    in_process_loop,
    loadgen_cmd,
    loadgen_summary,
    log,
    run_bench,
    thread_cpu,
    wait_until,
)

CODEC: Final = "msgspec-msgpack"
PARTS: Final = (
    "bare",
    "bare-2",
    "bare+timer",
    "bare+settings",
    "loop",
    "loop-no-metrics",
    "worker",
)
_STORE_EVERY_S: Final = WORKER_DEFAULTS.offset_store_interval_ms / 1000


def _worker_consumer(bootstrap: str) -> Any:
    """A consumer with the worker's librdkafka settings and callbacks."""
    from confluent_kafka import Consumer

    from service.settings.worker import Settings
    from service.telemetry.log_setup import kafka_logger

    group = f"bench-part-{uuid.uuid4().hex[:8]}"
    settings = Settings.model_validate(
        {
            "kafka": {"bootstrap_servers": bootstrap},
            "consumer": {"topic": "-", "group_id": group},
        }
    )
    conf = settings.consumer_config(plaintext_secrets=True)
    conf["auto.offset.reset"] = "earliest"
    conf["error_cb"] = lambda _err: None
    conf["on_commit"] = lambda _err, _partitions: None
    conf["logger"] = kafka_logger()
    return Consumer(conf)


def part_main(part: str, bootstrap: str, topic: str, every: int, shared: Any) -> None:
    """One contender's process (spawned): `bare+settings` or a `loop` variant."""
    from codec import get_codec

    codec = get_codec(CODEC, PROFILE)
    loop: Any = None

    def assigned(_consumer: Any, partitions: list[Any]) -> None:
        if loop is not None:
            loop.assign(partitions)
        shared[_ASSIGNED] = 1

    consumer = _worker_consumer(bootstrap)
    consumer.subscribe([topic], on_assign=assigned)
    try:
        if part == "bare+settings":
            batch = WORKER_DEFAULTS.batch_size
            timeout = WORKER_DEFAULTS.batch_timeout_ms / 1000
            decode = codec.decode_unchecked
            _bare_timed(consumer, decode, shared, batch, timeout, every, _STORE_EVERY_S)
            return
        loop = in_process_loop(
            consumer,
            codec,
            CODEC,
            batch_size=WORKER_DEFAULTS.batch_size,
            latency_sample_every=every,
            store_interval_s=_STORE_EVERY_S,  # as the worker's default
        )
        if part == "loop-no-metrics":

            def count_only(msgs: Sequence[Any], *_: Any) -> None:
                loop.processed += len(msgs)

            loop._observe = count_only

        def tick() -> None:
            shared[_DONE] = loop.processed

        loop.run(lambda: bool(shared[_STOP]), tick)
    finally:
        consumer.close()


class PartProcess(SpawnedLoop):
    """A `part_main` contender in its own process."""

    def __init__(self, part: str, bootstrap: str, topic: str, every: int) -> None:
        super().__init__()
        self._start(part_main, (part, bootstrap, topic, every, self._shared))


def _contender(
    part: str, bootstrap: str, topic: str, every: int
) -> BareConsumer | WorkerProcess | PartProcess:
    if part in ("bare", "bare-2", "bare+timer"):
        timeout = WORKER_DEFAULTS.batch_timeout_ms / 1000
        return BareConsumer(
            bootstrap,
            topic,
            CODEC,
            WORKER_DEFAULTS.batch_size,
            timeout,
            latencies=True,
            latency_sample_every=every,
            timer=part == "bare+timer",
        )
    if part == "worker":
        flags = ("--latency-sample-every", str(every))
        return WorkerProcess(bootstrap, topic, CODEC, None, *flags)
    return PartProcess(part, bootstrap, topic, every)


def _latencies(bare: BareConsumer) -> dict[str, Any]:
    """A bare loop's latency figures; none if it cannot send them (its CPU row
    stands without them)."""
    try:
        return bare.latencies(timeout=30)
    except (OSError, EOFError, TimeoutError) as exc:
        log(f"no latencies from a bare loop: {exc!r}")
        return {}


def measure(args: argparse.Namespace, bootstrap: str) -> dict[str, Any]:
    """All parts on one paced load; CPU % of a core per part and thread."""
    every = args.latency_sample_every
    with ExitStack() as stack:
        topic = fresh_topic(stack, bootstrap, CODEC, args.partitions)
        parts = {}
        for part in args.parts:
            parts[part] = c = _contender(part, bootstrap, topic, every)
            stack.callback(c.close)
        wait_until("all assigned", lambda: all(c.ready() for c in parts.values()), 120)
        log(f"{args.rate:,.0f} msg/s for {args.duration:g} s into {topic}")
        flags = ("--rate", str(args.rate), "--duration", str(args.duration))
        load = subprocess.Popen(
            loadgen_cmd(bootstrap, topic, CODEC, *flags),
            stdout=subprocess.PIPE,
            text=True,
        )
        stack.callback(load.kill)
        first = next(iter(parts.values()))
        wait_until("first message", lambda: first.progress() > 0, 120)
        t0 = time.monotonic()
        before = {p: thread_cpu(c.pid) for p, c in parts.items()}
        acked = loadgen_summary(load, args.duration + 300)["acked"]
        wait_until(
            "all caught up",
            lambda: all(c.progress() >= acked for c in parts.values()),
            args.drain_timeout,
        )
        window = time.monotonic() - t0
        after = {p: thread_cpu(c.pid) for p, c in parts.items()}
        bare_latency = {
            p: _latencies(c) for p, c in parts.items() if isinstance(c, BareConsumer)
        }
    rows = {}
    for part in parts:
        roles = by_role(before[part], after[part])
        python = sum(v for k, v in roles.items() if not k.startswith("rdk:"))
        rows[part] = {
            "cpu_pct": round(sum(roles.values()) / window * 100, 2),
            "python_pct": round(python / window * 100, 2),
        }
        if (lat := bare_latency.get(part)) and lat.get("exact_p50_s") is not None:
            rows[part]["p50_ms"] = round(lat["exact_p50_s"] * 1e3, 2)
            rows[part]["p99_ms"] = round(lat["exact_p99_s"] * 1e3, 2)
    bares = [rows[p]["cpu_pct"] for p in ("bare", "bare-2") if p in rows]
    if bares:
        mean = sum(bares) / len(bares)
        for row in rows.values():
            row["over_bare_mean_pct"] = round(row["cpu_pct"] - mean, 2)
            row["ratio_to_bare_mean"] = round(row["cpu_pct"] / mean, 3)
    return {
        "rate": args.rate,
        "latency_sample_every": every,
        "window_s": round(window, 1),
        "acked": acked,
        "parts": rows,
    }


def print_table(res: dict[str, Any]) -> None:
    print(
        f"{res['rate']:,.0f} msg/s, e2e stamp of every {res['latency_sample_every']}. "
        f"message read by all; window {res['window_s']} s, {res['acked']:,} messages"
    )
    print(
        f"{'part':18}{'CPU %':>8}{'Python %':>10}{'- bare mean':>13}{'ratio':>8}"
        f"{'p50 ms':>8}{'p99 ms':>8}"
    )
    for part, r in res["parts"].items():
        print(
            f"{part:18}{r['cpu_pct']:>8}{r['python_pct']:>10}"
            f"{r.get('over_bare_mean_pct', '-')!s:>13}"
            f"{r.get('ratio_to_bare_mean', '-')!s:>8}"
            f"{r.get('p50_ms', '-')!s:>8}{r.get('p99_ms', '-')!s:>8}"
        )


def _parts(text: str) -> tuple[str, ...]:
    parts = tuple(p.strip() for p in text.split(",") if p.strip())
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
        raise argparse.ArgumentTypeError(
            f"unknown part {', '.join(unknown) or '(none)'}: choose from {', '.join(PARTS)}"
        )
    return parts


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tests.perf.bench_loop_parts",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = p.add_argument
    add(
        "--bootstrap-servers",
        default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
        help="Kafka to use (env KAFKA_BOOTSTRAP_SERVERS); unset: start a LocalKafka",
    )
    add("--rate", type=float, default=2000.0, help="msg/s the load generator sends")
    add("--duration", type=float, default=60.0, help="seconds of load")
    add("--partitions", type=int, default=4, help="partitions of the fresh topic")
    add(
        "--latency-sample-every",
        type=int,
        default=1,
        help="every contender reads the e2e stamp of every k-th message",
    )
    add(
        "--parts",
        type=_parts,
        default=PARTS,
        help=f"comma-separated contenders, any of {', '.join(PARTS)}",
    )
    add(
        "--drain-timeout",
        type=float,
        default=60.0,
        help="seconds after the load for all to catch up",
    )
    add("--json", action="store_true", help="print one JSON object instead of a table")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return run_bench(args, partial(measure, args), print_table)


if __name__ == "__main__":
    sys.exit(main())
