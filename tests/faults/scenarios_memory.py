"""Memory under large messages: L1, a burst of 1 MB messages, RSS after the drain."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Final

from codec import CodecName, get_codec
from loadgen.payloads import make_payloads
from tests.faults.harness import Env, FaultWorker, Outcome
from tests.faults.producer import Payload, Plan
from tests.faults.run import Run

LARGE_BYTES: Final = 1_000_000
RSS_AFTER_BOUND_MB: Final = 48.0
"""How much more RSS than before the burst the worker may keep once it has drained
and idled (the prefetch queue is empty by then): heap kept by the allocator."""
RSS_PEAK_BOUND_MB: Final = 400.0
"""The highest RSS allowed during the burst (the batch, the prefetch queue and a
fetch response, each bounded by bytes)."""


def _rss_mb(worker: FaultWorker) -> float:
    assert worker.proc is not None
    for line in Path(f"/proc/{worker.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def large_traffic(codec: CodecName, size: int = LARGE_BYTES) -> Plan:
    """Valid messages of about `size` bytes each (the `large` profile)."""
    c = get_codec(codec, "large")
    pool = [
        c.encode(c.from_builtins(p))
        for p in make_payloads("large", 4, large_bytes=size)
    ]
    return lambda seq: Payload(pool[seq % len(pool)])


def l1_large_messages(env: Env) -> Outcome:
    """A burst of 1 MB messages faster than the worker handles them: RSS bounded,
    back down after the drain, nothing lost.

    The producer sends ~1 MB messages for a while at a rate the worker cannot keep
    (it falls behind); the worker's RSS is sampled throughout and again after the
    backlog is drained and it has idled. Memory is bounded by bytes, not messages
    (the batch, the prefetch queue, the fetch size), and released afterwards.
    """
    outcome = Outcome("L1", "1 MB messages, burst past the worker's rate; RSS after")
    count = 300 if env.fast else 1200
    with Run(
        env, outcome, codec="msgspec-msgpack", worker_args=["--schema", "large"]
    ) as run:
        worker = run.worker()
        time.sleep(2)
        before = _rss_mb(worker)
        producer = run.produce(large_traffic(run.codec), rate=80, count=count)
        peak = before
        while producer.running:
            peak = max(peak, _rss_mb(worker))
            time.sleep(0.25)
        run.wait_drained(240)
        peak = max(peak, _rss_mb(worker))
        time.sleep(20 if env.fast else 60)
        after = _rss_mb(worker)
        run.finish()
        outcome.figures.update(
            rss_before_mb=round(before),
            rss_peak_mb=round(peak),
            rss_after_mb=round(after),
        )
        if peak > RSS_PEAK_BOUND_MB:
            outcome.fail(f"RSS peaked at {peak:.0f} MB (bound {RSS_PEAK_BOUND_MB:.0f})")
        if after - before > RSS_AFTER_BOUND_MB:
            outcome.fail(
                f"RSS {before:.0f} -> {after:.0f} MB after the drain (bound: "
                f"+{RSS_AFTER_BOUND_MB:.0f} MB): memory is not released"
            )
    return outcome
