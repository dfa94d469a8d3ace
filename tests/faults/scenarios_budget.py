"""One message must never stop the worker (issue 30): B1 bounded decode work, B2 the
per-message budget with `/healthz` and SIGTERM during a slow message, B3 the hard
backstop for a call stuck in C.

The exact-decoding cases (Avro longs past 10 bytes or 64 bits, a FlatBuffers offset
of 0) are poison cases of P1-P3 for `avro` and `flatbuffers` (`poison.cases`).
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path
from typing import Final

from codec import get_codec
from loadgen.payloads import make_payloads
from service.kafka.headers import DLQ_PREFIX
from tests.faults.harness import (
    BATCH_SIZE,
    COMMIT_INTERVAL_S,
    LOG_APPEND,
    Env,
    Outcome,
    http_get,
)
from tests.faults.observe import end_offsets
from tests.faults.producer import Payload, Plan, good_traffic
from tests.faults.run import Run
from tests.faults.slow_logic import HARD_MARGIN_S, SLOW_CUSTOMER, STUCK_CUSTOMER
from tests.fuzz.wire_hostile import shared_string_message

MIB: Final = 1 << 20
BOMB_SEQ: Final = 100
BOMB_LIMIT_MS: Final = 1000
"""B1: the bomb's dead letter lands within this of its send (it took ~2,300 s of
CPU before the verifier checked each distinct string once)."""


def b1_shared_string_bomb(env: Env) -> Outcome:
    """A 4.0 MB FlatBuffers message: 500,000 offsets to one 2 MiB string, dead-lettered < 1 s.

    The issue's message (valid per flatc) between good `small` messages, live: the
    time from its send (CreateTime) to its dead letter landing (the DLQ topic
    stamps LogAppendTime) must be under `BOMB_LIMIT_MS`, and the worker must drain
    the rest (missing 0).
    """
    outcome = Outcome(
        "B1",
        "FlatBuffers 4.0 MB message, 500,000 offsets to one 2 MiB string: "
        f"dead-lettered < {BOMB_LIMIT_MS} ms, the rest drained",
    )
    bomb = shared_string_message(500_000, 2 * MIB)
    good = good_traffic("flatbuffers", "small")

    def plan(seq: int) -> Payload:
        return Payload(bomb, poison=True) if seq == BOMB_SEQ else good(seq)

    with Run(
        env,
        outcome,
        codec="flatbuffers",
        worker_args=("--schema", "small"),
        dlq_config=LOG_APPEND,
    ) as run:
        run.worker()
        run.produce(plan, rate=100, count=3 * BOMB_SEQ)
        run.wait_drained(60)
        run.finish()
        sent = run.producer.acked.get(BOMB_SEQ) if run.producer else None
        dead = [r for r in run.data.dlq if r.seq == BOMB_SEQ] if run.data else []
        if sent is None or not dead:
            outcome.fail("the 4.0 MB message was not acknowledged and dead-lettered")
            return outcome
        took = dead[0].timestamp_ms - sent.timestamp_ms
        outcome.figures.update(bomb_bytes=len(bomb), bomb_to_dlq_ms=took)
        if took >= BOMB_LIMIT_MS:
            outcome.fail(f"dead-lettered {took} ms after its send")
    return outcome


BUDGET_MS: Final = 1000
SLOW_SEQS: Final = (100, 350)
"""B2: slow orders far enough apart (2.5 s at 100/s) for each to be alone in hand."""
COUNT: Final = 600
"""The last seq is slow too: SIGTERM lands while it is in hand."""
SHUTDOWN_S: Final = 10.0
"""The worker's default `shutdown_timeout_s`."""


def _slow_plan(
    codec_name: str, marked: set[int], customer: int = SLOW_CUSTOMER
) -> Plan:
    """Good orders, and at each seq of `marked` one of `customer` (poison)."""
    codec = get_codec(codec_name, "medium")  # type: ignore[arg-type]
    order = make_payloads("medium", 1, seed=9)[0]
    order["customer"] = {**order["customer"], "customer_id": customer}
    slow = codec.encode(codec.from_builtins(order))
    good = good_traffic(codec_name)  # type: ignore[arg-type]
    return lambda seq: Payload(slow, poison=True) if seq in marked else good(seq)


def b2_message_budget(env: Env) -> Outcome:
    """A handler slower than the budget: dead-lettered (budget), /healthz 200, SIGTERM mid-message.

    The worker runs `tests.faults.slow_logic` (an hour's sleep on orders of one
    customer) with `--message-budget-ms 1000`. Each slow order must be dead-lettered
    with `x-dlq-reason: budget` while the rest drain; `/healthz`, probed every
    0.2 s, must answer 200 throughout. The last message is slow too: SIGTERM is
    sent while it is in hand, and the worker must exit 0 within its shutdown
    budget (10 s), leaving that batch unstored; a second worker reads it again and
    dead-letters the slow order. X: the abandoned batch.
    """
    outcome = Outcome(
        "B2",
        f"Handler over the budget ({BUDGET_MS} ms): dead-lettered, /healthz 200, "
        "SIGTERM mid-message exits within the shutdown budget",
    )
    args = ("--message-budget-ms", str(BUDGET_MS))
    with Run(env, outcome, worker_args=args, module="tests.faults.slow_logic") as run:
        worker = run.worker()
        probes: list[int | None] = []
        stop = threading.Event()

        def probe() -> None:
            while not stop.wait(0.2):
                answer = http_get(worker.host, worker.port, "/healthz", timeout=2)
                probes.append(None if answer is None else answer[0])

        prober = threading.Thread(target=probe, daemon=True)
        prober.start()
        plan = _slow_plan(run.codec, {*SLOW_SEQS, COUNT - 1})
        producer = run.produce(plan, rate=100, count=COUNT)
        producer.wait(60)
        time.sleep(0.4)  # the last (slow) order is in hand for 1 s from its arrival
        stop.set()
        prober.join(5)
        took = run.stop(worker)
        log = worker.log_path.read_text(errors="replace")
        abandoned = "shutting down during a message" in log
        run.dup_bound += BATCH_SIZE  # the abandoned batch is handled again
        run.worker()
        run.wait_drained(60)
        run.finish()
        bad = [code for code in probes if code != 200]
        reasons = (
            {r.seq: r.header(DLQ_PREFIX + "reason") for r in run.data.dlq}
            if run.data
            else {}
        )
        outcome.figures.update(
            healthz_probes=len(probes),
            healthz_not_200=len(bad),
            sigterm_exit_s=round(took, 1),
            batch_abandoned=abandoned,
            dlq_reasons=",".join(sorted({str(v) for v in reasons.values()})),
        )
        if bad:
            outcome.fail(f"/healthz answered {bad[:5]} during slow messages")
        if took >= SHUTDOWN_S:
            outcome.fail(f"SIGTERM took {took:.1f} s (shutdown budget {SHUTDOWN_S} s)")
        if not abandoned:
            outcome.fail("SIGTERM did not land during the slow message (no abandon)")
        wrong = {s: r for s, r in reasons.items() if r != b"budget"}
        if wrong:
            outcome.fail(f"dead letters without reason budget: {wrong}")
    return outcome


STUCK_SEQ: Final = 100
HARD_S: Final = 2 * BUDGET_MS / 1000 + 0.02 + HARD_MARGIN_S
"""B3's backstop limit: twice the budget, the tests' 20 ms batch wait, the margin
`tests.faults.slow_logic` sets."""


def b3_backstop(env: Env) -> Outcome:
    """A logic stuck in C with the GIL held: the backstop exits, two restarts dead-letter it.

    An order whose logic runs `sum(range(10**13))` (hours in C, no signal checks):
    the budget cannot interrupt it, so the worker must exit with status 1 once no
    tick has run for the backstop's limit; restarted (as a supervisor would), it
    goes careful and exits again on the same message, now recorded exactly; the
    third incarnation dead-letters it on sight (reason `budget`) and drains the
    rest. Exactly two exits, never a loop. X: what each exit redoes.
    """
    outcome = Outcome(
        "B3",
        "Logic stuck in C holding the GIL: backstop exit, then dead-lettered "
        "after two restarts (not a crash loop)",
    )
    args = ("--message-budget-ms", str(BUDGET_MS))
    with Run(env, outcome, worker_args=args, module="tests.faults.slow_logic") as run:
        worker = run.worker()
        plan = _slow_plan(run.codec, {STUCK_SEQ}, STUCK_CUSTOMER)
        run.produce(plan, rate=100, count=3 * STUCK_SEQ).wait(60)
        ends = end_offsets(run.bootstrap, run.topic, run.partitions)
        exits: list[int | None] = []
        deadline = time.monotonic() + 240
        while not run.committed_to(ends) and time.monotonic() < deadline:
            if not worker.alive():
                exits.append(worker.exit_code())
                now = time.monotonic()
                since = now - HARD_S - COMMIT_INTERVAL_S - 1
                run.dup_bound += run.redo(worker, since, now)
                if len(exits) > 3:
                    break
                # Not waited for: stuck in C, it serves no /readyz before it exits.
                worker = run.worker(ready=False)
            time.sleep(0.5)
        run.wait_drained(30)
        run.finish()
        for left in (Path(tempfile.gettempdir()) / "codec-worker").glob(
            f"{run.group}.*"
        ):
            left.unlink()  # the record and the kept tracebacks of this run's exits
        dead = [r for r in run.data.dlq if r.seq == STUCK_SEQ] if run.data else []
        outcome.figures.update(exits=",".join(map(str, exits)), dead_letters=len(dead))
        if exits != [1, 1]:
            outcome.fail(f"worker exits {exits}, not two backstop exits [1, 1]")
        if not dead or dead[0].header(DLQ_PREFIX + "reason") != b"budget":
            outcome.fail("the stuck order is not a dead letter with reason budget")
    return outcome
