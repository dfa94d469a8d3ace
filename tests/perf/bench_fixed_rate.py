"""Fixed-rate mode of `bench_worker`: bare loop and worker on the same paced traffic."""

from __future__ import annotations

import argparse
import subprocess
import time
from contextlib import ExitStack
from typing import Any, Final

from tests.perf.bench_support import (
    WORKER_DEFAULTS,
    BareConsumer,
    WorkerProcess,
    by_role,
    cpu_seconds,
    fresh_topic,
    latency_ms,
    loadgen_cmd,
    loadgen_summary,
    log,
    thread_cpu,
    wait_until,
)

BARES: Final = ("bare", "bare-2")
"""The bare loop, and its twin with `--twin-bare` (the run's noise floor)."""

CPU_TARGET: Final = 1.10
LATENCY_TARGET: Final = 1.2


def _window_end(
    bares: list[BareConsumer],
    worker: WorkerProcess,
    acked: int,
    args: argparse.Namespace,
) -> dict[str, int]:
    """Wait until all processed `acked` (or the drain timeout); their progress."""
    deadline = time.monotonic() + args.drain_timeout
    while True:
        done = {name: b.progress() for name, b in zip(BARES, bares, strict=False)}
        done["worker"] = worker.progress()
        if min(done.values()) >= acked or time.monotonic() > deadline:
            return done
        time.sleep(args.sample_interval)


def _measure(
    args: argparse.Namespace, bootstrap: str, topic: str, batch: int, rate: float
) -> dict[str, Any]:
    """Run the load past all consumers; raw CPU, progress and latency readings."""
    with ExitStack() as stack:
        timeout = WORKER_DEFAULTS.batch_timeout_ms / 1000
        every = args.latency_sample_every
        bares = []
        for _ in range(2 if args.twin_bare else 1):
            bare = BareConsumer(
                bootstrap,
                topic,
                args.codec,
                batch,
                timeout,
                latencies=True,
                latency_sample_every=every,
            )
            stack.callback(bare.close)
            bares.append(bare)
        worker = WorkerProcess(
            bootstrap,
            topic,
            args.codec,
            args.batch_size,
            "--latency-sample-every",
            str(every),
        )
        stack.callback(worker.close)
        # All assigned first: a consumer that joins late starts with a backlog.
        wait_until(
            "consumers assigned",
            lambda: all(b.ready() for b in bares) and worker.ready(),
            120,
        )
        before = worker.e2e_buckets()
        log(f"{args.codec}: {rate:,.0f} msg/s for {args.duration:g} s into {topic}")
        flags = ("--rate", str(rate), "--duration", str(args.duration))
        load = subprocess.Popen(
            loadgen_cmd(bootstrap, topic, args.codec, *flags),
            stdout=subprocess.PIPE,
            text=True,
        )
        stack.callback(load.kill)
        wait_until(
            "first message",
            lambda: bares[0].progress() > 0 or load.poll() is not None,
            120,
        )
        pids = (*(b.pid for b in bares), worker.pid)
        t0, threads0 = time.monotonic(), [thread_cpu(p) for p in pids]
        cpu0 = [cpu_seconds(p) for p in pids]
        summary = loadgen_summary(load, args.duration + 300)
        done = _window_end(bares, worker, summary["acked"], args)
        t1, threads1 = time.monotonic(), [thread_cpu(p) for p in pids]
        cpu1 = [cpu_seconds(p) for p in pids]
        after = worker.e2e_buckets()
        return {
            "summary": summary,
            "window_s": t1 - t0,
            "names": [*BARES[: len(bares)], "worker"],
            "cpu_s": [b - a for a, b in zip(cpu0, cpu1, strict=True)],
            "done": done,
            "threads_cpu_s": [
                by_role(a, b) for a, b in zip(threads0, threads1, strict=True)
            ],
            "worker_counts": [a - b for a, b in zip(after, before, strict=True)],
            "bare_latency": [b.latencies() for b in bares],
        }


def fixed_rate(args: argparse.Namespace, bootstrap: str) -> dict[str, Any]:
    """Fixed-rate mode: each of `--rates` in turn, on a fresh topic."""
    runs = [_one_rate(args, bootstrap, rate) for rate in args.rates]
    return {
        "mode": "fixed-rate",
        "codec": args.codec,
        "latency_sample_every": args.latency_sample_every,
        "runs": runs,
    }


def _one_rate(args: argparse.Namespace, bootstrap: str, rate: float) -> dict[str, Any]:
    """Both consumers on the same paced traffic: CPU, latency, CPU by thread."""
    batch = args.batch_size or WORKER_DEFAULTS.batch_size
    with ExitStack() as stack:
        topic = fresh_topic(stack, bootstrap, args.codec, args.partitions)
        raw = _measure(args, bootstrap, topic, batch, rate)
    summary, window = raw["summary"], raw["window_s"]
    result: dict[str, Any] = {}
    lat = dict(zip(BARES, raw["bare_latency"], strict=False))
    counts = {who: lat[who]["counts"] for who in lat}
    counts["worker"] = raw["worker_counts"]
    for i, who in enumerate(raw["names"]):
        result[who] = {
            "cpu_pct": round(raw["cpu_s"][i] / window * 100, 2),
            "threads_cpu_pct": {
                name: round(cpu / window * 100, 2)
                for name, cpu in raw["threads_cpu_s"][i].items()
            },
            "processed": raw["done"][who],
            "behind": max(summary["acked"] - raw["done"][who], 0),
            "latency_samples": int(sum(counts[who])),
            "p50_ms": latency_ms(counts[who], 0.5),
            "p99_ms": latency_ms(counts[who], 0.99),
        }
    for who, figures in lat.items():
        for q in ("p50", "p99"):
            exact = figures[f"exact_{q}_s"]
            result[who][f"exact_{q}_ms"] = (
                None if exact is None else round(exact * 1e3, 3)
            )
    keys = ("cpu_pct", "p50_ms", "p99_ms")
    ratios = {k: _ratio(result["worker"][k], result["bare"][k]) for k in keys}
    if "bare-2" in result:
        # Two identical loops on the same traffic differ by this much: a worker
        # ratio within it says nothing; the mean of both is the steadier baseline.
        twin = result["bare-2"]["cpu_pct"]
        ratios["bare_2_cpu_pct"] = _ratio(twin, result["bare"]["cpu_pct"])
        mean = (result["bare"]["cpu_pct"] + twin) / 2
        ratios["cpu_pct_of_bare_mean"] = _ratio(result["worker"]["cpu_pct"], mean)
    return {
        "codec": args.codec,
        "partitions": args.partitions,
        "batch_size": batch,
        "target_rate": rate,
        "achieved_rate": summary["achieved_rate"],
        "acked": summary["acked"],
        "ack_latency_ms": [summary["ack_latency"][k] for k in ("p50_ms", "p99_ms")],
        "window_s": round(window, 2),
        "contenders": result,
        "ratios": ratios,
        "targets": dict(
            zip(keys, (CPU_TARGET, LATENCY_TARGET, LATENCY_TARGET), strict=True)
        ),
    }


def _ratio(worker: float | None, bare: float | None) -> float | None:
    return None if not worker or not bare else round(worker / bare, 3)


def print_fixed_rate(res: dict[str, Any]) -> None:
    every = res["latency_sample_every"]
    print(f"e2e latency stamp read for every {every}. message by both contenders")
    for run in res["runs"]:
        _print_run(run)
    twin = "bare_2_cpu_pct" in res["runs"][0]["ratios"]
    extra = "   bare-2/bare  worker/mean of bares" if twin else ""
    print(f"rate      CPU worker/bare  (target <= {CPU_TARGET}x)   p50     p99{extra}")
    for run in res["runs"]:
        r = run["ratios"]
        verdict = "met" if r["cpu_pct"] and r["cpu_pct"] <= CPU_TARGET else "NOT met"
        more = (
            f"{r['bare_2_cpu_pct']!s:>13}x{r['cpu_pct_of_bare_mean']!s:>22}x"
            if twin
            else ""
        )
        print(
            f"{run['target_rate']:<10,.0f}{r['cpu_pct']!s:>8}x {verdict:>8}"
            f"{r['p50_ms']!s:>18}x{r['p99_ms']!s:>7}x{more}"
        )


def _print_run(res: dict[str, Any]) -> None:
    print(
        f"\n{res['codec']} medium events, {res['partitions']} partitions, batch "
        f"{res['batch_size']}: target {res['target_rate']:,.0f} msg/s, achieved "
        f"{res['achieved_rate']:,.0f}; {res['acked']:,} messages, window "
        f"{res['window_s']} s; producer acks p50/p99 ms: {res['ack_latency_ms']}"
    )
    print(
        f"{'contender':10}{'CPU % of a core':>16}{'e2e p50 ms':>12}"
        f"{'e2e p99 ms':>12}  behind  CPU % by thread"
    )
    for who, r in res["contenders"].items():
        p50, p99 = (
            f"{r[k]}" if r[k] is not None else "-" for k in ("p50_ms", "p99_ms")
        )
        threads = ", ".join(f"{k} {v}" for k, v in r["threads_cpu_pct"].items())
        print(
            f"{who:10}{r['cpu_pct']:>16}{p50:>12}{p99:>12}  {r['behind']:<6,}"
            f"  {threads}"
        )
    parts = []
    if "bare_2_cpu_pct" in res["ratios"]:
        r = res["ratios"]
        print(
            f"bare-2 / bare CPU: {r['bare_2_cpu_pct']}x (the run's noise floor); "
            f"worker / mean of both bares: {r['cpu_pct_of_bare_mean']}x"
        )
    for key, label in (("cpu_pct", "CPU"), ("p50_ms", "p50"), ("p99_ms", "p99")):
        ratio, target = res["ratios"][key], res["targets"][key]
        verdict = "-" if ratio is None else ("met" if ratio <= target else "NOT met")
        parts.append(f"{label} {ratio}x (target <= {target}x: {verdict})")
    print("worker / bare: " + "; ".join(parts))
