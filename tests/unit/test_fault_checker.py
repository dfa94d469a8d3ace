"""The fault suite's checker on synthetic runs: a clean run passes, each fault fails."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from service.kafka.headers import SEQ
from tests.faults.checker import (
    DLQ_HEADERS,
    VALUE_DROPPED,
    CommitSample,
    Event,
    Expected,
    RunData,
    Sent,
    Written,
    check,
)

PARTITIONS = 2
COUNT = 40
POISON = frozenset({5, 12, 31})
T0 = 1_700_000_000_000
"""Input seq s is appended at T0 + 10 s; its result at T0 + 10 s + 5."""


def sent(seq: int) -> Sent:
    return Sent(seq, seq % PARTITIONS, seq // PARTITIONS, T0 + 10 * seq)


def value(seq: int) -> bytes:
    return f"poison-{seq}".encode()


def original_headers(seq: int) -> tuple[tuple[str, bytes | None], ...]:
    return ((SEQ, str(seq).encode()), ("x-run-id", b"r1"))


def dead_letter(seq: int, **changes: Any) -> Written:
    s = sent(seq)
    context = {name: b"x" for name in DLQ_HEADERS}
    context["x-dlq-partition"] = str(s.partition).encode()
    context["x-dlq-offset"] = str(s.offset).encode()
    record = Written(
        seq,
        0,
        seq,
        s.timestamp_ms,
        key=str(seq).encode(),
        value=value(seq),
        headers=(*original_headers(seq), *context.items()),
    )
    return dataclasses.replace(record, **changes)


def output(seq: int, offset: int, at_ms: int | None = None) -> Written:
    stamp = T0 + 10 * seq + 5 if at_ms is None else at_ms
    return Written(seq, 0, offset, stamp, append_time=True)


def clean_run(**changes: Any) -> RunData:
    """40 seqs on 2 partitions, 3 of them poison, all handled once, in order."""
    good = [s for s in range(COUNT) if s not in POISON]
    run = RunData(
        acked={s: sent(s) for s in range(COUNT)},
        output=[output(s, i) for i, s in enumerate(good)],
        dlq=[dead_letter(s) for s in sorted(POISON)],
        poison={
            s: Expected(value(s), str(s).encode(), original_headers(s)) for s in POISON
        },
        commits=[
            CommitSample(T0 + 200, {0: 5, 1: 5}),
            CommitSample(T0 + 1000, {0: COUNT // 2, 1: COUNT // 2}),
        ],
        end_offsets={0: COUNT // 2, 1: COUNT // 2},
        fault_ends_ms=[T0 + 47],
    )
    return dataclasses.replace(run, **changes)


def bare_run(**changes: Any) -> RunData:
    """`clean_run` with no commit samples: for checks that are not about commits."""
    return clean_run(commits=[], end_offsets=None, **changes)


def failures_of(run: RunData) -> list[str]:
    return check(run).failures


def only_failure(run: RunData, prefix: str) -> str:
    failures = failures_of(run)
    assert len(failures) == 1, failures
    assert failures[0].startswith(prefix), failures
    return failures[0]


class TestCleanRun:
    """A run where everything went right passes with the figures of what happened."""

    def test_passes_with_figures(self) -> None:
        verdict = check(clean_run())
        assert verdict.passed, verdict.failures
        figures = verdict.figures
        assert figures["acked"] == COUNT
        assert figures["handled"] == COUNT - len(POISON)
        assert figures["dead_lettered"] == len(POISON)
        assert figures["missing"] == figures["duplicates"] == 0
        assert figures["order_violations"] == figures["commit_regressions"] == 0
        # Seq 5 (due at T0 + 55) is poison: the next output, seq 6, lands 18 ms on.
        assert figures["resume_s_max"] == pytest.approx(0.02)

    def test_a_fault_that_never_ends_in_output_resumes_never(self) -> None:
        verdict = check(clean_run(fault_ends_ms=[T0 + 10**9]))
        assert verdict.figures["resume_s_max"] == "never"


class TestDelivery:
    """missing, unexpected and misrouted each fail on their own."""

    def test_an_acked_message_in_neither_topic_is_missing(self) -> None:
        run = bare_run()
        failure = only_failure(
            dataclasses.replace(run, output=list(run.output)[1:]), "missing"
        )
        assert ": 1: 0" in failure

    def test_a_missing_poison_message_is_missing(self) -> None:
        run = bare_run()
        only_failure(dataclasses.replace(run, dlq=list(run.dlq)[1:]), "missing")

    def test_a_record_without_a_known_seq_is_unexpected(self) -> None:
        run = clean_run()
        stray = [output(COUNT + 7, 99), dataclasses.replace(output(0, 100), seq=None)]
        failure = only_failure(
            dataclasses.replace(run, output=[*run.output, *stray], end_offsets=None),
            "unexpected",
        )
        assert ": 2: " in failure

    def test_an_unacked_seq_that_arrived_is_not_unexpected(self) -> None:
        run = clean_run()
        late = output(COUNT + 7, 99)
        verdict = check(
            dataclasses.replace(
                run, output=[*run.output, late], not_acked=frozenset({COUNT + 7})
            )
        )
        assert verdict.passed, verdict.failures

    @pytest.mark.parametrize("where", ["good in dlq", "poison in output"])
    def test_misrouted(self, where: str) -> None:
        run = clean_run()
        if where == "good in dlq":
            extra = dataclasses.replace(dead_letter(1), value=b"good")
            run = dataclasses.replace(run, dlq=[*run.dlq, extra])
        else:
            run = dataclasses.replace(run, output=[*run.output, output(5, 99, T0)])
        assert any(f.startswith("misrouted") for f in failures_of(run))


class TestDuplicates:
    """Extra copies pass up to the bound X and fail past it."""

    def duplicated(self, bound: int) -> RunData:
        """Seqs 0, 2 and 4 written again after a kill (a step back it explains)."""
        run = clean_run(dup_bound=bound, events=[Event(T0 + 2000, "kill")])
        again = [output(s, 100 + s, T0 + 2000) for s in (0, 2, 4)]
        return dataclasses.replace(run, output=[*run.output, *again])

    def test_within_the_bound(self) -> None:
        verdict = check(self.duplicated(3))
        assert verdict.passed, verdict.failures
        assert verdict.figures["duplicates"] == 3
        assert verdict.figures["dup_max_partition"] == 3

    def test_past_the_bound(self) -> None:
        only_failure(self.duplicated(2), "duplicates over the bound X=2: 3")

    def test_a_second_dead_letter_is_a_duplicate(self) -> None:
        run = clean_run()
        only_failure(
            dataclasses.replace(run, dlq=[*run.dlq, dead_letter(5)]), "duplicates"
        )


class TestDeadLetters:
    """Each dead letter must be the injected message, with its context."""

    def with_dead_letter(self, record: Written, **expected: Any) -> RunData:
        run = clean_run()
        dlq = [record if r.seq == record.seq else r for r in run.dlq]
        poison = dict(run.poison)
        poison[record.seq or 0] = dataclasses.replace(poison[5], **expected)
        return dataclasses.replace(run, dlq=dlq, poison=poison)

    @pytest.mark.parametrize(
        ("changes", "problem"),
        [
            ({"value": b"poison-5!"}, "value differs"),
            ({"value": None}, "value differs (None"),
            ({"key": b"other"}, "key"),
            ({"timestamp_ms": T0 + 1}, "timestamp"),
        ],
    )
    def test_a_changed_record_fails(
        self, changes: dict[str, Any], problem: str
    ) -> None:
        failure = only_failure(
            self.with_dead_letter(dead_letter(5, **changes)), "dead letters"
        )
        assert problem in failure

    def test_a_broker_timestamp_is_not_compared(self) -> None:
        record = dead_letter(5, timestamp_ms=T0 + 1, append_time=True)
        assert failures_of(self.with_dead_letter(record)) == []

    @pytest.mark.parametrize("header", ["x-dlq-reason", "x-dlq-worker", SEQ])
    def test_a_lost_header_fails(self, header: str) -> None:
        record = dead_letter(5)
        record = dataclasses.replace(
            record, headers=tuple(h for h in record.headers if h[0] != header)
        )
        failure = only_failure(self.with_dead_letter(record), "dead letters")
        assert header in failure

    def test_a_wrong_source_offset_fails(self) -> None:
        record = dead_letter(5)
        headers = [(k, b"99" if k == "x-dlq-offset" else v) for k, v in record.headers]
        record = dataclasses.replace(record, headers=tuple(headers))
        assert "names" in only_failure(self.with_dead_letter(record), "dead letters")

    def test_an_oversize_value_may_be_dropped_if_the_size_is_named(self) -> None:
        size = str(len(value(5))).encode()
        record = dead_letter(5, value=None)
        record = dataclasses.replace(
            record, headers=(*record.headers, (VALUE_DROPPED, size))
        )
        assert failures_of(self.with_dead_letter(record, droppable=True)) == []

    def test_a_dropped_value_must_name_its_size(self) -> None:
        record = dead_letter(5, value=None)
        record = dataclasses.replace(
            record, headers=(*record.headers, (VALUE_DROPPED, b"1"))
        )
        failure = only_failure(
            self.with_dead_letter(record, droppable=True), "dead letters"
        )
        assert VALUE_DROPPED in failure

    def test_a_tombstone_stays_a_tombstone(self) -> None:
        record = dead_letter(5, value=None)
        assert failures_of(self.with_dead_letter(record, value=None)) == []


class TestOrder:
    """Output per input partition goes up with no gap unless an event explains it."""

    def replayed(self, *events: Event) -> RunData:
        """Partition 0's seqs 10 and 14 again after 38: a step back (12 is poison)."""
        run = clean_run(events=list(events), dup_bound=10)
        again = [output(s, 100 + s, T0 + 300 + s) for s in (10, 14)]
        return dataclasses.replace(run, output=[*run.output, *again])

    def test_a_step_back_fails(self) -> None:
        failure = only_failure(self.replayed(), "order violations")
        assert "(back" in failure

    def test_a_step_back_after_a_rebalance_passes(self) -> None:
        run = self.replayed(Event(T0 + 300, "assigned", frozenset({0})))
        assert failures_of(run) == []

    def test_an_event_of_all_partitions_explains_it(self) -> None:
        assert failures_of(self.replayed(Event(T0 + 300, "kill"))) == []

    def test_an_event_on_another_partition_does_not(self) -> None:
        run = self.replayed(Event(T0 + 300, "assigned", frozenset({1})))
        only_failure(run, "order violations")

    def test_an_event_long_before_does_not(self) -> None:
        only_failure(self.replayed(Event(T0 - 5000, "kill")), "order violations")

    def test_a_gap_fails(self) -> None:
        run = clean_run(end_offsets=None, commits=[])
        swapped = list(run.output)
        swapped[2], swapped[4] = swapped[4], swapped[2]  # seqs 2 and 4: p0 off 1, 2
        swapped = [dataclasses.replace(r, offset=i) for i, r in enumerate(swapped)]
        failures = failures_of(dataclasses.replace(run, output=swapped))
        assert any("(gap" in f for f in failures), failures

    def test_dead_lettered_offsets_are_not_gaps(self) -> None:
        # Seq 12 (partition 0, offset 6) is poison: 10 -> 14 skips it legitimately.
        assert check(clean_run()).figures["order_violations"] == 0


class TestCommits:
    """Committed offsets only grow, never run ahead of writes, reach the end."""

    def test_a_regression_fails(self) -> None:
        run = clean_run()
        late = CommitSample(T0 + 2000, {0: 3, 1: COUNT // 2})
        failures = failures_of(dataclasses.replace(run, commits=[*run.commits, late]))
        assert any(f.startswith("committed offset regressions") for f in failures)

    def test_no_commit_yet_is_not_a_regression(self) -> None:
        run = clean_run()
        early = CommitSample(T0, {0: -1001, 1: -1001})
        assert (
            failures_of(dataclasses.replace(run, commits=[early, *run.commits])) == []
        )

    def test_a_commit_before_its_write_landed_fails(self) -> None:
        run = clean_run()
        # Offset 10 of partition 0 is seq 20, whose output lands at T0 + 205.
        early = CommitSample(T0 + 150, {0: 11})
        commits = [early, run.commits[-1]]
        failure = only_failure(
            dataclasses.replace(run, commits=commits), "commits ahead"
        )
        assert "written later" in failure

    def test_a_commit_past_a_message_never_written_fails(self) -> None:
        run = clean_run()
        output = [r for r in run.output if r.seq != 0]
        failures = failures_of(dataclasses.replace(run, output=output))
        assert any("never written" in f for f in failures), failures

    def test_a_final_commit_short_of_the_end_fails(self) -> None:
        run = clean_run(end_offsets={0: COUNT // 2, 1: COUNT // 2 + 1})
        assert "p1 committed 20 of 21" in only_failure(run, "final commit short")

    def test_no_commit_at_all_fails_when_an_end_is_expected(self) -> None:
        only_failure(clean_run(commits=[]), "final commit short")
