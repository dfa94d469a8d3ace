"""The A/B cases: for each profile, repeat and codec, measure one worker process.

Each case gets a fresh topic (and its DLQ), a fresh consumer group and a worker with
that codec. Rate mode: a warm-up, then the load generator at `plan.rate` for
`plan.duration`, then a drain. Max mode: a backlog written before the worker
starts, drained as fast as one process can (its maximum rate). The figures come from
the worker's own /metrics and the kernel's accounting of its process
(`abrunner.lab.worker_probe`, `abrunner.lab.case_figures`); everything is torn down before the next
case, and every case runs on the same broker in the same session, so the figures
compare. Before the first case, each codec's decode is measured in-process
(`abrunner.lab.inprocess_bench`) unless `plan.bench` is off.

A KeyboardInterrupt (Ctrl-C; `abrunner.cli` turns SIGTERM into one too) stops the
running case: its load generator and worker are killed, its topics deleted, and
the report holds the cases finished, marked `interrupted`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any, Final, NamedTuple

import msgspec
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from abrunner.lab import capacity, inprocess_bench, loss_check, paired, payload_sizing
from abrunner.lab.case_figures import fell_behind, figures, window_rate
from abrunner.lab.processes import LoadgenProcess, WorkerProcess, child_env
from abrunner.lab.waits import first_processed, wait_processed, watch
from abrunner.plan import MEASURED_SEED, WARMUP_SEED, Case, Plan
from abrunner.report.paired import capacity_sentence
from abrunner.report.tables import aggregate, environment
from abrunner.results import CaseResult, InProcess, Report
from abrunner.windowed import Paired
from loadgen.report import Summary
from localkafka import LocalKafka, create_topic, delete_topic, kafka_version
from service.kafka.connection import KafkaConnection

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


class Broker(NamedTuple):
    """The cluster of a run: its address, its client settings, and the `KAFKA_*`
    variables that hand those to the worker and the load generator (secrets go by
    environment, never by argument)."""

    address: str
    conf: dict[str, Any]
    env: dict[str, str]

    @classmethod
    def of(
        cls, bootstrap: str | Broker, kafka: KafkaConnection | None = None
    ) -> Broker:
        """`bootstrap` as a Broker; a bare address with `kafka`'s other settings."""
        if isinstance(bootstrap, Broker):
            return bootstrap
        if kafka is None:
            return cls(bootstrap, {"bootstrap.servers": bootstrap}, {})
        kafka = kafka.model_copy(update={"bootstrap_servers": bootstrap})
        conf = kafka.librdkafka(plaintext_secrets=True)
        return cls(bootstrap, conf, kafka.environment())


def run(
    plan: Plan,
    bootstrap: str | None,
    console: Console,
    kafka: KafkaConnection | None = None,
) -> Report:
    """Run every case of `plan`; start (and stop) the local Kafka with no `bootstrap`.

    `kafka` holds the connection's other settings (TLS, SASL) for a `bootstrap`
    given or recorded; a local Kafka started here is plaintext.

    A case that fails is recorded with its error; the others still run. A
    KeyboardInterrupt ends the run with the cases finished (`Report.interrupted`).
    """
    (plan.out_dir / "logs").mkdir(parents=True, exist_ok=True)
    results: list[CaseResult] = []
    in_process: list[InProcess] = []
    kafka_run, interrupted = "external", False
    fits, windows = None, None
    try:
        if plan.bench:  # before the broker and the cases: nothing else runs then
            in_process = inprocess_bench.shown(plan, console)
        if plan.mode == "paired":
            fits = capacity.check(plan, in_process)
            console.print(capacity_sentence(fits))
        with ExitStack() as stack:
            if not bootstrap:
                console.print("starting the local Kafka ...")
                bootstrap = stack.enter_context(LocalKafka()).bootstrap_servers
                kafka_run, kafka = kafka_version(), None
            if fits is not None and fits.fits:
                windows = Paired(window_s=plan.window_s, bounds=[])
                paired.run_all(
                    Broker.of(bootstrap, kafka), plan, console, results, windows
                )
            else:
                _run_all(Broker.of(bootstrap, kafka), plan, console, results)
    except KeyboardInterrupt:
        interrupted = True
        total = len(plan.cases())
        console.print(f"interrupted: {len(results)} of {total} cases finished")
    if plan.precision is not None:  # the repeats run, not the fewest asked
        ran = max((r.repeat + 1 for r in results), default=plan.repeat)
        plan = msgspec.structs.replace(plan, repeat=max(ran, plan.repeat))
    return Report(
        plan=plan,
        environment=environment(kafka_run),
        results=results,
        summary=aggregate(results, in_process),
        interrupted=interrupted,
        in_process=in_process,
        paired=windows,
        capacity=fits,
    )


def _run_all(
    bootstrap: Broker, plan: Plan, console: Console, results: list[CaseResult]
) -> None:
    """Run the cases, appending each result to `results` as soon as it is known."""
    cases = plan.cases()
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
                error = f"{type(exc).__name__}: {str(exc) or 'no reason given'}"
                console.print(f"{case.name}: FAILED: {error}")
                with _logs(plan, case)[0].open("a") as log:
                    log.write(f"codec-ab: case {case.name} failed: {error}\n")
                result = CaseResult(
                    codec=case.codec,
                    profile=case.profile.label,
                    repeat=case.repeat,
                    error=error,
                    logs=[str(p) for p in _logs(plan, case) if p.exists()],
                )
            results.append(result)
            progress.remove_task(step)
            progress.advance(overall)


def _logs(plan: Plan, case: Case) -> tuple[Path, Path]:
    """The case's worker log (and a failed case's reason) and load generator log."""
    logs = plan.out_dir / "logs"
    return logs / f"{case.tag}.log", logs / f"{case.tag}-loadgen.log"


def run_case(cluster: str | Broker, case: Case, plan: Plan, note: Note) -> CaseResult:
    """Measure one case on a topic of its own, deleted afterwards.

    Raises:
        RunnerError: the worker or the load generator failed.
    """
    bootstrap = Broker.of(cluster)
    topic = f"ab-{uuid.uuid4().hex[:8]}-{case.tag}"
    create_topic(bootstrap.conf, topic, plan.partitions)
    create_topic(bootstrap.conf, f"{topic}.dlq", plan.partitions)
    env = child_env(case.profile.schema, plan.logic) | bootstrap.env
    worker = WorkerProcess(
        bootstrap.address,
        topic,
        *("--codec", case.wire_codec, "--schema", case.profile.schema),
        *("--summary-interval-s", "5", *plan.worker_args, *plan.framing_args(case)),
        group=f"ab-{uuid.uuid4().hex[:10]}",
        log=_logs(plan, case)[0],
        env=env,
    )
    m = _Measurement(bootstrap, topic, case, plan, worker, note, [], env)
    measure_case = _measure_max if plan.max_mode else _measure_rate
    try:
        result = measure_case(m)
        result.worker_exit = worker.stop()
        result.offsets_committed_to_end = loss_check.committed_to_end(
            bootstrap.conf, worker.group, topic, plan.partitions
        )
        result.logs = [str(p) for p in _logs(plan, case) if p.exists()]
    except BaseException:
        # Failed or stopped (Ctrl-C): that is what to report, not a teardown error
        # it may cause (a topic the broker is still deleting, say).
        with suppress(Exception):
            _teardown(m)
        raise
    _teardown(m)
    return result


class _Measurement(NamedTuple):
    """One case in progress: where it runs, its processes, whom it tells."""

    bootstrap: Broker
    topic: str
    case: Case
    plan: Plan
    worker: WorkerProcess
    note: Note
    loadgens: list[LoadgenProcess]
    env: dict[str, str]

    def loadgen(
        self,
        run_id: str,
        *,
        rate: float,
        seed: int,
        duration: float | None = None,
        count: int | None = None,
    ) -> LoadgenProcess:
        """Start a load generator run on the case's topic, closed with the case."""
        proc = LoadgenProcess(
            self.bootstrap.address,
            *(self.topic, self.case.wire_codec, self.case.profile, run_id),
            rate=rate,
            duration=duration,
            count=count,
            seed=seed,
            replay=self.plan.replay,
            args=(*self.plan.loadgen_args, *self.plan.framing_args(self.case)),
            env=self.env,
            log=_logs(self.plan, self.case)[1],
        )
        self.loadgens.append(proc)
        return proc


def _teardown(m: _Measurement) -> None:
    """Kill the case's processes still running, then delete its topics.

    Every step runs even if one before it fails; the last failure is raised.
    """
    with ExitStack() as stack:  # callbacks run last-in first-out
        for name in (m.topic, f"{m.topic}.dlq"):
            stack.callback(delete_topic, m.bootstrap.conf, name)
        stack.callback(m.worker.close)
        for proc in m.loadgens:
            stack.callback(proc.close)


def _measure_rate(m: _Measurement) -> CaseResult:
    plan, worker, note, loadgen = m.plan, m.worker, m.note, m.loadgen
    run_id = uuid.uuid4().hex[:12]
    worker.start().wait_ready(_START_S)
    warm = loadgen(
        f"{run_id}-warm", rate=plan.rate, duration=plan.warmup, seed=WARMUP_SEED
    )
    warm_summary = warm.summary(timeout=plan.warmup + 120)
    note("warm-up sent; waiting for the worker")
    warmed = wait_processed(worker, warm_summary.acked, _START_S)
    note(f"measuring {plan.duration:.0f} s at {plan.rate:,.0f} msg/s")
    load = loadgen(run_id, rate=plan.rate, duration=plan.duration, seed=MEASURED_SEED)
    # The window opens when the first measured message is handled, not when the
    # load generator's process starts (its start-up is not the worker's time).
    s0 = wait_processed(worker, warmed.processed + 1, _START_S)
    rss, lags, points = watch(worker, load.running, _POLL_S)
    s1 = worker.snapshot()
    summary = load.summary(timeout=60)
    total = warm_summary.acked + summary.acked
    note("load done; draining")
    s2 = wait_processed(worker, total, max(60.0, 3 * plan.duration))
    wire = summary.bytes_per_message
    result = figures(m.case, s0, s1, s2, rss, lags, start=warmed, wire_bytes=wire)
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
        result.seq_missing = loss_check.missing_seqs(
            m.bootstrap.conf, m.topic, run_id, summary.acked
        )
    _rejections(m, result, run_id, summary)
    in_window = window_rate(s0, points, summary.window_s)
    if in_window is not None:
        result.throughput = in_window
    result.kept_up = not fell_behind(
        lag_end=result.lag_end,
        throughput=result.throughput,
        produced=summary.achieved_rate,
        rate=plan.rate,
    )
    return result


def _measure_max(m: _Measurement) -> CaseResult:
    plan, worker, note, loadgen = m.plan, m.worker, m.note, m.loadgen
    # The backlog is written before the worker starts, so the worker drains it at
    # the full speed of one process: that drain rate is its maximum sustainable rate.
    count = payload_sizing.backlog(plan, m.case.profile)
    note(f"filling a backlog of {count:,} messages")
    run_id = uuid.uuid4().hex[:12]
    backlog = loadgen(run_id, rate=0, count=count, seed=MEASURED_SEED)
    summary = backlog.summary(timeout=_BACKLOG_S)
    total = summary.acked
    worker.start()
    note("draining the backlog with one worker process")
    s0 = first_processed(worker, _BACKLOG_S)
    rss, lags, _ = watch(
        worker, lambda: worker.snapshot().processed < total, _MAX_POLL_S
    )
    s1 = wait_processed(worker, total, _DRAIN_S)
    wire = summary.bytes_per_message
    result = figures(m.case, s0, s1, s1, rss, lags, wire_bytes=wire)
    result.mode = "max"
    result.max_rate = result.throughput
    result.acked = total
    result.producer_failed = summary.failed
    result.lost = int(total - s1.processed)
    result.kept_up = True
    _rejections(m, result, run_id, summary)
    # Latency from a backlog is the time a message waited in it, not the codec's.
    result.e2e_p50_ms = result.e2e_p99_ms = result.e2e_p999_ms = None
    return result


def _rejections(
    m: _Measurement, result: CaseResult, run_id: str, summary: Summary
) -> None:
    """What the case's codec refused: its dead letters by field and reason, and a
    replay's recorded messages its format could not carry."""
    result.recorded = summary.recorded
    result.replayed_as_recorded = summary.replayed_as_recorded
    result.not_carried = dict(summary.not_carried)
    found = (
        loss_check.dead_letters(m.bootstrap.conf, f"{m.topic}.dlq", run_id)
        if result.dead_lettered
        else {}
    )
    result.rejected_count = sum(found.values())
    result.rejected = dict(found)
