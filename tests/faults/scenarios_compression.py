"""Compressed bombs (Z1): values that inflate to 30-90 MB from a few KB on the wire.

Kafka batches are compressed by the producer and the broker accepts what it cannot
inflate-check. Per compression codec (gzip, snappy, lz4, zstd) the producer
compresses the whole stream; among good messages it sends eleven values of 30 to
90 MB of zeros, each in a record batch of its own, and (all codecs) sixteen of 30
MB back to back on one partition. The worker must dead-letter each (oversize,
written without its value; or, where librdkafka cannot inflate it, as an
unreadable range: a zstd batch past `receive.message.max.bytes` or between its
buffer-growth steps), move on (missing 0, every partition committed to its end),
keep its peak RSS under the stated bound (`rss_bound_mb`, from its settings:
`service.settings.consumer.memory_bound`), log each consumer error code at most once
every 30 s, and stay ready.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from service.settings.consumer import ConsumerSettings, memory_bound
from tests.faults.harness import WAIT_S, Env, FaultWorker, Outcome
from tests.faults.observe import worker_lines
from tests.faults.producer import Payload, Plan, good_traffic
from tests.faults.run import Run

Scenario = Callable[[Env], Outcome]

MB: Final = 1 << 20
SIZES_MB: Final = (30, 36, 42, 48, 54, 60, 66, 72, 78, 84, 90)
"""The eleven bombs' inflated sizes, as the issue that found this sent them."""
BURST: Final = 16
"""Values of 30 MB back to back on one partition (about 3 KB each as zstd)."""
RATE: Final = 200
SECONDS: Final = 20
FIRST_AT: Final = 400
"""Seq of the first bomb: 2 s of good traffic before it."""
BASE_MB: Final = 80.0
"""What the worker holds besides message data (interpreter, codecs, metrics,
librdkafka's threads and buffers): 59-70 MB idle here (L1's `rss_before_mb`)."""


def _rss_mb(worker: FaultWorker) -> float:
    assert worker.proc is not None
    try:
        text = Path(f"/proc/{worker.proc.pid}/status").read_text()
    except OSError:
        return 0.0
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class RssSampler:
    """A worker's peak RSS, sampled every 50 ms in a thread."""

    def __init__(self, worker: FaultWorker) -> None:
        self._worker = worker
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.peak = 0.0

    def start(self) -> RssSampler:
        self._thread.start()
        return self

    def stop(self) -> float:
        """Stop sampling; the peak in MB."""
        self._stop.set()
        self._thread.join(5)
        return self.peak

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, _rss_mb(self._worker))


def bomb_plan(codec_key: str, partitions: int) -> tuple[Plan, set[int]]:
    """Good traffic with the bombs; and their seqs."""
    good = good_traffic(codec_key)  # type: ignore[arg-type]
    at = {FIRST_AT + i * RATE: size for i, size in enumerate(SIZES_MB)}
    burst_from = FIRST_AT + len(SIZES_MB) * RATE
    for i in range(BURST):  # one partition: every `partitions`-th seq
        at[burst_from + i * partitions] = 30

    def plan(seq: int) -> Payload:
        size = at.get(seq)
        if size is None:
            return good(seq)
        return Payload(
            b"\0" * (size * MB),
            poison=True,
            droppable=True,
            alone=True,
            unreadable_ok=True,
        )

    return plan, set(at)


def z1_bombs(compression: str, *, backlog: bool = False) -> Scenario:
    """Z1 for one compression codec (see the module docstring); with `backlog`,
    everything waits in the topic before the worker starts (a restart's
    backlog: fetches full of bombs)."""

    def scenario(env: Env) -> Outcome:
        kind = "a backlog of " if backlog else ""
        outcome = Outcome(
            f"Z{2 if backlog else 1} {compression}",
            f"Compressed bombs ({compression}): {kind}11 values of 30-90 MB and 16 "
            "of 30 MB on one partition; dead-lettered, RSS bounded",
        )
        return _bombs(env, outcome, compression, backlog)

    scenario.__name__ = f"z{2 if backlog else 1}_{compression}"
    return scenario


def _bombs(env: Env, outcome: Outcome, compression: str, backlog: bool) -> Outcome:
    with Run(env, outcome) as run:
        largest = max(SIZES_MB) * MB
        bound = BASE_MB + memory_bound(ConsumerSettings(), run.partitions, largest) / MB
        plan, bombs = bomb_plan(run.codec, run.partitions)
        run.producer_config = {
            "compression.type": compression,
            "message.max.bytes": 200 * MB,
        }
        count = RATE * SECONDS
        if backlog:
            run.produce(plan, rate=10 * RATE, count=count).wait(300)
        worker = run.worker(ready=False)
        sampler = RssSampler(worker).start()
        start = time.monotonic()
        worker.wait_ready(WAIT_S)
        if not backlog:
            run.produce(plan, rate=RATE, count=count)
        if run.producer is not None and run.producer.running:
            run.producer.wait(600)  # a gzip bomb takes seconds to compress here
        drained = run.wait_drained(60)
        peak = sampler.stop()
        ready = worker.readyz()
        alive = worker.alive()
        run.finish()
        took = time.monotonic() - start
        lines = [
            line
            for log in run.logs()
            for line in worker_lines(log)
            if line.get("event") == "consumer_error"
        ]
        codes: dict[str, int] = {}
        for line in lines:
            codes[line.get("code", "")] = codes.get(line.get("code", ""), 0) + 1
        reasons: dict[str, int] = {}
        for record in run.data.dlq if run.data else ():
            reason = (record.header("x-dlq-reason") or b"").decode()
            reasons[reason] = reasons.get(reason, 0) + 1
        outcome.figures.update(
            bombs=len(bombs),
            rss_peak_mb=round(peak),
            rss_bound_mb=round(bound),
            dlq_letters=",".join(f"{k}={v}" for k, v in sorted(reasons.items())),
            consumer_error_lines=",".join(f"{k}={v}" for k, v in codes.items()),
        )
        if not alive:
            outcome.fail(f"the worker exited ({worker.exit_code()})")
        if drained and (ready is None or ready[0] != 200):
            outcome.fail(f"/readyz after the drain: {ready}")
        if peak > bound:
            outcome.fail(f"RSS peaked at {peak:.0f} MB (bound {bound:.0f} MB)")
        most = math.ceil(took / 30) + 1
        for code, n in codes.items():
            if n > most:
                outcome.fail(f"{n} consumer_error lines of {code} in {took:.0f} s")
    return outcome
