"""Failed writes never stop the loop; oversize dead letters; the logic's retry budget.

The batch loop with fakes (`tests.unit.test_consumer.Rig`): a batch whose dead
letters are not confirmed is rewound and paused, nothing of it stored or counted,
and retried after a back-off; a dead letter too large for the DLQ is written
without its value; a logic error is retried in place up to the budget.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import pytest
import structlog
from confluent_kafka import KafkaError

from schemas.errors import LogicError
from service.delivery.gated_writes import ConfirmedProducer
from service.delivery.held_partitions import FIRST_BACKOFF_S, MAX_BACKOFF_S, Hold
from service.logic.builtin import FLAKY_EVERY, Handler
from service.telemetry.log_setup import configure_logging
from tests.fakes import FakeProducer
from tests.unit.test_consumer import Rig, decode_every  # noqa: F401 (a fixture)

TIMED_OUT = KafkaError(KafkaError._MSG_TIMED_OUT)
NO_TOPIC = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
TOO_LARGE = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Switch:
    """A producer failure that can be turned off (the DLQ comes back)."""

    def __init__(self, error: KafkaError) -> None:
        self.error: KafkaError | None = error

    def __call__(self, record: dict[str, Any]) -> KafkaError | None:
        return self.error


def held_rig(fail: Switch) -> tuple[Rig, Clock]:
    rig = Rig(fail_with=fail)
    clock = Clock()
    rig.loop.hold = Hold(rig.consumer, rig.metrics, clock=clock)
    return rig, clock


@pytest.mark.usefixtures("decode_every")
class TestDeliveryFailure:
    """RELIABILITY P4: pause, keep polling, retry with back-off, never store past."""

    def test_the_batch_is_rewound_and_paused_and_nothing_stored(self) -> None:
        rig, _clock = held_rig(Switch(NO_TOPIC))
        batch = [rig.msg(10, partition=0), rig.msg(20, partition=1)]
        batch += [rig.msg(11, partition=0, value=b"\xc1")]
        rig.process(batch)
        assert rig.consumer.stored == []
        assert rig.consumer.paused == {0, 1}
        assert sorted(rig.consumer.seeks) == [(0, 10), (1, 20)]
        assert rig.ok() == 0  # processed again later: counted then
        assert rig.sample("worker_degraded") == 1
        assert rig.sample("worker_delivery_failures_total") == 1
        reason = rig.loop.hold.reason
        assert reason is not None and "'in.dlq'" in reason
        assert "UNKNOWN_TOPIC_OR_PART" in reason

    def test_other_partitions_go_on_and_are_stored(self) -> None:
        rig, _clock = held_rig(Switch(NO_TOPIC))
        rig.process([rig.msg(10, partition=0, value=b"\xc1")])
        # Fetched before the pause: partition 0's messages are dropped unprocessed.
        rig.process([rig.msg(11, partition=0), rig.msg(30, partition=2)])
        assert rig.ok() == 1
        # the held one up to where it was rewound (nothing past it), no further
        assert rig.consumer.stored == [[("in", 0, 10), ("in", 2, 31)]]

    def test_resumed_after_the_backoff_and_healed_by_a_confirmed_retry(self) -> None:
        fail = Switch(NO_TOPIC)
        rig, clock = held_rig(fail)
        poison = rig.msg(10, partition=0, value=b"\xc1")
        rig.process([poison])
        rig.loop.hold.due()
        assert rig.consumer.paused == {0}  # the back-off has not passed
        clock.now += FIRST_BACKOFF_S
        rig.loop.hold.due()
        assert rig.consumer.paused == set()
        rig.process([poison])  # still failing: paused again, back-off doubled
        assert rig.consumer.paused == {0}
        clock.now += FIRST_BACKOFF_S
        rig.loop.hold.due()
        assert rig.consumer.paused == {0}
        clock.now += FIRST_BACKOFF_S
        rig.loop.hold.due()
        fail.error = None  # the DLQ is back
        rig.process([poison, rig.msg(11, partition=0)])
        assert rig.consumer.stored == [[("in", 0, 12)]]
        assert rig.sample("worker_degraded") == 0
        assert rig.loop.hold.reason is None
        assert [r["value"] for r in rig.producer.acked] == [b"\xc1"]  # one copy
        assert rig.sample("worker_delivery_failures_total") == 2

    def test_the_backoff_is_capped(self) -> None:
        rig, clock = held_rig(Switch(TIMED_OUT))
        poison = rig.msg(10, value=b"\xc1")
        waits = []
        for _ in range(8):
            rig.process([poison])
            start = clock.now
            while rig.consumer.paused:
                clock.now += 0.5
                rig.loop.hold.due()
            waits.append(clock.now - start)
        assert waits[:3] == [1.0, 2.0, 4.0]
        assert max(waits) == MAX_BACKOFF_S

    def test_a_revoked_held_partition_is_forgotten(self) -> None:
        rig, _clock = held_rig(Switch(NO_TOPIC))
        rig.process([rig.msg(10, value=b"\xc1")])
        rig.loop.hold.forget([0])
        assert rig.loop.hold.reason is None and not rig.loop.hold.active

    def test_a_refused_output_write_holds_too(self) -> None:
        rig = Rig(output=True, refuse_with=lambda r: NO_TOPIC)
        rig.process([rig.msg(1), rig.msg(2)])
        assert rig.consumer.stored == [] and rig.consumer.paused == {0}


class TestLateReports:
    def test_reports_of_abandoned_writes_are_ignored(self) -> None:
        held: list[Any] = []

        class Slow(FakeProducer):
            def flush(self, timeout: float = -1) -> int:
                return 0  # nothing is ever acknowledged in time

        producer = Slow()
        confirmed = ConfirmedProducer(producer, timeout_s=0.0)
        confirmed.produce("t", value=b"x")
        held.extend(producer._queue)
        assert confirmed.pending == 1
        confirmed.abandon()
        assert confirmed.pending == 0
        _record, on_delivery = held[0]
        on_delivery(None, None)  # the old write lands after all
        assert confirmed.pending == 0
        assert confirmed.confirm() == 0


@pytest.mark.usefixtures("decode_every")
class TestDroppedCount:
    def test_a_dropped_value_counts_once_acknowledged_not_per_attempt(self) -> None:
        producer = FakeProducer(refuse_with=lambda r: TOO_LARGE if r["value"] else None)
        confirmed = ConfirmedProducer(producer, timeout_s=1.0)
        confirmed.produce("dlq", droppable=True, value=b"x" * 10)
        confirmed.abandon()  # its batch failed elsewhere: written again later
        producer.flush()
        assert confirmed.values_dropped == 0
        confirmed.produce("dlq", droppable=True, value=b"x" * 10)
        assert confirmed.confirm() == 1
        assert confirmed.values_dropped == 1


@pytest.mark.usefixtures("decode_every")
class TestOversize:
    """A dead letter the DLQ cannot take whole keeps its trace, never stops."""

    def test_refused_by_the_producer_is_written_without_value(self) -> None:
        value = b"\xc1" * 5000
        rig = Rig(refuse_with=lambda r: TOO_LARGE if r["value"] else None)
        rig.process([rig.msg(7, value=value), rig.msg(8)])
        [record] = rig.producer.acked
        headers = dict(record["headers"])
        assert record["value"] is None and record["key"] == b"7"
        assert headers["x-dlq-value-dropped-bytes"] == b"5000"
        assert (
            headers["x-dlq-value-sha256"] == hashlib.sha256(value).hexdigest().encode()
        )
        assert headers["x-dlq-value-dropped-reason"] == b"MSG_SIZE_TOO_LARGE"
        assert headers["x-dlq-offset"] == b"7" and headers["x-dlq-topic"] == b"in"
        assert rig.sample("worker_dead_letter_values_dropped_total") == 1
        assert rig.consumer.stored == [[("in", 0, 9)]]

    def test_refused_by_the_topic_is_written_without_value(self) -> None:
        rig = Rig(fail_with=lambda r: TOO_LARGE if r["value"] else None)
        rig.process([rig.msg(0, value=b"\xc1" * 100)])
        [record] = rig.producer.acked
        assert record["value"] is None
        assert dict(record["headers"])["x-dlq-value-dropped-bytes"] == b"100"
        assert rig.sample("worker_dead_letter_values_dropped_total") == 1
        assert rig.consumer.stored == [[("in", 0, 1)]]


class Failing:
    """Logic that fails a message's first `times` attempts."""

    def __init__(self, times: int) -> None:
        self.times = times
        self.calls = 0

    def __call__(self, obj: Any) -> None:
        self.calls += 1
        if self.calls <= self.times:
            raise LogicError("not yet")


@pytest.mark.usefixtures("decode_every")
class TestRetryBudget:
    """RELIABILITY P5: retried in place up to the budget, then the DLQ."""

    def test_a_transient_error_within_the_budget_is_not_dead_lettered(self) -> None:
        step = Failing(2)
        rig = Rig(step=step, max_attempts=3)
        rig.process([rig.msg(0)])
        assert step.calls == 3
        assert rig.producer.produced == [] and rig.ok() == 1
        assert rig.sample("worker_logic_retries_total") == 2

    def test_over_the_budget_the_letter_carries_the_attempts(self) -> None:
        step = Failing(3)  # the first message's three attempts
        rig = Rig(step=step, max_attempts=3)
        rig.process([rig.msg(0), rig.msg(1)])
        [record] = rig.producer.acked
        headers = dict(record["headers"])
        assert (
            headers["x-dlq-attempts"] == b"3" and headers["x-dlq-stage"] == b"process"
        )
        assert rig.ok() == 1  # the second message passed on its first attempt
        assert rig.consumer.stored == [[("in", 0, 2)]]

    def test_one_attempt_means_no_retry(self) -> None:
        step = Failing(1)
        rig = Rig(step=step, max_attempts=1)
        rig.process([rig.msg(0)])
        assert dict(rig.producer.acked[0]["headers"])["x-dlq-attempts"] == b"1"
        assert rig.sample("worker_logic_retries_total") == 0

    def test_flaky_logic_fails_every_20th_first_attempt_only(self) -> None:
        rig = Rig(step="flaky", max_attempts=2)
        rig.process([rig.msg(i) for i in range(2 * FLAKY_EVERY)])
        assert rig.producer.produced == [] and rig.ok() == 2 * FLAKY_EVERY
        assert rig.sample("worker_logic_retries_total") == 2

    def test_flaky_logic_without_retries_dead_letters(self) -> None:
        step = Handler("medium", "flaky").step
        assert step is not None
        rig = Rig(step=step, max_attempts=1)
        rig.process([rig.msg(i) for i in range(FLAKY_EVERY)])
        assert len(rig.producer.acked) == 1


class TestLogLine:
    def test_the_failure_line_renders_as_json(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        root = logging.getLogger()
        saved = (list(root.handlers), root.level)
        configure_logging(
            "info", "json", cache=False
        )  # a cached logger would keep capsys's stream past this test
        try:
            rig, _clock = held_rig(Switch(NO_TOPIC))
            rig.process([rig.msg(3, partition=2, value=b"\xc1")])
        finally:
            structlog.reset_defaults()
            root.handlers, root.level = saved
        lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
        [line] = [x for x in lines if x["event"] == "delivery_failed"]
        assert line["rewound_to"] == ["2@3"] and line["paused"] == [2]
        assert "in.dlq" in line["error"]
