"""The A/B cases: for each profile, repeat and codec, measure one worker process.

Each case gets a fresh topic (and its DLQ), a fresh consumer group and a worker with
that codec. Rate mode: a warm-up, then the load generator at `plan.rate` for
`plan.duration`, then a drain. Max mode: a backlog written before the worker
starts, drained as fast as one process can (its maximum rate). The figures come from
the worker's own /metrics and the kernel's accounting of its process
(`abrunner.measure`); everything is torn down before the next case, and every case
runs on the same broker in the same session, so the figures compare.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from functools import partial
from typing import Final, NamedTuple

from rich.console import Console
from rich.progress import (
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from abrunner import verify
from abrunner.measure import Histogram, Snapshot
from abrunner.plan import Plan, Profile
from abrunner.process import LoadgenProcess, WorkerProcess
from abrunner.report import aggregate, environment
from abrunner.results import CaseResult, Report
from localkafka import LocalKafka, create_topic, delete_topic, kafka_version
from service.errors import RunnerError

Note = Callable[[str], None]
"""Reports a case's progress in a few words."""

_POLL_S: Final = 0.5
"""RSS and lag samples twice a second: 60 points over a 30 s window."""
_MAX_POLL_S: Final = 0.25
"""Max mode samples faster: a 200k backlog may drain in a few seconds."""
_START_S: Final = 60.0
"""A worker joins its group and gets partitions in a few seconds; 60 s is a failure."""
_BACKLOG_S: Final = 900.0
"""Writing a max-mode backlog, or waiting for its first message to be handled:
200k medium messages are written in ~1 s at the producer's ~255k msg/s; 15 min
only passes for a stuck process."""
_DRAIN_S: Final = 600.0
"""Draining a max-mode backlog: 200k json-stdlib+pydantic decodes take ~10 s at
~20k msg/s; what is left after 10 min counts as lost."""


class Case(NamedTuple):
    """One measurement: a codec on a profile, the `repeat`th time."""

    codec: str
    profile: Profile
    repeat: int

    @property
    def name(self) -> str:
        """For people: `protobuf / medium / run 1`."""
        return f"{self.codec} / {self.profile.label} / run {self.repeat + 1}"

    @property
    def tag(self) -> str:
        """For topic and log file names: `json-pydantic-large-100000`."""
        return f"{self.codec.replace('+', '-')}-{self.profile.label.replace(':', '-')}"


def run(plan: Plan, bootstrap: str | None, console: Console) -> Report:
    """Run every case of `plan`; start (and stop) the local Kafka with no `bootstrap`.

    A case that fails is recorded with its error; the others still run.
    """
    (plan.out_dir / "logs").mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        kafka = "external"
        if not bootstrap:
            console.print("starting the local Kafka ...")
            bootstrap = stack.enter_context(LocalKafka()).bootstrap_servers
            kafka = kafka_version()
        results = _run_all(bootstrap, plan, console)
    return Report(
        plan=plan,
        environment=environment(kafka),
        results=results,
        summary=aggregate(results),
    )


def _run_all(bootstrap: str, plan: Plan, console: Console) -> list[CaseResult]:
    cases = [
        Case(codec, profile, repeat)
        for profile in plan.profiles
        for repeat in range(plan.repeat)
        for codec in plan.codecs
    ]
    results = []
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        disable=not console.is_terminal,
    )
    with progress:
        overall = progress.add_task(f"{len(cases)} cases", total=len(cases))
        for case in cases:
            step = progress.add_task(case.name, total=None)

            def note(text: str, step: TaskID = step, name: str = case.name) -> None:
                progress.update(step, description=f"{name}: {text}")
                if not console.is_terminal:
                    console.print(f"{name}: {text}")

            try:
                result = run_case(bootstrap, case, plan, note)
            except Exception as exc:  # one failed case must not lose the others
                error = f"{type(exc).__name__}: {exc}"
                console.print(f"{case.name}: FAILED: {error}")
                result = CaseResult(
                    codec=case.codec,
                    profile=case.profile.label,
                    repeat=case.repeat,
                    error=error,
                )
            results.append(result)
            progress.remove_task(step)
            progress.advance(overall)
    return results


def run_case(bootstrap: str, case: Case, plan: Plan, note: Note) -> CaseResult:
    """Measure one case on a topic of its own, deleted afterwards.

    Raises:
        RunnerError: the worker or the load generator failed.
    """
    topic = f"ab-{uuid.uuid4().hex[:8]}-{case.tag}"
    create_topic(bootstrap, topic, plan.partitions)
    create_topic(bootstrap, f"{topic}.dlq", plan.partitions)
    worker = WorkerProcess(
        bootstrap,
        topic,
        *("--codec", case.codec, "--schema", case.profile.schema),
        *("--summary-interval-s", "5", *plan.worker_args),
        group=f"ab-{uuid.uuid4().hex[:10]}",
        log=plan.out_dir / "logs" / f"{case.tag}.log",
    )
    measure_case = _measure_max if plan.max_mode else _measure_rate
    try:
        result = measure_case(_Measurement(bootstrap, topic, case, plan, worker, note))
        result.worker_exit = worker.stop()
        result.offsets_committed_to_end = verify.committed_to_end(
            bootstrap, worker.group, topic, plan.partitions
        )
        return result
    finally:
        worker.close()
        for name in (topic, f"{topic}.dlq"):
            delete_topic(bootstrap, name)


class _Measurement(NamedTuple):
    """One case in progress: where it runs, its worker, whom it tells."""

    bootstrap: str
    topic: str
    case: Case
    plan: Plan
    worker: WorkerProcess
    note: Note


def _measure_rate(m: _Measurement) -> CaseResult:
    plan, worker, note = m.plan, m.worker, m.note
    loadgen = partial(
        LoadgenProcess, m.bootstrap, m.topic, m.case.codec, m.case.profile
    )
    run_id = uuid.uuid4().hex[:12]
    worker.start().wait_ready(_START_S)
    warm = loadgen(f"{run_id}-warm", rate=plan.rate, duration=plan.warmup, seed=1)
    warm_summary = warm.summary(timeout=plan.warmup + 120)
    note("warm-up sent; waiting for the worker")
    warmed = _wait_processed(worker, warm_summary.acked, _START_S).processed
    note(f"measuring {plan.duration:.0f} s at {plan.rate:,.0f} msg/s")
    load = loadgen(run_id, rate=plan.rate, duration=plan.duration, seed=2)
    # The window opens when the first measured message is handled, not when the
    # load generator's process starts (its start-up is not the worker's time).
    s0 = _wait_processed(worker, warmed + 1, _START_S)
    rss, lags = _watch(worker, load.running, _POLL_S)
    s1 = worker.snapshot()
    summary = load.summary(timeout=60)
    total = warm_summary.acked + summary.acked
    note("load done; draining")
    s2 = _wait_processed(worker, total, max(60.0, 3 * plan.duration))
    result = _figures(m.case, s0, s1, s2, rss, lags)
    backlog = int(total - s2.processed)
    result.mode = "rate"
    result.target_rate = plan.rate
    result.producer_rate = summary.achieved_rate
    result.sent, result.acked = summary.sent, summary.acked
    result.producer_failed = summary.failed
    # Unhandled after the drain: still queued, not lost. Loss is only counted once
    # the worker has come to the end of the topic.
    result.lost = 0 if backlog <= 0 else None
    result.not_drained = max(backlog, 0)
    if plan.verify:
        result.seq_missing = verify.missing_seqs(
            m.bootstrap, m.topic, run_id, summary.acked
        )
    # Behind: more than half a second of traffic (at least 1000 messages) still
    # queued when the load stopped, or under 90 % of the rate actually produced.
    produced = summary.achieved_rate or plan.rate
    behind = (result.lag_end or 0) > max(0.5 * plan.rate, 1000) or (
        (result.throughput or 0) < 0.9 * produced
    )
    result.kept_up = not behind
    return result


def _measure_max(m: _Measurement) -> CaseResult:
    plan, worker, note = m.plan, m.worker, m.note
    loadgen = partial(
        LoadgenProcess, m.bootstrap, m.topic, m.case.codec, m.case.profile
    )
    # The backlog is written before the worker starts, so the worker drains it at
    # the full speed of one process: that drain rate is its maximum sustainable rate.
    note(f"filling a backlog of {plan.max_messages:,} messages")
    backlog = loadgen(uuid.uuid4().hex[:12], rate=0, count=plan.max_messages)
    summary = backlog.summary(timeout=_BACKLOG_S)
    total = summary.acked
    worker.start()
    note("draining the backlog with one worker process")
    s0 = _first_processed(worker, _BACKLOG_S)
    rss, lags = _watch(worker, lambda: worker.snapshot().processed < total, _MAX_POLL_S)
    s1 = _wait_processed(worker, total, _DRAIN_S)
    result = _figures(m.case, s0, s1, s1, rss, lags)
    result.mode = "max"
    result.max_rate = result.throughput
    result.acked = total
    result.producer_failed = summary.failed
    result.lost = int(total - s1.processed)
    result.kept_up = True
    # Latency from a backlog is the time a message waited in it, not the codec's.
    result.e2e_p50_ms = result.e2e_p99_ms = result.e2e_p999_ms = None
    return result


def _first_processed(worker: WorkerProcess, timeout: float) -> Snapshot:
    """The first snapshot with a message handled: the drain's start.

    Raises:
        RunnerError: the worker exited, or handled nothing within `timeout` s.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            snap = worker.snapshot()
        except OSError:  # its /metrics is not up yet
            snap = None
        if snap is not None and snap.processed > 0:
            return snap
        time.sleep(0.05)  # 50 ms: the start of a drain of a few seconds
    raise RunnerError(f"the worker processed nothing in {timeout:.0f} s")


def _wait_processed(worker: WorkerProcess, total: float, timeout: float) -> Snapshot:
    """The first snapshot with `total` handled, or the last one at `timeout`."""
    deadline = time.monotonic() + timeout
    snap = worker.snapshot()
    while snap.processed < total and time.monotonic() < deadline:
        time.sleep(0.1)
        snap = worker.snapshot()
    return snap


def _watch(
    worker: WorkerProcess, running: Callable[[], bool], every: float
) -> tuple[list[int], list[float]]:
    """Sample the worker's RSS and lag while `running()`."""
    rss: list[int] = []
    lags: list[float] = []
    while running():
        time.sleep(every)
        snap = worker.snapshot()
        rss.append(snap.rss)
        lags.append(snap.lag)
    return rss, lags


def _figures(
    case: Case,
    s0: Snapshot,
    s1: Snapshot,
    s2: Snapshot,
    rss: list[int],
    lags: list[float],
) -> CaseResult:
    """The figures of window `s0`-`s1` (load) and `s0`-`s2` (load and drain)."""
    window = max(s1.at - s0.at, 1e-9)
    done_all = max(s2.processed - s0.processed, 1.0)
    e2e = _delta(s0, s2, "worker_e2e_latency_seconds")
    ok = _counted(s0, s2, "worker_messages_total", outcome="ok")
    wire = _counted(s0, s2, "worker_bytes_total")
    half = rss[len(rss) // 2 :] or [s1.rss]
    return CaseResult(
        codec=case.codec,
        profile=case.profile.label,
        repeat=case.repeat,
        throughput=(s1.processed - s0.processed) / window,
        cpu_pct=100 * (s1.cpu_s - s0.cpu_s) / window,
        cpu_us_per_msg=1e6 * (s2.cpu_s - s0.cpu_s) / done_all,
        e2e_p50_ms=_scaled(e2e.quantile(0.5), 1e3),
        e2e_p99_ms=_scaled(e2e.quantile(0.99), 1e3),
        e2e_p999_ms=_scaled(e2e.quantile(0.999), 1e3),
        decode_us=_scaled(_delta(s0, s2, "worker_decode_seconds").mean(), 1e6),
        handle_us=_scaled(_delta(s0, s2, "worker_handle_seconds").mean(), 1e6),
        rss_peak_mb=max([*rss, s1.rss]) / 2**20,
        rss_steady_mb=statistics.median(half) / 2**20,
        wire_bytes=wire / ok if ok else None,
        lag_end=s1.lag,
        lag_max=max([*lags, s1.lag]),
        dead_lettered=int(s2.metrics.total("worker_dead_letters_total")),
        processed=int(done_all),
    )


def _delta(s0: Snapshot, s2: Snapshot, name: str) -> Histogram:
    return s2.metrics.histogram(name).minus(s0.metrics.histogram(name))


def _counted(s0: Snapshot, s2: Snapshot, name: str, **labels: str) -> float:
    return s2.metrics.total(name, **labels) - s0.metrics.total(name, **labels)


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor
