"""Paired runs: every codec of a repeat measured at the same time, on the same traffic.

For one profile and repeat: a fresh topic (and its DLQ) and consumer group per
codec, every worker started and ready, then one load generator
(`loadgen.fanout`) writing the same payloads at the same intended instants to
every topic, each in its codec's wire format: a warm-up, then `plan.duration`
of measured load, then a drain. While the load runs, every worker is sampled
(/metrics and /proc, back to back) every `plan.window_s`: consecutive samples
are a window (`abrunner.windowed.Window`), and the report compares the codecs
window by window (`abrunner.report.paired`), so a stall of the shared machine
hits every side of a window alike and cancels in its ratios. Each codec still
gets its `CaseResult` for the repeat, measured as a sequential case is
(`abrunner.lab.case_figures`), so the tables read the same in both modes.

Whether the machine can carry every worker at the rate is decided before
(`abrunner.lab.capacity`); the runner falls back to sequential cases when not.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Final, NamedTuple, Protocol

import msgspec
from rich.console import Console

from abrunner.lab import loss_check
from abrunner.lab.case_figures import fell_behind, figures, window_rate
from abrunner.lab.precision import Progress
from abrunner.lab.processes import LoadgenProcess, WorkerProcess, child_env
from abrunner.lab.waits import wait_processed
from abrunner.lab.worker_probe import Snapshot
from abrunner.plan import MEASURED_SEED, WARMUP_SEED, Case, Plan, Profile
from abrunner.results import CaseResult
from abrunner.windowed import Paired, Window
from localkafka import create_topic, delete_topic
from schemas.errors import RunnerError


class Broker(Protocol):
    """The cluster of a run (`abrunner.lab.runner.Broker`): its address, client
    settings and the `KAFKA_*` variables for the children."""

    @property
    def address(self) -> str: ...
    @property
    def conf(self) -> dict[str, Any]: ...
    @property
    def env(self) -> dict[str, str]: ...


_START_S: Final = 60.0
"""A worker joins its group and gets partitions in a few seconds; 60 s is a failure."""
E2E: Final = "worker_e2e_latency_seconds"

Note = Callable[[str], None]


class FanoutProcess(LoadgenProcess):
    """`python -m loadgen.fanout`: one load generator writing every codec's topic."""

    MODULE = "loadgen.fanout"

    def wire_bytes(self) -> dict[str, float]:
        """Each topic's bytes per message, from the line before the summary."""
        if len(self.lines) < 2:
            return {}
        found = msgspec.json.decode(self.lines[-2], type=dict[str, dict[str, float]])
        return found.get("wire_bytes", {})


class _Side(NamedTuple):
    """One codec of a paired repeat: its case, topic and worker."""

    case: Case
    topic: str
    worker: WorkerProcess


def _log(plan: Plan, case: Case, loadgen: bool = False) -> Path:
    """The case's worker log, or the repeat's load generator log (`-loadgen`)."""
    return plan.out_dir / "logs" / f"{case.tag}{'-loadgen' if loadgen else ''}.log"


def run_all(
    bootstrap: Broker,
    plan: Plan,
    console: Console,
    results: list[CaseResult],
    found: Paired,
) -> None:
    """Run every profile's repeats paired; append each codec's result as it comes,
    and each repeat's windows to `found`.

    With `plan.precision`, a profile adds repeats past `plan.repeat` while a CPU
    ratio's interval is wider than asked (`abrunner.lab.precision`), and its
    stop is recorded in `found.stops`. A repeat that fails is recorded as a
    failed case for every codec; the others still run (under `--precision`, two
    failed in a row end the profile: more of the same would fail too).
    """
    for profile in plan.profiles:
        progress = None if plan.precision is None else Progress(plan, profile.label)
        repeat = 0
        while repeat < plan.repeat or progress is not None:
            name = f"{profile.label} / run {repeat + 1} (paired)"

            def note(text: str, name: str = name) -> None:
                console.print(f"{name}: {text}")

            failed = _one_repeat(bootstrap, plan, profile, repeat, note, found, results)
            repeat += 1
            if progress is None:
                continue
            why = progress.done(found, failed)
            note(progress.note(plan.precision or 0.0))
            if why is not None:
                found.stops.append(progress.stop(found, why))
                note(f"stopped adding repeats: {why}")
                break


def _one_repeat(
    bootstrap: Broker,
    plan: Plan,
    profile: Profile,
    repeat: int,
    note: Note,
    found: Paired,
    results: list[CaseResult],
) -> bool:
    """One repeat, its results appended; True if it failed (recorded as failed
    cases for every codec, with the reason in each case's log)."""
    try:
        results += run_repeat(bootstrap, plan, profile, repeat, note, found)
    except Exception as exc:  # one failed repeat must not lose the others
        error = f"{type(exc).__name__}: {str(exc) or 'no reason given'}"
        note(f"FAILED: {error}")
        for codec in plan.codecs:
            case = Case(codec, profile, repeat)
            with _log(plan, case).open("a") as log:
                log.write(f"codec-ab: paired repeat failed: {error}\n")
            results.append(
                CaseResult(
                    codec=codec,
                    profile=profile.label,
                    repeat=repeat,
                    error=error,
                    logs=[str(_log(plan, case))],
                )
            )
        return True
    return False


def run_repeat(
    bootstrap: Broker,
    plan: Plan,
    profile: Profile,
    repeat: int,
    note: Note,
    paired: Paired,
) -> list[CaseResult]:
    """Measure every codec of one repeat at once; add its windows to `paired`.

    Raises:
        RunnerError: a worker or the load generator failed.
    """
    run_id = uuid.uuid4().hex[:12]
    env = child_env(profile.schema) | bootstrap.env
    with ExitStack() as stack:  # torn down last-in first-out, whatever happens
        sides = []
        for codec in plan.codecs:
            case = Case(codec, profile, repeat)
            topic = f"ab-{uuid.uuid4().hex[:8]}-{case.tag}"
            for name in (topic, f"{topic}.dlq"):
                create_topic(bootstrap.conf, name, plan.partitions)
                stack.callback(delete_topic, bootstrap.conf, name)
            worker = WorkerProcess(
                bootstrap.address,
                topic,
                *("--codec", codec, "--schema", profile.schema),
                *("--summary-interval-s", "5", *plan.worker_args),
                group=f"ab-{uuid.uuid4().hex[:10]}",
                log=_log(plan, case),
                env=env,
            )
            stack.callback(worker.close)
            sides.append(_Side(case, topic, worker))
        for side in sides:
            side.worker.start()
        for side in sides:
            side.worker.wait_ready(_START_S)

        def load(suffix: str, seconds: float, seed: int) -> FanoutProcess:
            first = sides[0]
            proc = FanoutProcess(
                bootstrap.address,
                *(first.topic, first.case.codec, profile, run_id + suffix),
                rate=plan.rate,
                duration=seconds,
                seed=seed,
                args=[
                    *plan.loadgen_args,
                    *(
                        a
                        for s in sides[1:]
                        for a in ("--also", f"{s.topic}={s.case.codec}")
                    ),
                ],
                env=env,
                log=_log(plan, first.case, loadgen=True),
            )
            stack.callback(proc.close)
            return proc

        warm = load("-warm", plan.warmup, WARMUP_SEED).summary(plan.warmup + 120)
        note(f"warm-up sent to {len(sides)} topics; waiting for the workers")
        warmed = [wait_processed(s.worker, warm.acked, _START_S) for s in sides]
        note(f"measuring {plan.duration:.0f} s at {plan.rate:,.0f} msg/s, paired")
        measured = load("", plan.duration, MEASURED_SEED)
        s0 = [
            wait_processed(s.worker, w.processed + 1, _START_S)
            for s, w in zip(sides, warmed, strict=True)
        ]
        edges = _sample(sides, measured.running, plan.window_s)
        s1 = [s.worker.snapshot() for s in sides]
        summary = measured.summary(timeout=60)
        wire = measured.wire_bytes()
        total = warm.acked + summary.acked
        note("load done; draining")
        s2 = [
            wait_processed(s.worker, total, max(60.0, 3 * plan.duration)) for s in sides
        ]
        _add_windows(paired, sides, edges)
        results = []
        for i, side in enumerate(sides):
            result = figures(
                side.case,
                s0[i],
                s1[i],
                s2[i],
                [e[i].rss for e in edges],
                [e[i].lag for e in edges],
                start=warmed[i],
                wire_bytes=wire.get(side.topic, summary.bytes_per_message),
            )
            result.mode = "rate"
            result.target_rate = plan.rate
            result.producer_rate = summary.achieved_rate
            result.sent, result.acked = summary.sent, summary.acked
            result.producer_failed = summary.failed
            backlog = int(total - s2[i].processed)
            result.lost = 0 if backlog <= 0 else None
            result.not_drained = max(backlog, 0)
            conf = bootstrap.conf
            if plan.verify:
                result.seq_missing = loss_check.missing_seqs(
                    conf, side.topic, run_id, summary.acked
                )
            found = (
                loss_check.dead_letters(conf, f"{side.topic}.dlq", run_id)
                if result.dead_lettered
                else {}
            )
            result.rejected_count, result.rejected = sum(found.values()), dict(found)
            points = [(e[i].at, e[i].processed) for e in edges]
            in_window = window_rate(s0[i], points, summary.window_s)
            if in_window is not None:
                result.throughput = in_window
            result.kept_up = not fell_behind(
                lag_end=result.lag_end,
                throughput=result.throughput,
                produced=summary.achieved_rate,
                rate=plan.rate,
            )
            result.worker_exit = side.worker.stop()
            result.offsets_committed_to_end = loss_check.committed_to_end(
                conf, side.worker.group, side.topic, plan.partitions
            )
            result.logs = [
                str(p)
                for p in (_log(plan, side.case), _log(plan, sides[0].case, True))
                if p.exists()
            ]
            results.append(result)
    return results


def _sample(
    sides: list[_Side], running: Callable[[], bool], every: float
) -> list[list[Snapshot]]:
    """Every worker's snapshot at each window edge while `running()`.

    The edges keep to a grid of `every` seconds from the first, so a slow
    sample does not stretch the windows after it.

    Raises:
        RunnerError: a worker exited.
    """
    edges = [[s.worker.snapshot() for s in sides]]
    start = time.monotonic()
    k = 1
    while running():
        wait = start + k * every - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        edges.append([s.worker.snapshot() for s in sides])
        k += 1
    if len(edges) < 2:
        raise RunnerError("the load ended before a whole window was sampled")
    return edges


def _add_windows(
    paired: Paired, sides: list[_Side], edges: list[list[Snapshot]]
) -> None:
    """The windows between consecutive edges, one per codec, into `paired`."""
    for i, side in enumerate(sides):
        for k, (a, b) in enumerate(itertools.pairwise(edges)):
            e2e = b[i].metrics.histogram(E2E).minus(a[i].metrics.histogram(E2E))
            bounds = sorted(le for le in e2e.buckets if le != float("inf"))
            if not paired.bounds:
                paired.bounds = bounds
            cumulative = [e2e.buckets[le] for le in paired.bounds]
            cumulative.append(e2e.buckets.get(float("inf"), e2e.count))
            counts = [
                max(c - p, 0.0)
                for p, c in zip([0.0, *cumulative], cumulative, strict=False)
            ]
            paired.windows.append(
                Window(
                    codec=side.case.codec,
                    profile=side.case.profile.label,
                    repeat=side.case.repeat,
                    index=k,
                    seconds=b[i].at - a[i].at,
                    messages=b[i].processed - a[i].processed,
                    cpu_s=b[i].cpu_s - a[i].cpu_s,
                    lag=b[i].lag,
                    e2e=counts,
                )
            )
