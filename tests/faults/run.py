"""One run of a scenario: topics, workers, verifying producer, the checker's verdict."""

from __future__ import annotations

import contextlib
import re
import signal
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Self

from confluent_kafka import KafkaException

from codec import CodecName, get_codec
from tests.faults.checker import RunData, check
from tests.faults.harness import (
    BATCH_SIZE,
    COMMIT_INTERVAL_S,
    SESSION_TIMEOUT_MS,
    WAIT_S,
    Env,
    FaultWorker,
    Outcome,
    drop_topics,
    new_topics,
    wait_until,
    write_config,
)
from tests.faults.observe import (
    Monitor,
    end_offsets,
    now_ms,
    read_spool,
    read_to_end,
    tracebacks,
    worker_events,
)
from tests.faults.producer import Plan, VerifyingProducer, good_traffic

DRAIN_CAP: Final = 5
"""`Run.wait_drained` waits at most this many times its stall timeout in all."""


class Run:
    """A scenario's topics and processes; a context manager that cleans up.

    Args:
        env: where the suite runs.
        outcome: the scenario's result, filled in as the run goes.
        bootstrap: the broker (default: the shared one).
        partitions: input and DLQ partitions.
        codec: the worker's codec; the producer writes its wire format.
        config: extra worker TOML sections, e.g. `{"worker.processing": {...}}`.
        dlq_config: the DLQ topic's configuration.
        worker_args: arguments every worker of the run gets.
        module: what the workers run as `python -m` (a test's own wrapper of the
            worker, `tests.faults.slow_logic`).
    """

    def __init__(
        self,
        env: Env,
        outcome: Outcome,
        *,
        bootstrap: str | None = None,
        partitions: int = 2,
        codec: CodecName = "msgspec-msgpack",
        config: Mapping[str, Mapping[str, Any]] | None = None,
        dlq_config: Mapping[str, str] | None = None,
        worker_args: Sequence[str] = (),
        module: str = "service",
    ) -> None:
        self.env, self.outcome = env, outcome
        self.module = module
        self.bootstrap = bootstrap or env.bootstrap
        self.partitions, self.codec = partitions, codec
        slug = re.sub(r"[^a-z0-9]+", "-", outcome.id.lower()).strip("-")
        self.dir = env.root / f"{slug}-{uuid.uuid4().hex[:6]}"
        self.dir.mkdir(parents=True)
        self.topic, self.output, self.dlq = new_topics(
            self.bootstrap, partitions, dlq_config=dlq_config
        )
        self.group = f"faults-{uuid.uuid4().hex[:8]}"
        sections: dict[str, dict[str, Any]] = {
            "worker.consumer": {"session_timeout_ms": SESSION_TIMEOUT_MS},
            "worker.processing": {"dlq_spool_dir": str(self.dir)},  # `finish` reads it
        }
        for name, values in (config or {}).items():
            sections.setdefault(name, {}).update(values)
        config_file = write_config(self.dir / "worker.toml", sections)
        self.args = [
            *("--codec", codec, "--schema", "medium", "--config", str(config_file)),
            *("--output-topic", self.output, "--dlq-topic", self.dlq, *worker_args),
        ]
        self.workers: list[FaultWorker] = []
        self.producer: VerifyingProducer | None = None
        self.producer_config: dict[str, Any] | None = None  # compression.type...
        self.commit_interval_s = (
            COMMIT_INTERVAL_S  # the workers' (--commit-interval-ms)
        )
        self.dup_bound = 0
        self.rewind_bound = 0
        """X's share for rewound batches (kept apart: the monitor thread adds it)."""
        self.fault_ends: list[int] = []
        self.timeline: list[tuple[int, str]] = []
        self.data: RunData | None = None
        """What `finish` read back (for a scenario's own checks)."""
        self.monitor = Monitor(
            self.bootstrap, self.group, self.topic, partitions, on_tick=self._tick
        ).start()
        self._started = time.monotonic()

    # -- processes -------------------------------------------------------------------

    def mark(self, what: str) -> int:
        """Note an instant of the run (kept for the report); return it in ms."""
        at = now_ms()
        self.timeline.append((at, what))
        return at

    def worker(
        self,
        *extra: str,
        env: Mapping[str, str] | None = None,
        prefix: Sequence[str] = (),
        host: str | None = None,
        bootstrap: str | None = None,
        ready: bool = True,
    ) -> FaultWorker:
        """Start a worker incarnation of the run's group (and wait for partitions)."""
        n = len(self.workers) + 1
        worker = FaultWorker(
            bootstrap or self.bootstrap,
            self.topic,
            *self.args,
            *extra,
            group=self.group,
            log=self.dir / f"worker-{n}.log",
            env=env,
            prefix=prefix,
            host=host,
        )
        worker.cmd[worker.cmd.index("service")] = self.module
        if not any(w.alive() for w in self.workers):
            with contextlib.suppress(KafkaException):  # a DLQ deleted on purpose
                worker.written_from = self.written()
        self.workers.append(worker.start())
        self.mark(f"worker {n} started")
        if ready:
            worker.wait_ready(WAIT_S)
        return worker

    def stop(self, worker: FaultWorker, sig: int = signal.SIGTERM) -> float:
        """Stop a worker with `sig`; return how long it took to exit.

        A SIGTERM must end in exit status 0 within 60 s (the grace period of
        RELIABILITY I6); anything else fails the scenario.
        """
        n = self.workers.index(worker) + 1
        was_alive = worker.alive()
        if not was_alive:
            self.outcome.fail(f"worker {n} had exited with {worker.exit_code()}")
        start = time.monotonic()
        self.mark(f"worker {n} {signal.Signals(sig).name}")
        code = worker.stop(sig, timeout=60)
        took = time.monotonic() - start
        if sig == signal.SIGTERM and code != 0 and was_alive:
            self.outcome.fail(f"worker {n} exited {code} after SIGTERM")
        return took

    def kill(self, worker: FaultWorker) -> None:
        """SIGKILL a worker; widen the duplicate bound by what it may redo.

        X = messages finished in the last auto-commit interval plus a second of
        batch time (measured, so a catch-up after a restart counts at its pace),
        plus one batch in flight.

        What it finished at the kill: its /metrics just before, or, when it ran
        alone since it started, what it wrote to the output and the DLQ until the
        kill if more. A catch-up finishes thousands of messages a second, and on a
        loaded machine the scrape's answer can be a few hundred milliseconds old
        when the signal lands (at load 20, D3's kills found up to 1,000 records
        written beyond the scrape: `kill_unscraped_max`).
        """
        finished = worker.processed()
        alone = not any(w.alive() for w in self.workers if w is not worker)
        now = time.monotonic()
        self.stop(worker, signal.SIGKILL)
        if alone and worker.written_from is not None:
            written = self.written() - worker.written_from  # it ran alone: its own
            gap = max(
                self.outcome.figures.get("kill_unscraped_max", 0), written - finished
            )
            self.outcome.figures["kill_unscraped_max"] = gap
            finished = max(finished, written)
        worker.samples.append((now, finished))
        self.dup_bound += self.redo(worker, now - self.commit_interval_s - 1, now)

    def written(self) -> int:
        """Records in the output and the DLQ now (each partition's high watermark)."""
        ends = end_offsets(self.bootstrap, self.output, 1)
        ends_dlq = end_offsets(self.bootstrap, self.dlq, self.partitions)
        return sum(ends.values()) + sum(ends_dlq.values())

    def redo(self, worker: FaultWorker, start: float, end: float) -> int:
        """The most a worker may handle again after losing [start, end] of commits."""
        return worker.processed_between(start, end) + BATCH_SIZE

    def redo_faults(self, worker: FaultWorker, starts: Sequence[float]) -> int:
        """The most a worker that stays up may redo because of faults at `starts`.

        Only a rebalance rewinds it, to the last commit that got through (at most
        one auto-commit interval before a fault): per fault, X counts what it
        finished from then until its first assignment after the fault began
        (overlapping windows once), plus a batch; a fault never followed by an
        assignment adds nothing, since nothing rewinds.
        """
        mono_minus_wall_ms = time.monotonic() * 1000 - now_ms()
        assigned = sorted(
            (e.at_ms + mono_minus_wall_ms) / 1000
            for e in worker_events(worker.log_path)
            if e.kind == "assigned"
        )
        windows = []
        for start in sorted(starts):
            rewind = next((t for t in assigned if t >= start), None)
            if rewind is not None:
                windows.append([start - COMMIT_INTERVAL_S - 1, rewind])
        merged: list[list[float]] = []
        for window in windows:
            if merged and window[0] <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], window[1])
            else:
                merged.append(window)
        return sum(self.redo(worker, a, b) for a, b in merged)

    def _tick(self) -> None:
        """Every monitor period: each live worker's progress and failed writes.

        Each failed attempt widens X by a batch: the worker rewinds the batch and
        writes again what of it had landed.
        """
        now, at = time.monotonic(), now_ms()
        for worker in list(self.workers):
            if not worker.alive():
                continue
            try:
                scraped = worker.scrape()
                if scraped is None:
                    continue
                processed = int(scraped.total("worker_messages_total"))
                worker.samples.append((now, processed))
                self.rewind_bound += BATCH_SIZE * worker.rewinds.observe(scraped, at)
            except Exception as exc:  # a half-written scrape of a dying worker
                self.outcome.notes.append(f"metrics sample failed: {exc!r}")

    # -- traffic ---------------------------------------------------------------------

    def produce(
        self, plan: Plan | None = None, *, rate: float, count: int
    ) -> VerifyingProducer:
        """Start the verifying producer (good traffic unless a plan is given)."""
        codec = get_codec(self.codec, "medium")
        self.producer = VerifyingProducer(
            self.bootstrap,
            self.topic,
            self.partitions,
            plan or good_traffic(self.codec),
            content_type=codec.content_type,
            rate=rate,
            count=count,
            log=self.dir / "producer.log",
            config=self.producer_config,
        ).start()
        return self.producer

    def wait_drained(self, timeout: float) -> bool:
        """Wait until the group has committed every input partition's end.

        `timeout` bounds a stall, not the drain: the wait goes on while the
        group's committed offsets advance (a loaded machine drains slowly but
        surely), and ends when they have not moved for `timeout` s, or after
        `DRAIN_CAP` times `timeout` in all.
        """
        if self.producer is not None:
            try:
                self.producer.wait(timeout)
            except TimeoutError as exc:  # judged on what was acknowledged
                self.outcome.fail(str(exc))
        ends = end_offsets(self.bootstrap, self.topic, self.partitions)

        start = time.monotonic()
        progress = (start, sum(self.monitor.latest().values()))

        def drained_or_stuck() -> bool:
            nonlocal progress
            now, committed = time.monotonic(), sum(self.monitor.latest().values())
            if committed > progress[1]:
                progress = (now, committed)
            # A run whose every worker has exited cannot drain: no use waiting.
            alive = any(w.alive() for w in self.workers)
            stuck = now - progress[0] > timeout or now - start > DRAIN_CAP * timeout
            return self.committed_to(ends) or not alive or stuck

        with contextlib.suppress(TimeoutError):  # judged below
            wait_until(drained_or_stuck, DRAIN_CAP * timeout + 1, what="drain")
        took = time.monotonic() - start
        if not self.committed_to(ends):
            alive = any(w.alive() for w in self.workers)
            why = (
                "every worker exited"
                if not alive
                else f"no commit progress for {timeout:.0f} s"
                if time.monotonic() - progress[0] > timeout
                else f"{took:.0f} s"
            )
            self.outcome.fail(
                f"not drained ({why}): committed {self.monitor.latest()} of {ends}"
            )
            return False
        self.outcome.figures.setdefault("drain_s", round(took, 1))
        return True

    def committed_to(self, ends: Mapping[int, int]) -> bool:
        """Whether the last sample has every non-empty partition committed to `ends`."""
        latest = self.monitor.latest()
        return all(latest.get(p, -1) >= end for p, end in ends.items() if end > 0)

    # -- the verdict -----------------------------------------------------------------

    def finish(self, *, final_commit: bool = True) -> Outcome:
        """Stop what runs (SIGTERM), read everything back, run the checker."""
        if self.producer is not None and self.producer.running:
            try:
                self.producer.wait(60)
            except TimeoutError as exc:
                self.outcome.fail(str(exc))
        for worker in self.workers:
            if worker.alive():
                self.stop(worker)
        self.monitor.sample()
        self.monitor.stop()
        for worker in self.workers:
            worker.rewinds.close(now_ms())
        producer = self.producer
        assert producer is not None, "a run without traffic has nothing to check"
        data = RunData(
            acked=producer.acked,
            output=read_to_end(self.bootstrap, self.output),
            dlq=read_to_end(self.bootstrap, self.dlq, values=True)
            + read_spool(self.dir / "codec-worker"),
            not_acked=producer.unacked,
            poison=producer.poison,
            events=[
                *(e for w in self.workers for e in worker_events(w.log_path)),
                *(e for w in self.workers for e in w.rewinds.events()),
            ],
            commits=self.monitor.commits,
            end_offsets=end_offsets(self.bootstrap, self.topic, self.partitions)
            if final_commit
            else None,
            dup_bound=self.dup_bound + self.rewind_bound,
            fault_ends_ms=self.fault_ends,
            value_digest=True,
        )
        self.data = data
        self.outcome.absorb(check(data))
        self.outcome.figures["workers"] = len(self.workers)
        failures = sum(w.rewinds.failures for w in self.workers)
        if failures:
            windows = [b - a for w in self.workers for a, b in w.rewinds.windows]
            self.outcome.figures.update(
                delivery_failures=failures,
                degraded_s=round(sum(windows) / 1000, 1),
            )
        for n, worker in enumerate(self.workers, 1):
            for trace in tracebacks(worker.log_path):
                self.outcome.fail(f"worker {n} printed a traceback: {trace[:600]}")
        return self.outcome

    def logs(self) -> list[Path]:
        """Every worker incarnation's log."""
        return [w.log_path for w in self.workers]

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        lines = [f"{at} {what}" for at, what in self.timeline]
        (self.dir / "timeline.txt").write_text("\n".join(lines) + "\n")
        if self.producer is not None:
            self.producer.close()
        for worker in self.workers:
            worker.close()
        self.monitor.stop()
        drop_topics(self.bootstrap, self.topic, self.output, self.dlq)
        self.outcome.seconds = round(time.monotonic() - self._started, 1)
