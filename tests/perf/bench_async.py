"""Benchmark: the worker's async path against bare asyncio consumers, every codec.

Run: `make bench-async`, or `python -m tests.perf.bench_async --help`. Against
`KAFKA_BOOTSTRAP_SERVERS` if set (or `--bootstrap-servers`), else a `LocalKafka`
started for the run. Not a test: nothing is asserted, the figures depend on the
machine (and on what else it runs: say so beside them).

Every contender runs the same async handler on every message
(`tests.fixtures.handlers.async_orders:touch`: `await asyncio.sleep(0.001)`, then
read the items, as a team's handler awaiting a 1 ms round trip does), at most
`--max-in-flight` (100) messages at once, each in its own process and consumer
group, on uvloop's event loop:

- `asyncio`: the least a Python asyncio consumer does. A confluent-kafka
  `Consumer` (auto-commit, offsets stored by librdkafka as it hands messages over:
  no at-least-once), `consume(500, 5 ms)` handed to the loop's executor once per
  batch (the `AIOConsumer` pattern), then per message `decode` and the handler in a
  task, bounded by a semaphore, the batch gathered before the next `consume()`.
- `aio`: the same with confluent-kafka's own `confluent_kafka.aio.AIOConsumer`
  (`await consumer.consume(500, 0.005)`, its executor serialising the calls).
- `worker`: `python -m service --logic ...:touch --ordering key --max-in-flight
  100`, everything else at its defaults: offsets stored for each partition's
  contiguous completed prefix, the dead-letter producer armed, metrics, the
  message budget's sweep, the control plane.

Drain mode (default): per codec, a fresh topic filled with `--messages` medium
order events (`codec-loadgen --rate 0`), drained by each contender in turn
(`--rounds`, the order rotated each round); the figure is messages per
CPU-second of the consuming process from its first message to its last
(`tests.perf.bench_support.measure_drain`), and the wall rate.

Event-loop mode (`--loops`): no Kafka. The worker's `AsyncLoop` drains
`--messages` in-memory messages of each codec through the same handler, once on
uvloop's loop and once on asyncio's, alternating for `--rounds`; the figure is CPU
microseconds per message and the wall rate (the choice of `new_event_loop`).

Fixed-rate mode (`--rate 20000`): per codec and contender, a fresh topic, the
contender assigned first, then the load generator at the rate for `--duration`
seconds; CPU % of a core over the load and whether it kept up (every message
done within 10 s of the load's end).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from contextlib import ExitStack
from typing import Any, Final

from codec import get_codec
from tests.perf.bench_support import (
    PROFILE,
    SpawnedLoop,
    WorkerProcess,
    cpu_seconds,
    fill_topic,
    fresh_topic,
    loadgen_cmd,
    loadgen_summary,
    log,
    measure_drain,
    run_bench,
    wait_until,
)
from tests.perf.bench_worker import DEFAULT_CODECS, _codecs

HANDLER: Final = "tests.fixtures.handlers.async_orders:touch"
SYNC_HANDLER: Final = "tests.fixtures.handlers.basics:nothing"
"""`sync-worker`'s handler: reads the items too, awaits nothing."""
CONTENDERS: Final = ("asyncio", "aio", "worker")
_DONE, _STOP, _ASSIGNED = 0, 1, 2


# -- the bare contenders, in their own processes ---------------------------------------


def bare_async_main(
    bootstrap: str, topic: str, codec: str, kind: str, limit: int, shared: Any
) -> None:
    """The `asyncio` or `aio` contender (see the module docstring)."""
    import uvloop

    uvloop.run(_bare_async(bootstrap, topic, codec, kind, limit, shared))


async def _bare_async(
    bootstrap: str, topic: str, codec: str, kind: str, limit: int, shared: Any
) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.aio import AIOConsumer

    from tests.fixtures.handlers.async_orders import touch

    decode = get_codec(codec, PROFILE).decode_unchecked  # type: ignore[arg-type]
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-{kind}-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest",
    }
    bound = asyncio.Semaphore(limit)

    async def one(m: Any) -> None:
        async with bound:
            if m.error() is None:
                await touch(decode(m.value()))

    def assigned(*_args: Any) -> None:
        shared[_ASSIGNED] = 1

    async def assigned_async(*_args: Any) -> None:
        shared[_ASSIGNED] = 1

    loop = asyncio.get_running_loop()
    if kind == "aio":
        aio = AIOConsumer(conf, max_workers=2)
        await aio.subscribe([topic], on_assign=assigned_async)
        consume: Any = aio.consume
    else:
        plain = Consumer(conf)
        plain.subscribe([topic], on_assign=assigned)

        async def consume(n: int, timeout: float) -> Any:
            return await loop.run_in_executor(None, plain.consume, n, timeout)

    while not shared[_STOP]:
        msgs = await consume(500, 0.005)
        if msgs:
            await asyncio.gather(*map(one, msgs))
            shared[_DONE] += len(msgs)
    if kind == "aio":
        await aio.close()
    else:
        plain.close()


class BareAsync(SpawnedLoop):
    """A bare asyncio contender in its own process."""

    def __init__(self, bootstrap: str, topic: str, codec: str, kind: str, limit: int):
        super().__init__()
        self._start(
            bare_async_main, (bootstrap, topic, codec, kind, limit, self._shared)
        )


def _contender(
    who: str, args: argparse.Namespace, bootstrap: str, topic: str, codec: str
) -> BareAsync | WorkerProcess:
    if who == "sync-worker":
        return WorkerProcess(bootstrap, topic, codec, None, "--logic", SYNC_HANDLER)
    if who == "worker":
        extra = [*("--logic", HANDLER, "--ordering", args.ordering)]
        extra += ["--max-in-flight", str(args.max_in_flight)]
        return WorkerProcess(bootstrap, topic, codec, None, *extra)
    return BareAsync(bootstrap, topic, codec, who, args.max_in_flight)


# -- drain -------------------------------------------------------------------------------


def _codec_drain(
    args: argparse.Namespace, bootstrap: str, codec: str
) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {who: [] for who in args.contenders}
    with ExitStack() as stack:
        topic = fresh_topic(stack, bootstrap, codec, args.partitions)
        fill = fill_topic(bootstrap, topic, codec, args.messages)
        for r in range(args.rounds):
            n = len(args.contenders)
            order = args.contenders[r % n :] + args.contenders[: r % n]
            for who in order:
                contender = _contender(who, args, bootstrap, topic, codec)
                try:
                    run = measure_drain(
                        contender.pid, contender.progress, fill["acked"], 0.5, 600
                    )
                finally:
                    contender.close()
                run["msgs_per_wall_s"] = round(run["messages"] / run["wall_s"])
                runs[who].append(run)
                log(
                    f"{codec}: round {r + 1} {who}: {run['msgs_per_cpu_s']:,} "
                    f"msg/CPU-s, {run['msgs_per_wall_s']:,} msg/s"
                )
    out: dict[str, Any] = {}
    for who, rounds in runs.items():
        out[who] = {
            "msgs_per_cpu_s": statistics.median(r["msgs_per_cpu_s"] for r in rounds),
            "msgs_per_wall_s": statistics.median(r["msgs_per_wall_s"] for r in rounds),
            "rounds": rounds,
        }
    for bare in ("asyncio", "aio"):
        if bare not in runs or "worker" not in runs:
            continue
        paired = [
            w["msgs_per_cpu_s"] / b["msgs_per_cpu_s"]
            for w, b in zip(runs["worker"], runs[bare], strict=True)
        ]
        out[f"worker_over_{bare}"] = round(statistics.median(paired), 3)
    return out


# -- fixed rate ---------------------------------------------------------------------------


def _fixed_once(
    args: argparse.Namespace, bootstrap: str, codec: str, who: str
) -> dict[str, Any]:
    with ExitStack() as stack:
        topic = fresh_topic(stack, bootstrap, codec, args.partitions)
        contender = _contender(who, args, bootstrap, topic, codec)
        stack.callback(contender.close)
        wait_until(f"{who} assigned", contender.ready, 120)
        cpu0, t0 = cpu_seconds(contender.pid), time.monotonic()
        flags = ("--rate", str(args.rate), "--duration", str(args.duration))
        proc = subprocess.Popen(
            loadgen_cmd(bootstrap, topic, codec, *flags),
            stdout=subprocess.PIPE,
            text=True,
        )
        sent = int(loadgen_summary(proc, args.duration + 120)["acked"])
        cpu1, t1 = cpu_seconds(contender.pid), time.monotonic()
        deadline = t1 + 10
        while contender.progress() < sent and time.monotonic() < deadline:
            time.sleep(0.2)
        done = contender.progress()
    return {
        "cpu_pct": round(100 * (cpu1 - cpu0) / (t1 - t0), 1),
        "cpu_us_per_msg": round(1e6 * (cpu1 - cpu0) / max(1, sent), 1),
        "sent": sent,
        "done_within_10s": done,
        "kept_up": done >= sent,
    }


# -- uvloop against asyncio's loop, in process -------------------------------------------


class _MemoryConsumer:
    """`consume()` hands out prepared messages; pause, resume and store do nothing."""

    def __init__(self, msgs: list[Any]) -> None:
        self._msgs, self._at = msgs, 0

    def consume(self, n: int, timeout: float) -> list[Any]:
        out = self._msgs[self._at : self._at + n]
        self._at += len(out)
        return out

    def pause(self, partitions: list[Any]) -> None:
        pass

    resume = pause

    def store_offsets(self, offsets: list[Any]) -> None:
        pass


def _loop_once(codec: str, count: int, kind: str) -> dict[str, float]:
    import confluent_kafka
    from prometheus_client import CollectorRegistry

    from loadgen.payloads import make_payloads
    from service.delivery.dead_letters import PoisonHandler
    from service.loop.async_path.loop import AsyncLoop
    from service.telemetry.metrics import Metrics
    from tests.fixtures.handlers.async_orders import touch

    c = get_codec(codec, PROFILE)  # type: ignore[arg-type]
    values = [c.encode(c.from_builtins(p)) for p in make_payloads(PROFILE, 200)]
    msgs = [
        confluent_kafka.Message(
            topic="in",
            partition=i % 4,
            offset=i // 4,
            value=values[i % 200],
            key=b"%d" % i,
        )
        for i in range(count)
    ]
    m = Metrics(CollectorRegistry(), codec=codec, schema=PROFILE)
    loop = AsyncLoop(
        _MemoryConsumer(msgs),  # type: ignore[arg-type]
        codec=c,
        step=touch,
        metrics=m,
        poison=PoisonHandler(m, codec=codec, group="g", dead_letters=None),
        output=None,
        max_payload_bytes=1 << 22,
        batch_size=500,
        batch_timeout_s=0.005,
        max_in_flight=100,
        ordering="key",
        budget_s=5.0,
        loop_kind=kind,
    )
    loop.assign([confluent_kafka.TopicPartition("in", p) for p in range(4)])
    t0, c0 = time.perf_counter(), time.process_time()
    loop.run(lambda: loop.processed >= count, lambda: None)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "cpu_us_per_msg": round(1e6 * cpu / count, 2),
        "msgs_per_s": round(count / wall),
    }


def compare_loops(args: argparse.Namespace) -> dict[str, Any]:
    """Each codec through `AsyncLoop` on uvloop and on asyncio, alternating."""
    out: dict[str, Any] = {}
    for codec in args.codecs:
        runs: dict[str, list[dict[str, float]]] = {"uvloop": [], "asyncio": []}
        for r in range(args.rounds):
            for kind in ("uvloop", "asyncio") if r % 2 == 0 else ("asyncio", "uvloop"):
                runs[kind].append(_loop_once(codec, args.messages, kind))
        out[codec] = {
            kind: {
                k: statistics.median(run[k] for run in rs)
                for k in ("cpu_us_per_msg", "msgs_per_s")
            }
            for kind, rs in runs.items()
        }
        log(f"{codec}: {out[codec]}")
    return out


# -- the command ----------------------------------------------------------------------------


def measure(args: argparse.Namespace, bootstrap: str) -> dict[str, Any]:
    """Every codec: drain, or fixed rate with `--rate`."""
    res: dict[str, Any] = {
        "handler": HANDLER,
        "max_in_flight": args.max_in_flight,
        "ordering": args.ordering,
        "partitions": args.partitions,
        "contenders": args.contenders,
    }
    if args.loops:
        res.update(mode="loops", messages=args.messages, rounds=args.rounds)
        res["codecs"] = compare_loops(args)
    elif args.rate:
        res.update(mode="fixed-rate", rate=args.rate, duration=args.duration)
        res["codecs"] = {
            c: {who: _fixed_once(args, bootstrap, c, who) for who in args.contenders}
            for c in args.codecs
        }
    else:
        res.update(mode="drain", messages=args.messages, rounds=args.rounds)
        res["codecs"] = {c: _codec_drain(args, bootstrap, c) for c in args.codecs}
    return res


def show(res: dict[str, Any]) -> None:
    print(f"{res['mode']}: {res['handler']}, max in flight {res['max_in_flight']}")
    for codec, row in res["codecs"].items():
        if res["mode"] == "loops":
            cells = [
                f"{kind} {row[kind]['cpu_us_per_msg']:.1f} us/msg "
                f"({row[kind]['msgs_per_s']:,.0f} msg/s)"
                for kind in ("uvloop", "asyncio")
            ]
        elif res["mode"] == "drain":
            cells = [
                f"{who} {row[who]['msgs_per_cpu_s']:,} msg/CPU-s "
                f"({row[who]['msgs_per_wall_s']:,} msg/s)"
                for who in res["contenders"]
            ]
            cells += [f"{k} {v}" for k, v in row.items() if k.startswith("worker_over")]
        else:
            cells = [
                f"{who} {row[who]['cpu_pct']} % ({row[who]['cpu_us_per_msg']} us/msg"
                f"{'' if row[who]['kept_up'] else ', BEHIND'})"
                for who in res["contenders"]
            ]
        print(f"{codec:22} " + "; ".join(cells))
    print(f"load average before: {res['load_average_before']}")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tests.perf.bench_async",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--bootstrap-servers")
    p.add_argument("--codecs", type=_codecs, default=",".join(DEFAULT_CODECS))
    p.add_argument("--messages", type=int, default=50_000)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--max-in-flight", type=int, default=100)
    p.add_argument("--ordering", default="key")
    p.add_argument("--rate", type=float, default=0.0, help="fixed rate (0: drain)")
    p.add_argument("--duration", type=float, default=20.0)
    p.add_argument(
        "--contenders",
        type=lambda t: tuple(t.split(",")),
        default=CONTENDERS,
        help="asyncio,aio,worker (and sync-worker: the sync handler "
        f"{SYNC_HANDLER} in the worker)",
    )
    p.add_argument(
        "--loops",
        action="store_true",
        help="no Kafka: the async loop on uvloop against asyncio's loop",
    )
    p.add_argument("--json", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.loops:  # no broker to start
        res = measure(args, "")
        res["load_average_before"] = [round(x, 2) for x in os.getloadavg()]
        print(json.dumps(res)) if args.json else show(res)
        return 0
    return run_bench(args, lambda bootstrap: measure(args, bootstrap), show)


if __name__ == "__main__":
    sys.exit(main())
