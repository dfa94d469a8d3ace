"""Poison: P1-P3 per codec, P3 against small limits, P5 logic errors and retries.

P4 (the DLQ unavailable) is in `scenarios_dlq`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from codec import CodecName, get_codec
from loadgen.payloads import make_payloads
from service.kafka.headers import DLQ_PREFIX
from tests.faults.checker import VALUE_DROPPED
from tests.faults.harness import Env, FaultWorker, Outcome
from tests.faults.poison import MARKER, Case, cases, interleaved, random_bytes
from tests.faults.producer import good_traffic
from tests.faults.run import Run

Scenario = Callable[[Env], Outcome]
EVERY: Final = 25
"""A poison message every 25 seqs: good ones on both sides of each."""
SMALL_LIMIT: Final = 100_000
"""P3's `--max-payload-bytes`."""
FETCH_MAX_BYTES: Final = 1_000_000
"""P3's `fetch_max_bytes`: the DLQ producer takes what the consumer can fetch,
this + 64 KiB (librdkafka still fetches a larger record, one at a time)."""
DLQ_TOPIC_LIMIT: Final = 300_000
"""P3's DLQ topic `max.message.bytes`: under the DLQ producer's limit, so the
broker, not the client, refuses what lies between."""


def _dead_letter_reasons(worker: FaultWorker) -> dict[str, int]:
    scraped = worker.scrape()
    if scraped is None:
        return {}
    return {
        s.labels["reason"]: int(s.value)
        for s in scraped.samples
        if s.name == "worker_dead_letters_total"
    }


def _marker_leaks(run: Run) -> list[str]:
    """Where the payload marker shows up: DLQ context headers or worker logs."""
    leaks = []
    for record in run.data.dlq if run.data else ():
        for key, value in record.headers:
            if key.startswith(DLQ_PREFIX) and value and MARKER.encode() in value:
                leaks.append(f"DLQ header {key} of x-seq {record.seq}")
    leaks += [
        f"log {log.name}"
        for log in run.logs()
        if MARKER in log.read_text(errors="replace")
    ]
    return leaks


def _failed_cases(run: Run, kinds: Sequence[Case]) -> list[str]:
    """The cases whose message is not where it belongs (DLQ for poison, else output)."""
    if run.data is None:
        return [k.name for k in kinds]
    dead = {r.seq: r.header(DLQ_PREFIX + "reason") for r in run.data.dlq}
    handled = {r.seq for r in run.data.output}
    return [
        kind.name
        for i, kind in enumerate(kinds)
        if EVERY * (i + 1) not in (dead if kind.poison else handled)
        or (kind.reason and dead[EVERY * (i + 1)] != kind.reason.encode())
    ]


def _poison_run(
    env: Env,
    outcome: Outcome,
    codec: CodecName,
    kinds: Sequence[Case],
    *,
    worker_args: Sequence[str] = (),
    config: Mapping[str, Mapping[str, Any]] | None = None,
    dlq_config: Mapping[str, str] | None = None,
    must_drop: int | None = None,
    backlog: bool = False,
) -> Outcome:
    """Every case once, between good messages, against one worker that must not exit.

    The dead letters are judged by the checker (byte-identical, or written
    without a value that did not fit, naming its size and sha256);
    `worker_dead_letter_values_dropped_total` must count each of the latter,
    and there must be `must_drop` of them (when given). With `backlog`, all of
    it is produced before the worker starts: one batch then holds every case,
    and their dead letters share the DLQ producer's batches.
    """
    with Run(
        env,
        outcome,
        codec=codec,
        config=config,
        worker_args=worker_args,
        dlq_config=dlq_config,
    ) as run:
        plan = interleaved(good_traffic(codec), list(kinds), EVERY)
        count = EVERY * (len(kinds) + 1)
        if backlog:
            run.produce(plan, rate=5000, count=count).wait(60)
            worker = run.worker()
        else:
            worker = run.worker()
            run.produce(plan, rate=250, count=count)
        run.wait_drained(45)
        reasons = _dead_letter_reasons(worker)
        scraped = worker.scrape()
        alive = worker.alive()
        run.finish()
        if not alive:
            outcome.fail(f"the worker exited ({worker.exit_code()}) on poison")
        dlq = run.data.dlq if run.data else []
        dropped = sum(1 for r in dlq if r.value is None and r.header(VALUE_DROPPED))
        counted = (
            -1
            if scraped is None
            else int(scraped.total("worker_dead_letter_values_dropped_total"))
        )
        outcome.figures.update(
            poison_cases=sum(1 for k in kinds if k.poison),
            dlq_by_reason=",".join(f"{k}={v}" for k, v in sorted(reasons.items())),
            values_dropped=dropped,
            cases_failed=", ".join(failed := _failed_cases(run, kinds)) or "none",
        )
        if failed:
            outcome.fail(
                f"cases not dead-lettered (or not with their reason): {failed}"
            )
        if counted != dropped:
            outcome.fail(
                f"worker_dead_letter_values_dropped_total={counted}, but "
                f"{dropped} dead letter(s) were written without their value"
            )
        if must_drop is not None and dropped != must_drop:
            outcome.fail(f"{dropped} dead letters without a value, not {must_drop}")
        if leaks := _marker_leaks(run):
            outcome.fail(f"a payload value leaked: {', '.join(leaks)}")
    return outcome


def poison_for(codec: CodecName) -> Scenario:
    """P1-P3 for one codec: every poison case once, between good messages."""

    def scenario(env: Env) -> Outcome:
        outcome = Outcome(f"P1-P3 {codec}", f"Poison per codec: {codec}")
        return _poison_run(env, outcome, codec, cases(codec))

    scenario.__name__ = f"p1_p3_{codec.replace('-', '_').replace('+', '_')}"
    return scenario


def p3_small_limits(env: Env) -> Outcome:
    """Oversize poison against small limits: the dead letter keeps what fits.

    `--max-payload-bytes 100000`, `fetch_max_bytes` 1 MB (the DLQ producer's
    limit is then 1 MB + 64 KiB) and a DLQ topic whose `max.message.bytes` is
    300 kB: a value just over the payload limit is dead-lettered whole; 500 kB
    passes the producer but not the topic (the broker refuses it); 1.2 MB is
    over the producer's own limit. Both must be written without their value,
    naming its size and sha256, and counted; the worker must not exit. All of
    it waits in the topic before the worker starts (a restart's backlog), so
    the dead letters go out together: the broker refuses a whole produce batch
    over the topic's limit, and what shares a batch with an oversize record
    must still land as it is, value and all.
    """
    outcome = Outcome(
        "P3",
        f"Oversize poison vs small limits: --max-payload-bytes {SMALL_LIMIT:,}, "
        f"DLQ producer ~{FETCH_MAX_BYTES / 1e6:.0f} MB, DLQ topic {DLQ_TOPIC_LIMIT:,} B",
    )
    codec: CodecName = "msgspec-msgpack"
    kinds = [
        Case("just over --max-payload-bytes", b"x" * (SMALL_LIMIT + 1)),
        Case("random bytes", random_bytes(codec)),
        Case("500 kB: over the DLQ topic", b"y" * 500_000, droppable=True),
        Case("tombstone", None, reason="empty"),
        Case("1.2 MB: over the DLQ producer", b"z" * 1_200_000, droppable=True),
        Case("empty value", b"", reason="empty"),
    ]
    return _poison_run(
        env,
        outcome,
        codec,
        kinds,
        worker_args=("--max-payload-bytes", str(SMALL_LIMIT)),
        config={"worker.consumer": {"fetch_max_bytes": FETCH_MAX_BYTES}},
        dlq_config={"max.message.bytes": str(DLQ_TOPIC_LIMIT)},
        must_drop=2,
        backlog=True,
    )


def _rejected_by_logic() -> bytes:
    """A medium order whose items have quantity 0: decodes, then the logic rejects it."""
    codec = get_codec("msgspec-msgpack", "medium")
    data = make_payloads("medium", 1, seed=5)[0]
    data["items"] = [{**item, "quantity": 0} for item in data["items"]]
    return codec.encode(codec.from_builtins(data))


def p5_retry_budget(env: Env) -> Outcome:
    """Logic errors: retried in place up to a budget, then dead-lettered.

    RELIABILITY P5 and 2.6, with `--logic flaky --max-attempts 3`: the flaky
    logic fails every 20th message's first attempt (transient: it must pass on
    a retry, be counted ok and stay out of the DLQ); orders of quantity 0 are
    rejected on every attempt (permanent: dead-lettered after 3 attempts, with
    `x-dlq-attempts: 3` and stage `process`). Retries keep each partition's order.
    """
    attempts = 3
    outcome = Outcome(
        "P5",
        f"Logic errors: transient ones retried (flaky logic), permanent ones "
        f"dead-lettered after {attempts} attempts",
    )
    rejected = [Case("quantity 0", _rejected_by_logic())] * 10
    args = ("--logic", "flaky", "--max-attempts", str(attempts))
    with Run(env, outcome, worker_args=args) as run:
        worker = run.worker()
        plan = interleaved(good_traffic(run.codec), rejected, 20)
        run.produce(plan, rate=200, count=20 * (len(rejected) + 1))
        run.wait_drained(45)
        scraped = worker.scrape()
        run.finish()
        retries = ok = -1
        if scraped is not None:
            retries = int(scraped.total("worker_logic_retries_total"))
            ok = int(scraped.total("worker_messages_total", outcome="ok"))
        dlq = run.data.dlq if run.data else []
        handled = {r.seq for r in run.data.output} if run.data else set()
        problems = []
        for record in dlq:
            stage = record.header(DLQ_PREFIX + "stage")
            tries = record.header(DLQ_PREFIX + "attempts")
            if stage != b"process":
                problems.append(f"x-seq {record.seq}: stage {stage!r}, not process")
            if tries != str(attempts).encode():
                problems.append(f"x-seq {record.seq}: x-dlq-attempts={tries!r}")
        transient = retries - len(rejected) * (attempts - 1)
        outcome.figures.update(
            logic_retries=retries,
            transient_retried=transient,
            ok_count=ok,
            dead_letters=len(dlq),
        )
        if problems:
            outcome.fail(
                f"dead letters without x-dlq-attempts={attempts} and stage process: "
                f"{len(problems)}: " + ", ".join(problems[:3])
            )
        if len(dlq) != len(rejected):
            outcome.fail(f"{len(dlq)} dead letters for {len(rejected)} rejected orders")
        if transient < 1:
            outcome.fail(
                f"worker_logic_retries_total={retries}: no transient failure was "
                "retried (the permanent ones alone account for "
                f"{len(rejected) * (attempts - 1)})"
            )
        if ok != len(handled):
            outcome.fail(f"ok counted {ok}, but {len(handled)} messages were output")
    return outcome
