"""P4: the dead-letter topic is unavailable while poison arrives.

The worker must neither exit nor store the offsets of a batch whose dead
letters were not written: it rewinds and pauses the batch's partitions, says so
on /readyz (503, `degraded`, naming the topic) and in `worker_degraded`, retries
with back-off, and resumes once the topic is back. Each poison message then has
exactly one dead letter: every write to a deleted topic fails, so none of the
failed attempts lands.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from localkafka import create_topic, delete_topic
from tests.faults.harness import LOG_APPEND, Env, FaultWorker, Outcome
from tests.faults.observe import end_offsets
from tests.faults.poison import Case, interleaved
from tests.faults.producer import Payload, Plan, good_traffic
from tests.faults.run import Run

DELIVERY_TIMEOUT_S: Final = 5.0
"""The worker's `delivery_timeout_s` here (30 s by default): a short outage
still outlasts it several times over."""
OUTAGE_S: Final = 15.0
_PROBE_S: Final = 0.25


@dataclass
class ReadyProbe:
    """/readyz of one worker, polled while a scenario waits."""

    worker: FaultWorker
    answers: list[tuple[float, int, str]] = field(default_factory=list)
    """(monotonic time, status, body) of each answer."""

    def watch(self, until: Callable[[], bool], timeout: float) -> bool:
        """Poll until `until()` or `timeout` s (or the worker exits); return `until()`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.worker.alive():
            if until():
                return True
            answer = self.worker.readyz()
            if answer is not None:
                self.answers.append((time.monotonic(), *answer))
            time.sleep(_PROBE_S)
        return until()

    def degraded(self) -> list[tuple[float, int, str]]:
        """The answers that said `degraded` (503)."""
        return [a for a in self.answers if a[1] == 503 and "degraded" in a[2].lower()]

    def ready_after(self, t: float) -> float | None:
        """When /readyz first answered 200 after `t` (None: never)."""
        return next((a[0] for a in self.answers if a[0] > t and a[1] == 200), None)


def p4_dlq_unavailable(env: Env) -> Outcome:
    """The DLQ topic is deleted mid-run while poison arrives, and recreated 15 s on."""
    outcome = Outcome(
        "P4",
        f"DLQ unavailable: topic deleted while poison arrives, recreated "
        f"{OUTAGE_S:.0f} s later",
    )
    rate, seconds, every = 200, 30, 50
    poison = [Case("random bytes", b"\xc1" * 40)]
    config = {"worker.processing": {"delivery_timeout_s": DELIVERY_TIMEOUT_S}}
    with Run(env, outcome, config=config, dlq_config=LOG_APPEND) as run:
        worker = run.worker()
        probe = ReadyProbe(worker)
        good = good_traffic(run.codec)
        # Poison from seq 1200 (6 s in, after the deletion) every 50th message.
        plan = interleaved(good, poison * (rate * seconds // every), every)
        producer = run.produce(
            lambda seq: good(seq) if seq < 1200 else plan(seq),
            rate=rate,
            count=rate * seconds,
        )
        time.sleep(5)
        delete_topic(run.bootstrap, run.dlq)
        gone = time.monotonic()
        run.mark("DLQ topic deleted")
        probe.watch(lambda: time.monotonic() - gone > OUTAGE_S, OUTAGE_S + 5)
        create_topic(run.bootstrap, run.dlq, run.partitions, config=dict(LOG_APPEND))
        back = time.monotonic()
        run.fault_ends.append(run.mark("DLQ topic recreated"))

        ends: dict[int, int] = {}

        def drained() -> bool:
            if producer.sent < producer.count:
                return False
            if not ends:  # once: the input is complete
                ends.update(end_offsets(run.bootstrap, run.topic, run.partitions))
            return run.committed_to(ends)

        recovered = probe.watch(drained, 90)
        probe.watch(lambda: False, 1)  # the last word of /readyz, drained
        alive = worker.alive()
        scraped = worker.scrape()
        run.finish()
        if not alive:
            outcome.fail(f"the worker exited ({worker.exit_code()}): it must not")
        elif not recovered:
            outcome.fail("the worker did not recover: input not committed to its end")
        _judge_readiness(outcome, probe, run.dlq, gone, back)
        if not worker.rewinds.degraded_seen:
            outcome.fail("worker_degraded never read 1 during the outage")
        if scraped is not None and scraped.total("worker_degraded") != 0:
            outcome.fail("worker_degraded still 1 after the topic came back")
        records = run.data.dlq if run.data else []
        dead = Counter(r.seq for r in records if r.seq is not None)
        extra = sorted(seq for seq, n in dead.items() if n > 1)
        outcome.figures.update(poison=len(producer.poison), dlq_copies_max=0)
        if extra:
            outcome.figures["dlq_copies_max"] = max(dead.values())
            outcome.fail(
                f"DLQ copies: {len(extra)} poison seqs more than once: {extra[:5]}"
            )
    return outcome


def _judge_readiness(
    outcome: Outcome, probe: ReadyProbe, dlq: str, gone: float, back: float
) -> None:
    """503 `degraded`, naming the DLQ topic, during the outage; 200 after it.

    `gone` and `back`: when the topic was deleted and recreated (monotonic).
    """
    degraded = probe.degraded()
    if not degraded:
        statuses = Counter(status for _, status, _ in probe.answers)
        outcome.fail(f"/readyz never answered 503 degraded (statuses seen: {statuses})")
        return
    if not any(dlq in body for _, _, body in degraded):
        outcome.fail(
            f"/readyz degraded but never names {dlq}: {degraded[0][2][:200]!r}"
        )
    first, last = degraded[0][0], degraded[-1][0]
    ready = probe.ready_after(last)
    final = probe.answers[-1][1] if probe.answers else None
    outcome.figures.update(
        degraded_after_s=round(first - gone, 1),
        stall_s=round((ready or last) - first, 1),
        ready_after_heal_s="never" if ready is None else round(ready - back, 1),
    )
    if ready is None or final != 200:
        outcome.fail(f"/readyz not ready again after the topic came back ({final})")


HEADERS_1KB: Final = tuple((f"x-h{i:04d}", b"h" * 1000) for i in range(1100))
"""1,100 headers of 1 KB: alone over a DLQ topic's 1,000,000-byte limit."""
DLQ_LIMIT: Final = 1_000_000


def _poison_with_headers(good: Plan, every: int, big: list[int]) -> Plan:
    """Good traffic; every `every`-th seq poison, each third of them with the
    1,100 headers (their seqs appended to `big`; the others plain, sharing their
    batches)."""

    def plan(seq: int) -> Payload:
        if seq % every or not seq:
            return good(seq)
        if (seq // every) % 3 == 0:
            big.append(seq)
            return Payload(
                b"\xc1" * 40, poison=True, droppable=True, headers=HEADERS_1KB
            )
        return Payload(b"\xc1" * 40, poison=True)

    return plan


def u1_unwritable_letter(env: Env) -> Outcome:
    """A dead letter whose headers alone exceed the DLQ topic's limit: cut, not stuck.

    Poison with 1,100 headers of 1 KB against a DLQ topic whose
    `max.message.bytes` is 1,000,000, among other poison in the same batches:
    each is written cut to its essentials (its value and those headers dropped,
    their count, bytes and sha256 kept), every other letter is written once,
    nothing is missing, `/readyz` never says degraded.
    """
    outcome = Outcome(
        "U1",
        "Dead letter over the DLQ topic's limit by its headers alone (1,100 x 1 KB "
        "vs 1,000,000): cut to its essentials, written once",
    )
    big: list[int] = []

    def plan(run: Run) -> Plan:
        return _poison_with_headers(good_traffic(run.codec), 20, big)

    cut, _ = _letters_run(env, outcome, DLQ_LIMIT, plan, 4000, "cut")
    outcome.figures.update(headers_over_limit=len(big), letters_cut=cut)
    if cut != len(big):
        outcome.fail(f"worker_dead_letters_cut_total={cut}, {len(big)} were cut")
    return outcome


def u2_spooled(env: Env) -> Outcome:
    """A DLQ topic that takes no letter at all: each goes to the local spool.

    The DLQ topic's `max.message.bytes` is 200 bytes, less than any letter's
    essentials: every poison message's letter is refused as it is, without its
    value and cut, then spooled (`worker_dead_letters_spooled_total`); the
    partitions move on and nothing is missing (the checker reads the spool).
    """
    outcome = Outcome(
        "U2",
        "DLQ topic refuses every letter (max.message.bytes 200): spooled, not stuck",
    )

    def plan(run: Run) -> Plan:
        return interleaved(good_traffic(run.codec), [Case("x", b"\xc1" * 40)] * 40, 25)

    spooled, run = _letters_run(env, outcome, 200, plan, 25 * 41, "spooled")
    poison = len(run.producer.poison) if run.producer else -1
    lines = sum(1 for r in run.data.dlq if r.partition == -1) if run.data else 0
    outcome.figures.update(spooled=spooled, spool_lines=lines)
    if spooled != poison or lines != spooled:
        outcome.fail(f"{poison} poison, {spooled} counted spooled, {lines} spooled")
    return outcome


def _letters_run(
    env: Env,
    outcome: Outcome,
    dlq_limit: int,
    plan: Callable[[Run], Plan],
    count: int,
    counter: str,
) -> tuple[int, Run]:
    """One worker against a DLQ topic of `dlq_limit` bytes; `plan`'s traffic;
    `worker_dead_letters_<counter>_total` at the end (-1: not scraped)."""
    dlq_config = {**LOG_APPEND, "max.message.bytes": str(dlq_limit)}
    with Run(env, outcome, dlq_config=dlq_config) as run:
        worker = run.worker()
        probe = ReadyProbe(worker)
        producer = run.produce(plan(run), rate=400, count=count)
        probe.watch(lambda: not producer.running, 120)
        run.wait_drained(60)
        scraped = worker.scrape()
        run.finish()
        _judge_once(outcome, run, probe)
    name = f"worker_dead_letters_{counter}_total"
    return (-1 if scraped is None else int(scraped.total(name))), run


def _judge_once(outcome: Outcome, run: Run, probe: ReadyProbe) -> None:
    """No letter twice; /readyz never degraded."""
    records = run.data.dlq if run.data else []
    copies = Counter(r.seq for r in records if r.seq is not None)
    twice = sorted(seq for seq, n in copies.items() if n > 1)
    outcome.figures["dlq_copies_max"] = max(copies.values(), default=0)
    if twice:
        outcome.fail(f"dead letters written more than once: {twice[:5]}")
    if degraded := probe.degraded():
        outcome.fail(
            f"/readyz said degraded {len(degraded)} times: {degraded[0][2][:160]}"
        )
