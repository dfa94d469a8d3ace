"""Consumer-side faults: D2 clean bounce, D3 kill -9, D5 scale out/in, S1, S4."""

from __future__ import annotations

import random
import time
import uuid
from typing import Final

from abrunner.lab import worker_probe
from tests.faults.harness import WAIT_S, Env, FaultWorker, Outcome, wait_until
from tests.faults.observe import worker_lines
from tests.faults.run import Run

RATE: Final = 1000
"""Messages a second: a steady stream a worker keeps up with on 2 shared cores."""
_MB: Final = 1024 * 1024
STATIC_SESSION_MS: Final = 60_000
"""D3's session timeout: the bound a static member's restart must beat. It must
outlast a worker's start-up, or the session expires before the successor joins
and static membership is not what brings the partitions back: at load 18 on the
2 shared cores a worker took 9 s from its spawn to its first log line, and at
load 36 it took 43 s from a kill to the successor's first message."""


def _lag(worker: FaultWorker) -> int:
    scraped = worker.scrape()
    return 0 if scraped is None else int(scraped.total("worker_consumer_lag_messages"))


def d2_clean_bounce(env: Env) -> Outcome:
    """SIGTERM the worker mid-stream and restart it (x3; x2 in the fast set): 0 dups."""
    bounces = 2 if env.fast else 3
    outcome = Outcome(
        "D2", f"Clean consumer bounce: SIGTERM mid-stream, restart (x{bounces})"
    )
    with Run(env, outcome) as run:
        worker = run.worker()
        run.produce(rate=RATE, count=RATE * 8 * bounces)
        shutdowns = []
        for _ in range(bounces):
            worker.wait_for(2 * RATE, timeout=WAIT_S)
            shutdowns.append(run.stop(worker))
            worker = run.worker()
            run.fault_ends.append(run.mark("restarted"))
        run.wait_drained(90)
        run.finish()
        outcome.figures["shutdown_s_max"] = round(max(shutdowns), 2)
    return outcome


def _kill_and_restart(
    run: Run, worker: FaultWorker, *args: str
) -> tuple[FaultWorker, float]:
    """SIGKILL `worker`, start its successor at once; return it and the seconds
    from the kill to its first finished message."""
    killed = time.monotonic()
    run.kill(worker)
    successor = run.worker(*args, ready=False)

    def resumed() -> bool:
        if not successor.alive():
            raise TimeoutError(f"the restarted worker exited {successor.exit_code()}")
        return successor.processed() > 0

    wait_until(resumed, WAIT_S, every=0.1, what="resume after the kill")
    run.fault_ends.append(run.mark("processing again"))
    return successor, time.monotonic() - killed


def d3_kill_9(env: Env) -> Outcome:
    """SIGKILL the worker at a random point of its stream; restart it at once.

    Static membership (`--group-instance-id`, `--session-timeout-ms 60000`): the
    restarted worker takes the dead one's place and its partitions as soon as it
    joins, without waiting for the session to expire, so each recovery (kill to
    the first message finished again: the successor's start-up plus its join)
    must take less than the session timeout. The full set then kills once more
    and restarts without an instance id: that recovery waits for the dead
    member's session (60 s here; the worker's default 45 s is the bound for a
    dynamic member).
    """
    kills = 2 if env.fast else 3
    outcome = Outcome(
        "D3",
        f"Hard consumer kill (SIGKILL) mid-stream, restart (x{kills}, static "
        f"membership, {STATIC_SESSION_MS // 1000} s session)",
    )
    rng = random.Random(3)
    session = ("--session-timeout-ms", str(STATIC_SESSION_MS))
    static = (*session, "--group-instance-id", f"faults-d3-{uuid.uuid4().hex[:6]}")
    with Run(env, outcome) as run:
        worker = run.worker(*static)
        seconds = 10 + 6 * kills + (0 if env.fast else 15)
        run.produce(rate=RATE, count=RATE * seconds)
        recoveries = []
        for _ in range(kills):
            worker.wait_for(2 * RATE, timeout=WAIT_S)
            time.sleep(rng.uniform(0.1, 2.0))
            worker, took = _kill_and_restart(run, worker, *static)
            recoveries.append(took)
        if not env.fast:
            worker.wait_for(2 * RATE, timeout=WAIT_S)
            worker, took = _kill_and_restart(run, worker, *session)
            outcome.figures["recovery_s_dynamic"] = round(took, 1)
        run.wait_drained(90)
        run.finish()
        outcome.figures.update(
            recovery_s_static=",".join(f"{t:.1f}" for t in recoveries),
        )
        if max(recoveries) >= STATIC_SESSION_MS / 1000:
            outcome.fail(
                f"a static member took {max(recoveries):.1f} s to resume after a "
                f"kill: not under the {STATIC_SESSION_MS // 1000} s session timeout"
            )
    outcome.notes.append(
        "D3 recovery bound without static membership: the dead member's session "
        "timeout (worker default 45 s) plus a restart"
    )
    return outcome


def d5_scale(env: Env) -> Outcome:
    """A second worker joins the group mid-stream, then leaves it (SIGTERM).

    The stream runs until 8 s after the second worker has left (at most 240 s):
    on a loaded machine a worker's start-up alone has taken 26 s, longer than
    a fixed 25 s stream, and the second worker then joined an idle topic.
    """
    outcome = Outcome("D5", "Scale out and in: a second worker joins, then leaves")
    with Run(env, outcome, partitions=4) as run:
        first = run.worker()
        producer = run.produce(rate=RATE, count=RATE * 240)
        first.wait_for(3 * RATE, timeout=WAIT_S)
        second = run.worker()
        run.fault_ends.append(run.mark("second worker joined"))
        second.wait_for(RATE, timeout=WAIT_S)
        time.sleep(3)
        run.stop(second)
        run.fault_ends.append(run.mark("second worker left"))
        producer.end_after(8)
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
        worker.wait_for(8000, timeout=WAIT_S)
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
        base = worker_probe.rss_bytes(pid)
        run.produce(rate=4000, count=4000 * seconds)
        rss, lags = [], []
        end = time.monotonic() + seconds
        while time.monotonic() < end and worker.alive():
            rss.append(worker_probe.rss_bytes(pid))
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
