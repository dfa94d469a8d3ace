"""Consumer-side faults: D2 clean bounce, D3 kill -9, D5 scale out/in, S1, S4."""

from __future__ import annotations

import random
import time
from typing import Final

from abrunner import measure
from tests.faults.harness import Env, FaultWorker, Outcome
from tests.faults.observe import worker_lines
from tests.faults.run import Run

RATE: Final = 1000
"""Messages a second: a steady stream a worker keeps up with on 2 shared cores."""
_MB: Final = 1024 * 1024


def _lag(worker: FaultWorker) -> int:
    scraped = worker.scrape()
    return 0 if scraped is None else int(scraped.total("worker_consumer_lag_messages"))


def d2_clean_bounce(env: Env) -> Outcome:
    """SIGTERM the worker mid-stream three times, restarting it each time: 0 duplicates."""
    outcome = Outcome("D2", "Clean consumer bounce: SIGTERM mid-stream, restart (x3)")
    bounces = 3
    with Run(env, outcome) as run:
        worker = run.worker()
        run.produce(rate=RATE, count=RATE * 8 * bounces)
        shutdowns = []
        for _ in range(bounces):
            worker.wait_for(2 * RATE, timeout=60)
            shutdowns.append(run.stop(worker))
            worker = run.worker()
            run.fault_ends.append(run.mark("restarted"))
        run.wait_drained(90)
        run.finish()
        outcome.figures["shutdown_s_max"] = round(max(shutdowns), 2)
    return outcome


def d3_kill_9(env: Env) -> Outcome:
    """SIGKILL the worker at a random point of its stream three times; restart it."""
    outcome = Outcome("D3", "Hard consumer kill (SIGKILL) mid-stream, restart (x3)")
    rng = random.Random(3)
    with Run(env, outcome) as run:
        worker = run.worker()
        # Each kill costs a session timeout (10 s) before the restart gets partitions.
        run.produce(rate=RATE, count=RATE * 48)
        for _ in range(3):
            worker.wait_for(2 * RATE, timeout=60)
            time.sleep(rng.uniform(0.1, 2.0))
            run.kill(worker)
            worker = run.worker()
            run.fault_ends.append(run.mark("restarted"))
        run.wait_drained(90)
        run.finish()
    return outcome


def d5_scale(env: Env) -> Outcome:
    """A second worker joins the group mid-stream, then leaves it (SIGTERM)."""
    outcome = Outcome("D5", "Scale out and in: a second worker joins, then leaves")
    with Run(env, outcome, partitions=4) as run:
        first = run.worker()
        run.produce(rate=RATE, count=RATE * 25)
        first.wait_for(3 * RATE, timeout=60)
        second = run.worker()
        run.fault_ends.append(run.mark("second worker joined"))
        second.wait_for(RATE, timeout=60)
        time.sleep(3)
        run.stop(second)
        run.fault_ends.append(run.mark("second worker left"))
        run.wait_drained(90)
        run.finish()
        rebalances = sum(
            1
            for w in run.workers
            for line in worker_lines(w.log_path)
            if line.get("event") == "partitions_assigned"
        )
        outcome.figures["assignments"] = rebalances
    return outcome


def s1_sigterm_under_load(env: Env) -> Outcome:
    """SIGTERM a worker that has thousands of messages fetched and not handled."""
    outcome = Outcome("S1", "Graceful shutdown under load: SIGTERM with a backlog")
    # 400 us of work a message caps the worker near 2,000 msg/s: at 3,000 msg/s a
    # backlog builds in its fetch queue, the in-flight work SIGTERM must not lose.
    with Run(env, outcome, worker_args=("--work-us", "400")) as run:
        worker = run.worker()
        run.produce(rate=3000, count=3000 * 12)
        worker.wait_for(8000, timeout=60)
        backlog = _lag(worker)
        took = run.stop(worker)
        outcome.figures.update(shutdown_s=round(took, 2), lag_at_sigterm=backlog)
        if took > 30:
            outcome.fail(f"SIGTERM took {took:.1f} s, over a 30 s grace period")
        run.worker()
        run.fault_ends.append(run.mark("restarted"))
        run.wait_drained(120)
        run.finish()
    return outcome


def s4_overload(env: Env) -> Outcome:
    """Twice the worker's capacity for a minute (20 s in the fast set): RSS bounded.

    The worker does 500 us of work a message (~1,900 msg/s) with a 16 MiB fetch
    queue (`queued_max_messages_kbytes`); the producer sends 4,000 msg/s, so the
    backlog outgrows the queue several times over and must stay in the broker.
    Then a worker without the extra work drains it (a clean bounce, 0 duplicates).
    """
    outcome = Outcome("S4", "2x overload (60 s; fast set 20 s): RSS bounded")
    seconds = 20 if env.fast else 60
    queue_kb = 16 * 1024
    config = {"worker.consumer": {"queued_max_messages_kbytes": queue_kb}}
    with Run(env, outcome, config=config) as run:
        worker = run.worker("--work-us", "500")
        assert worker.proc is not None
        pid = worker.proc.pid
        time.sleep(2)
        base = measure.rss_bytes(pid)
        run.produce(rate=4000, count=4000 * seconds)
        rss, lags = [], []
        end = time.monotonic() + seconds
        while time.monotonic() < end and worker.alive():
            rss.append(measure.rss_bytes(pid))
            lags.append(_lag(worker))
            time.sleep(0.5)
        run.stop(worker)
        run.worker()
        run.fault_ends.append(run.mark("drain worker started"))
        run.wait_drained(120)
        run.finish()
        _judge_memory(outcome, base, rss, bound=queue_kb * 1024 + 64 * _MB)
        outcome.figures["lag_peak"] = max(lags, default=0)
        lost = [
            line
            for w in run.workers
            for line in worker_lines(w.log_path)
            if line.get("event") == "partitions_lost"
        ]
        if lost:
            outcome.fail(
                f"partitions lost under overload (max.poll expiry?): {lost[0]}"
            )
    return outcome


def _judge_memory(outcome: Outcome, base: int, rss: list[int], *, bound: int) -> None:
    """RSS growth within the fetch queue plus 64 MiB; no growth in the second half."""
    if not rss:
        outcome.fail("no RSS sample: the worker died at once")
        return
    half = len(rss) // 2
    growth = max(rss) - base
    late = max(rss[half:]) - max(rss[: max(1, half)])
    outcome.figures.update(
        rss_base_mb=round(base / _MB),
        rss_peak_mb=round(max(rss) / _MB),
        rss_bound_mb=round((base + bound) / _MB),
        rss_second_half_growth_mb=round(late / _MB, 1),
    )
    if growth > bound:
        outcome.fail(f"RSS grew {growth / _MB:.0f} MiB, over {bound / _MB:.0f} MiB")
    if late > 32 * _MB:
        outcome.fail(f"RSS still grew {late / _MB:.0f} MiB in the second half")
