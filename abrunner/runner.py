"""`codec-ab`: the codec A/B run, one command from nothing to a report with charts.

For each payload profile, repeat and codec: a fresh topic and consumer group, a worker
process with that codec, a warm-up, then the load generator at `--rate` for
`--duration`; the figures come from the worker's own /metrics and the kernel's
accounting of its process (`abrunner.measure`). Everything is torn down before the next
codec, and every codec runs on the same broker in the same session, so the figures
compare. With no `--bootstrap-servers` the local Kafka is started and stopped here.
`--max` finds each codec's maximum rate per worker process instead: the worker drains a
pre-filled backlog as fast as one process can.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, cast

from confluent_kafka import Consumer, TopicPartition

from abrunner import measure, report as abreport
from localkafka import LocalKafka, create_topic, delete_topic
from service.children import die_with_parent
from service.codecs import CODEC_NAMES, REAL_CODECS
from service.schemas import SCHEMA_NAMES

DEFAULT_BASELINE: Final = "json-stdlib+pydantic"
_POLL_S: Final = 0.5


@dataclass(frozen=True)
class Profile:
    """A payload profile: a schema and, for `large`, its size in bytes."""

    schema: str
    large_bytes: int | None = None

    @property
    def label(self) -> str:
        return f"large:{self.large_bytes}" if self.large_bytes else self.schema

    @classmethod
    def parse(cls, text: str) -> Profile:
        schema, _, size = text.partition(":")
        if schema not in SCHEMA_NAMES or (size and schema != "large"):
            raise ValueError(
                f"profile {text!r}: expected small, medium, large or large:BYTES"
            )
        return cls(schema, int(size) if size else None)


@dataclass
class Plan:
    """What to run (parsed from the command line)."""

    codecs: list[str]
    profiles: list[Profile]
    rate: float
    duration: float
    warmup: float
    repeat: int
    max_mode: bool
    max_messages: int
    partitions: int
    baseline: str
    out: Path
    worker_args: list[str] = field(default_factory=list)
    verify: bool = True


# -- processes ------------------------------------------------------------------------------


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Worker:
    """A `codec-worker` process for one case."""

    def __init__(self, bootstrap: str, topic: str, codec: str, profile: Profile,
                 plan: Plan, log: Path) -> None:  # fmt: skip
        self.port = _free_port()
        self.group = f"ab-{uuid.uuid4().hex[:10]}"
        cmd = [sys.executable, "-m", "service", "--bootstrap-servers", bootstrap,
               "--topic", topic, "--group", self.group, "--codec", codec,
               "--schema", profile.schema, "--metrics-port", str(self.port),
               "--summary-interval-s", "5", *plan.worker_args]  # fmt: skip
        self._log = log.open("ab")
        self.proc = subprocess.Popen(  # noqa: S603
            cmd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent(),
        )

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"worker exited with {self.proc.returncode} at start"
                )
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.port}/readyz", timeout=1
                ):
                    return
            except OSError:
                time.sleep(0.2)
        raise TimeoutError("worker got no partitions in time")

    def snapshot(self) -> measure.Snapshot:
        return measure.snapshot(self.proc.pid, self.port)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        finally:
            self._log.close()


def _loadgen(bootstrap: str, topic: str, codec: str, profile: Profile, run_id: str,
             *, rate: float, duration: float | None = None, count: int | None = None,
             seed: int = 0) -> subprocess.Popen[bytes]:  # fmt: skip
    cmd = [sys.executable, "-m", "loadgen", "--bootstrap-servers", bootstrap,
           "--topic", topic, "--codec", codec, "--profile", profile.schema,
           "--rate", str(rate), "--run-id", run_id, "--seed", str(seed), "--json"]  # fmt: skip
    if profile.large_bytes:
        cmd += ["--large-bytes", str(profile.large_bytes)]
    cmd += ["--duration", str(duration)] if duration else ["--count", str(count)]
    return subprocess.Popen(  # noqa: S603
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=die_with_parent(),
    )


def _summary(proc: subprocess.Popen[bytes], timeout: float) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode not in (0, 1):
        raise RuntimeError(
            f"codec-loadgen failed ({proc.returncode}): {err.decode()[-2000:]}"
        )
    summary: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return summary


def _acked(summary: dict[str, Any]) -> int:
    return int(summary.get("acked", summary.get("acknowledged", 0)))


# -- one case -------------------------------------------------------------------------------


def _wait_processed(worker: _Worker, total: float, timeout: float) -> measure.Snapshot:
    deadline = time.monotonic() + timeout
    snap = worker.snapshot()
    while measure.processed(snap) < total and time.monotonic() < deadline:
        time.sleep(0.1)
        snap = worker.snapshot()
    return snap


def _committed_matches_end(
    bootstrap: str, group: str, topic: str, partitions: int
) -> bool:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        committed = consumer.committed(tps, timeout=10)
        for tp in committed:
            _low, high = consumer.get_watermark_offsets(tp, timeout=10)
            if high > 0 and tp.offset != high:
                return False
        return True
    finally:
        consumer.close()


def run_case(bootstrap: str, codec: str, profile: Profile, plan: Plan,
             note: Callable[[str], None]) -> dict[str, Any]:  # fmt: skip
    """Measure one codec on one profile; return the figures (see abreport)."""
    tag = f"{codec.replace('+', '-')}-{profile.label.replace(':', '-')}"
    topic = f"ab-{uuid.uuid4().hex[:8]}-{tag}"
    create_topic(bootstrap, topic, plan.partitions)
    create_topic(bootstrap, f"{topic}.dlq", plan.partitions)
    run_id = uuid.uuid4().hex[:12]
    log = plan.out / "logs" / f"{tag}.log"
    measure_case = _measure_max if plan.max_mode else _measure_rate
    worker: _Worker | None = None
    try:
        result, worker = measure_case(
            bootstrap, topic, codec, profile, plan, log, run_id, note
        )
        result["worker_exit"] = worker.stop()
        result["offsets_committed_to_end"] = _committed_matches_end(
            bootstrap, worker.group, topic, plan.partitions
        )
        return result
    finally:
        if worker is not None and worker.proc.poll() is None:
            worker.proc.kill()
            worker.proc.wait()
        for name in (topic, f"{topic}.dlq"):
            delete_topic(bootstrap, name)


def _measure_rate(bootstrap: str, topic: str, codec: str, profile: Profile, plan: Plan,
                  log: Path, run_id: str, note: Callable[[str], None]
                  ) -> tuple[dict[str, Any], _Worker]:  # fmt: skip
    worker = _Worker(bootstrap, topic, codec, profile, plan, log)
    worker.wait_ready()
    warm = _summary(_loadgen(bootstrap, topic, codec, profile, f"{run_id}-warm",
                             rate=plan.rate, duration=plan.warmup, seed=1), plan.warmup + 120)  # fmt: skip
    note("warm-up sent; waiting for the worker")
    warmed = measure.processed(_wait_processed(worker, _acked(warm), 60))
    note(f"measuring {plan.duration:.0f} s at {plan.rate:,.0f} msg/s")
    load = _loadgen(bootstrap, topic, codec, profile, run_id, rate=plan.rate,
                    duration=plan.duration, seed=2)  # fmt: skip
    # The window opens when the first measured message is handled, not when the
    # load generator's process starts (its start-up is not the worker's time).
    s0 = _wait_processed(worker, warmed + 1, 60)
    rss, lags = _watch(worker, lambda: load.poll() is None)
    s1 = worker.snapshot()
    summary = _summary(load, 60)
    total = _acked(warm) + _acked(summary)
    note("load done; draining")
    s2 = _wait_processed(worker, total, max(60.0, 3 * plan.duration))
    figures = _figures(s0, s1, s2, rss, lags)
    backlog = int(total - measure.processed(s2))
    figures.update(
        mode="rate",
        target_rate=plan.rate,
        producer_rate=summary.get("achieved_rate"),
        sent=summary.get("sent"),
        acked=_acked(summary),
        producer_failed=summary.get("failed", 0),
        # Unhandled after the drain: still queued, not lost. Loss is only counted
        # once the worker has come to the end of the topic.
        lost=0 if backlog <= 0 else None,
        not_drained=max(backlog, 0),
    )
    if plan.verify:
        figures["seq_missing"] = _missing_seqs(
            bootstrap, topic, run_id, _acked(summary)
        )
    produced = summary.get("achieved_rate") or plan.rate
    behind = figures["lag_end"] > max(0.5 * plan.rate, 1000) or (
        figures["throughput"] < 0.9 * produced
    )
    figures["kept_up"] = not behind
    return figures, worker


def _measure_max(bootstrap: str, topic: str, codec: str, profile: Profile, plan: Plan,
                 log: Path, run_id: str, note: Callable[[str], None]
                 ) -> tuple[dict[str, Any], _Worker]:  # fmt: skip
    # The backlog is written before any worker exists, so the worker drains it at
    # the full speed of one process: that drain rate is its maximum sustainable rate.
    note(f"filling a backlog of {plan.max_messages:,} messages")
    summary = _summary(_loadgen(bootstrap, topic, codec, profile, run_id, rate=0,
                                count=plan.max_messages), 900)  # fmt: skip
    total = _acked(summary)
    worker = _Worker(bootstrap, topic, codec, profile, plan, log)
    note("draining the backlog with one worker process")
    deadline = time.monotonic() + 900
    s0 = None
    while s0 is None and time.monotonic() < deadline:
        try:
            snap = worker.snapshot()
        except OSError:  # the control plane is not up yet
            time.sleep(0.05)
            continue
        if measure.processed(snap) > 0:
            s0 = snap
        time.sleep(0.05)
    if s0 is None:
        raise TimeoutError("the worker processed nothing")
    rss, lags = _watch(
        worker, lambda: measure.processed(worker.snapshot()) < total, 0.25
    )
    s1 = _wait_processed(worker, total, 600)
    figures = _figures(s0, s1, s1, rss, lags)
    figures.update(
        mode="max",
        max_rate=figures["throughput"],
        acked=total,
        producer_failed=summary.get("failed", 0),
        lost=int(total - measure.processed(s1)),
        kept_up=True,
        e2e_p50_ms=None,
        e2e_p99_ms=None,
        e2e_p999_ms=None,
    )
    figures["cpu_pct"] = 100 * (s1.cpu_s - s0.cpu_s) / max(s1.at - s0.at, 1e-9)
    return figures, worker


def _watch(worker: _Worker, running: Callable[[], bool], every: float = _POLL_S
           ) -> tuple[list[int], list[float]]:  # fmt: skip
    """Sample the worker's RSS and lag while `running()`."""
    rss: list[int] = []
    lags: list[float] = []
    while running():
        time.sleep(every)
        snap = worker.snapshot()
        rss.append(snap.rss)
        lags.append(snap.lag)
    return rss, lags


def _figures(s0: measure.Snapshot, s1: measure.Snapshot, s2: measure.Snapshot,
             rss: list[int], lags: list[float]) -> dict[str, Any]:  # fmt: skip
    window = max(s1.at - s0.at, 1e-9)
    done_load = measure.processed(s1) - measure.processed(s0)
    done_all = max(measure.processed(s2) - measure.processed(s0), 1.0)
    e2e = s2.histograms["worker_e2e_latency_seconds"].minus(
        s0.histograms["worker_e2e_latency_seconds"]
    )
    decode = s2.histograms["worker_decode_seconds"].minus(
        s0.histograms["worker_decode_seconds"]
    )
    handle = s2.histograms["worker_handle_seconds"].minus(
        s0.histograms["worker_handle_seconds"]
    )
    ok = s2.counter("worker_messages_total{ok}") - s0.counter(
        "worker_messages_total{ok}"
    )
    wire = s2.counter("worker_bytes_total") - s0.counter("worker_bytes_total")
    half = rss[len(rss) // 2 :] or [s1.rss]
    dead = sum(
        v for k, v in s2.counters.items() if k.startswith("worker_dead_letters_total")
    )
    return {
        "throughput": done_load / window,
        "cpu_pct": 100 * (s1.cpu_s - s0.cpu_s) / window,
        "cpu_us_per_msg": 1e6 * (s2.cpu_s - s0.cpu_s) / done_all,
        "e2e_p50_ms": _ms(e2e.quantile(0.5)),
        "e2e_p99_ms": _ms(e2e.quantile(0.99)),
        "e2e_p999_ms": _ms(e2e.quantile(0.999)),
        "decode_us": 1e6 * decode.total / decode.count if decode.count else None,
        "handle_us": 1e6 * handle.total / handle.count if handle.count else None,
        "rss_peak_mb": max([*rss, s1.rss]) / 2**20,
        "rss_steady_mb": statistics.median(half) / 2**20,
        "wire_bytes": wire / ok if ok else None,
        "lag_end": s1.lag,
        "lag_max": max([*lags, s1.lag]),
        "dead_lettered": int(dead),
        "processed": int(done_all),
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


def _missing_seqs(bootstrap: str, topic: str, run_id: str, expected: int) -> int:
    """Read the topic back to its end: how many x-seq of the measured run are absent.

    Partitions are assigned from offset 0 (no group to join) and read up to the high
    watermarks taken first, so the read ends as soon as the data does.
    """
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"verify-{run_id}",
        "enable.auto.commit": False, "max.partition.fetch.bytes": 8 << 20,
        "fetch.max.bytes": 64 << 20,
    })  # fmt: skip
    seen: set[int] = set()
    wanted = run_id.encode()
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        ends = {}
        for p in meta.partitions:
            _low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=10
            )
            if high > 0:
                ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        while ends:
            for m in consumer.consume(10_000, 1.0):
                if m.error() is not None:
                    continue
                run = seq = None
                headers = cast("list[tuple[str, bytes | None]]", m.headers() or [])
                for key, value in headers:
                    if key == "x-run-id":
                        run = value
                    elif key == "x-seq":
                        seq = value
                if run == wanted and seq is not None:
                    seen.add(int(seq))
                if (m.offset() or 0) + 1 >= ends.get(m.partition() or 0, 0):
                    ends.pop(m.partition(), None)
    finally:
        consumer.close()
    return len(set(range(expected)) - seen)


# -- command line -----------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="codec-ab",
        description="Compare codecs on real Kafka: a worker per codec under the same "
        "load, then one side-by-side report (report.md, report.json, PNG charts).",
    )
    add = parser.add_argument
    add(
        "--bootstrap-servers", help="Kafka to use (default: start the local Kafka here)"
    )
    add(
        "--codecs",
        default=",".join(REAL_CODECS),
        help="comma-separated codec keys (default: all six)",
    )
    add(
        "--rate",
        type=float,
        default=40_000,
        help="messages per second (default: 40000)",
    )
    add(
        "--duration",
        type=float,
        default=30,
        help="measured seconds per codec (default: 30)",
    )
    add(
        "--warmup", type=float, default=5, help="warm-up seconds per codec (default: 5)"
    )
    add(
        "--profile",
        default="medium",
        help="payload profile: small, medium, large[:BYTES] (default: medium)",
    )
    add(
        "--profiles",
        help="comma-separated profiles to sweep, e.g. small,medium,large:1000000",
    )
    add(
        "--large-bytes",
        help="comma-separated sizes for the large profile, e.g. 10000,100000,1500000",
    )
    add(
        "--repeat",
        type=int,
        default=1,
        help="repeat each case N times; report median and spread (default: 1)",
    )
    add(
        "--max",
        dest="max_mode",
        action="store_true",
        help="find each codec's maximum rate per worker process",
    )
    add(
        "--max-messages",
        type=int,
        default=200_000,
        help="backlog size in --max mode (default: 200000)",
    )
    add(
        "--partitions",
        type=int,
        default=4,
        help="partitions of each topic (default: 4)",
    )
    add(
        "--baseline",
        default=DEFAULT_BASELINE,
        help=f"codec the ratios refer to (default: {DEFAULT_BASELINE})",
    )
    add(
        "--out",
        type=Path,
        default=Path("ab-results"),
        help="report directory (default: ab-results)",
    )
    add("--worker-arg", action="append", default=[], metavar="FLAG=VALUE",
        help="extra codec-worker flag, repeatable, e.g. --worker-arg=--batch-size=1000")  # fmt: skip
    add(
        "--no-verify",
        action="store_true",
        help="skip reading the topic back to check x-seq coverage",
    )
    return parser


def _plan(args: argparse.Namespace) -> Plan:
    codecs = [c.strip() for c in args.codecs.split(",") if c.strip()]
    for codec in codecs:
        if codec not in CODEC_NAMES or codec == "auto":
            raise ValueError(
                f"--codecs: {codec!r} is not a wire codec; choose from {', '.join(REAL_CODECS)}"
            )
    profiles = [
        Profile.parse(p.strip()) for p in (args.profiles or args.profile).split(",")
    ]
    if args.large_bytes:
        sizes = [int(s) for s in args.large_bytes.split(",")]
        profiles = [p for p in profiles if p.schema != "large"] + [
            Profile("large", s) for s in sizes
        ]
    if args.baseline not in codecs:
        raise ValueError(
            f"--baseline {args.baseline!r} is not among --codecs ({', '.join(codecs)})"
        )
    for name in ("rate", "duration", "warmup"):
        if getattr(args, name) <= 0 and not (args.max_mode and name != "warmup"):
            raise ValueError(f"--{name} must be positive, got {getattr(args, name)}")
    if args.repeat < 1 or args.partitions < 1 or args.max_messages < 1:
        raise ValueError("--repeat, --partitions and --max-messages must be at least 1")
    return Plan(codecs, profiles, args.rate, args.duration, args.warmup, args.repeat,
                args.max_mode, args.max_messages, args.partitions, args.baseline, args.out,
                [w for a in args.worker_arg for w in a.split("=", 1)], not args.no_verify)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """Run the A/B; 0 when every case ran and lost nothing, 1 otherwise, 2 bad flags."""
    from rich.console import Console
    from rich.table import Table

    args = build_parser().parse_args(argv)
    console = Console(stderr=True)
    try:
        plan = _plan(args)
    except ValueError as exc:
        console.print(f"codec-ab: {exc}")
        return 2
    (plan.out / "logs").mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    with ExitStack() as stack:
        bootstrap = args.bootstrap_servers
        kafka = "external"
        if not bootstrap:
            from localkafka import kafka_version

            console.print("starting the local Kafka ...")
            bootstrap = stack.enter_context(LocalKafka()).bootstrap_servers
            kafka = kafka_version()
        results = _run_all(bootstrap, plan, console)
    report: dict[str, Any] = {
        "plan": {
            **plan.__dict__,
            "out": str(plan.out),
            "profiles": [p.label for p in plan.profiles],
        },
        "environment": abreport.environment(kafka),
        "results": results,
        "summary": abreport.aggregate(results),
    }
    paths = abreport.write(report, plan.out)
    for profile, rows in report["summary"].items():
        headers, body = abreport.table(
            rows, plan.baseline, plan.max_mode, plan.repeat > 1
        )
        view = Table(title=f"profile {profile}", show_lines=False)
        for header in headers:
            view.add_column(header, overflow="fold")
        for cells in body:
            view.add_row(*cells)
        Console().print(view)
    console.print(
        "report: "
        + ", ".join(str(p) for p in paths[:2])
        + f" and {len(paths) - 2} charts"
    )
    bad = [r for r in results if "error" in r or r.get("lost") or r.get("seq_missing")]
    return 1 if bad else 0


def _run_all(bootstrap: str, plan: Plan, console: Any) -> list[dict[str, Any]]:
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    cases = [
        (p, r, c)
        for p in plan.profiles
        for r in range(plan.repeat)
        for c in plan.codecs
    ]
    results = []
    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                        console=console, disable=not console.is_terminal)  # fmt: skip
    with progress:
        overall = progress.add_task(f"{len(cases)} cases", total=len(cases))
        for profile, repeat, codec in cases:
            name = f"{codec} / {profile.label} / run {repeat + 1}"
            step = progress.add_task(name, total=None)

            def note(text: str, step: Any = step, name: str = name) -> None:
                progress.update(step, description=f"{name}: {text}")
                if not console.is_terminal:
                    console.print(f"{name}: {text}")

            try:
                figures = run_case(bootstrap, codec, profile, plan, note)
            except Exception as exc:  # one failed case must not lose the others
                figures = {"error": f"{type(exc).__name__}: {exc}"}
                console.print(f"{name}: FAILED: {figures['error']}")
            results.append(
                {"codec": codec, "profile": profile.label, "repeat": repeat, **figures}
            )
            progress.remove_task(step)
            progress.advance(overall)
    return results


if __name__ == "__main__":
    raise SystemExit(main())
