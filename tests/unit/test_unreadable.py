"""Unreadable data in place of messages: dead-lettered, the partition moves past it,
and consumer errors are logged at most once per code every 30 s."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
import structlog
from confluent_kafka import KafkaError
from prometheus_client import CollectorRegistry

from schemas.errors import FatalError
from service.delivery.unreadable import ConsumerErrors
from service.kafka.batch_probe import BatchProbe, last_in_batch
from service.telemetry.log_setup import RateLimiter
from service.telemetry.metrics import Metrics
from tests.fakes import FakeMessage
from tests.unit.test_app import unfreeze  # noqa: F401 (a fixture)
from tests.unit.test_consumer import Rig

BAD = KafkaError(
    KafkaError._BAD_COMPRESSION,
    "Decompression (codec 0x4) of message at 3 of 2909 bytes failed",
)


def _error(code: KafkaError, partition: int = 0, offset: int = 3) -> FakeMessage:
    return FakeMessage(b"error text", partition, offset, _error=code)


class Clock:
    """A fake monotonic clock."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _layout_fetch(batches: list[tuple[int, int, bool]]) -> Any:
    """A fetch over a partition of (first, last, readable) batches, counting calls."""
    calls: list[int] = []

    def fetch(x: int) -> tuple[str, int]:
        calls.append(x)
        for first, last, readable in batches:
            if first <= x <= last:
                return ("message", x) if readable else ("error", first)
        return "end", -1

    return fetch, calls


class TestLastInBatch:
    """The probe's search finds an unreadable batch's last offset exactly."""

    @pytest.mark.parametrize(
        ("size", "after"),
        list(itertools.product([1, 2, 3, 7, 64, 1000], [0, 1, 5])),
    )
    def test_any_size_any_neighbours(self, size: int, after: int) -> None:
        first = 10
        batches = [(0, 9, True), (first, first + size - 1, False)]
        # readable or unreadable batches after it, or the end of the partition
        nxt = first + size
        for i in range(after):
            batches.append((nxt, nxt + i, i % 2 == 0))
            nxt += i + 1
        fetch, calls = _layout_fetch(batches)
        assert last_in_batch(fetch, first, first, nxt) == first + size - 1
        assert len(calls) <= 2 * max(1, size).bit_length() + 2

    def test_from_an_offset_inside_the_batch(self) -> None:
        fetch, _ = _layout_fetch([(5, 40, False), (41, 50, True)])
        assert last_in_batch(fetch, 5, 17, 51) == 40

    def test_a_fetch_that_does_not_answer_never_skips_readable_data(self) -> None:
        assert last_in_batch(lambda x: ("end", -1), 5, 5, 100) == 5


class FakeProbeConsumer:
    """A consumer over a scripted partition layout, as the probe uses one."""

    def __init__(self, batches: list[tuple[int, int, bool]], end: int) -> None:
        self.batches, self.end = batches, end
        self.config: dict[str, Any] = {}
        self.at = -1
        self.unassigned = 0

    def __call__(self, config: dict[str, Any]) -> FakeProbeConsumer:
        self.config = config
        return self

    def get_watermark_offsets(self, tp: Any, **_: Any) -> tuple[int, int]:
        return 0, self.end

    def assign(self, tps: list[Any]) -> None:
        self.at = tps[0].offset

    def consume(self, n: int, timeout: float) -> list[FakeMessage]:
        for first, last, readable in self.batches:
            if first <= self.at <= last:
                return [
                    FakeMessage(b"v", 0, self.at)
                    if readable
                    else FakeMessage(b"e", 0, first, _error=BAD)
                ]
        return []

    def unassign(self) -> None:
        self.unassigned += 1


class TestBatchProbe:
    """The probe asks a consumer of its own, one batch per fetch, never in the group."""

    def test_finds_the_last_offset(self) -> None:
        fake = FakeProbeConsumer([(0, 2, True), (3, 6, False), (7, 9, True)], 10)
        probe = BatchProbe(
            {"bootstrap.servers": "b:1", "group.id": "g", "on_commit": print}, fake
        )
        assert probe.last_offset("in", 0, 3, 3) == 6
        assert fake.config["group.id"] != "g"
        assert fake.config["max.partition.fetch.bytes"] == 1
        assert fake.config["enable.auto.commit"] is False
        assert "on_commit" not in fake.config
        assert fake.unassigned == 1


class TestConsumerErrors:
    """Counted, logged at most once per code every 30 s; unreadable data set aside."""

    def _errors(self) -> tuple[ConsumerErrors, Metrics, Clock]:
        clock = Clock()
        metrics = Metrics(CollectorRegistry(), codec="protobuf", schema="medium")
        return (
            ConsumerErrors(metrics, "protobuf", RateLimiter(30.0, clock)),
            metrics,
            clock,
        )

    def test_one_line_per_code_every_30_s(self) -> None:
        errors, metrics, clock = self._errors()
        transport = KafkaError(KafkaError._TRANSPORT)
        with structlog.testing.capture_logs() as logs:
            for _ in range(60):  # 2 a second for 30 s
                errors(_error(BAD))
                errors(_error(transport, -1, -1001))
                clock.now += 0.5
            errors(_error(BAD))
        lines = [
            (e["code"], e["others_since_last"])
            for e in logs
            if e["event"] == "consumer_error"
        ]
        assert lines == [
            ("_BAD_COMPRESSION", 0),
            ("_TRANSPORT", 0),
            ("_BAD_COMPRESSION", 59),
        ]
        assert metrics.consumer_errors.labels("_BAD_COMPRESSION")._value.get() == 61

    def test_unreadable_data_is_set_aside_once_per_batch(self) -> None:
        errors, _, _ = self._errors()
        first = errors(_error(BAD))
        assert first is not None
        assert (first.reason, first.start, first.last) == ("unreadable", 3, 3)
        assert errors(_error(BAD)) is None  # librdkafka repeated it in the batch
        errors.new_batch()
        assert errors(_error(BAD)) is not None

    @pytest.mark.parametrize(
        "code",
        [
            KafkaError._TRANSPORT,
            KafkaError.OFFSET_OUT_OF_RANGE,
            KafkaError.TOPIC_AUTHORIZATION_FAILED,
            KafkaError._AUTO_OFFSET_RESET,
        ],
    )
    def test_errors_about_the_cluster_are_never_skipped(self, code: int) -> None:
        errors, _, _ = self._errors()
        assert errors(_error(KafkaError(code))) is None

    def test_fatal_stops(self) -> None:
        errors, _, _ = self._errors()
        with pytest.raises(FatalError):
            errors(_error(KafkaError(KafkaError._FATAL, fatal=True), -1, -1001))


class TestLoop:
    """The loop dead-letters an unreadable range, then seeks and stores past it."""

    def _rig(self, **kwargs: Any) -> Rig:
        rig = Rig(step="noop", **kwargs)
        rig.loop._poison._probe = lambda topic, p, first, start: 6
        return rig

    def test_dead_lettered_then_skipped(self) -> None:
        rig = self._rig()
        rig.process([rig.msg(0), rig.msg(1), rig.msg(2), _error(BAD)])
        [letter] = rig.producer.acked
        headers = dict(letter["headers"])
        assert (letter["key"], letter["value"]) == (None, None)
        assert headers["x-dlq-reason"] == b"unreadable"
        assert headers["x-dlq-stage"] == b"fetch"
        assert headers["x-dlq-exception-type"] == (
            b"confluent_kafka.KafkaError._BAD_COMPRESSION"
        )
        assert (headers["x-dlq-partition"], headers["x-dlq-offset"]) == (b"0", b"3")
        assert headers["x-dlq-last-offset"] == b"6"
        assert rig.consumer.seeks == [(0, 7)]
        assert ("in", 0, 7) in [s for stored in rig.consumer.stored for s in stored]
        assert rig.events.index("ack:in.dlq") < rig.events.index("store")
        assert (
            rig.sample(
                "worker_dead_letters_total",
                codec="msgspec-msgpack",
                reason="unreadable",
            )
            == 1
        )

    def test_not_skipped_when_the_letter_is_not_written(self) -> None:
        down = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
        rig = self._rig(fail_with=lambda record: down)
        rig.process([_error(BAD)])
        assert rig.consumer.seeks == [(0, 3)]  # rewound to it, paused: read again
        assert rig.consumer.paused == {0}
        assert rig.consumer.stored == []

    def test_met_again_past_its_start_starts_there(self) -> None:
        rig = self._rig()
        rig.loop._poison._probe = None  # cannot be probed: one offset at a time
        rig.process([_error(BAD)])
        rig.process([_error(BAD)])  # the batch's error again: offset 4 is in it
        offsets = [dict(r["headers"])["x-dlq-offset"] for r in rig.producer.acked]
        assert offsets == [b"3", b"4"]
        assert rig.consumer.seeks == [(0, 4), (0, 5)]


class TestProducerSideLines:
    """Failed writes and commits: every one counted, one line per code every 30 s."""

    def test_delivery_failed(self) -> None:
        from service.delivery.gated_writes import WriteRefused
        from service.delivery.held_partitions import Hold
        from tests.fakes import FakeConsumer

        clock = Clock()
        metrics = Metrics(CollectorRegistry(), codec="protobuf", schema="medium")
        hold = Hold(FakeConsumer(), metrics, clock=clock)
        msgs = [FakeMessage(b"v", 0, 5)]
        with structlog.testing.capture_logs() as logs:
            for i in range(60):  # twice a second for 30 s, two codes
                hold.fail(msgs, WriteRefused("x", "_MSG_TIMED_OUT"))
                if i % 2:
                    hold.fail(msgs, WriteRefused("y", "UNKNOWN_TOPIC_OR_PART"))
                clock.now += 0.5
            hold.fail(msgs, WriteRefused("x", "_MSG_TIMED_OUT"))
        lines = [
            e["others_since_last"] for e in logs if e["event"] == "delivery_failed"
        ]
        assert lines == [0, 0, 59]
        assert metrics.delivery_failures._value.get() == 91

    def test_commit_failed(self) -> None:
        from service.telemetry.log_setup import KafkaErrors

        clock = Clock()
        errors = KafkaErrors("b:1", RateLimiter(30.0, clock))
        with structlog.testing.capture_logs() as logs:
            for _ in range(7):  # every auto-commit (5 s) for 35 s
                errors.commit_failed("REBALANCE_IN_PROGRESS", [0])
                clock.now += 5
        lines = [e["others_since_last"] for e in logs if e["event"] == "commit_failed"]
        assert lines == [0, 5]


class _FixedProbe:
    """A probe that says every unreadable batch ends at offset 6."""

    def __init__(self, *_: Any) -> None:
        pass

    def last_offset(self, topic: str, partition: int, first: int, start: int) -> int:
        return 6


@pytest.mark.usefixtures("unfreeze")
class TestAsyncPath:
    """`--logic` an async handler: the same letter, released in offset order."""

    def test_dead_lettered_then_skipped(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from tests.unit.test_app import Rig as WorkerRig, msg
        from tests.unit.test_async_worker import HANDLERS, run, stored

        monkeypatch.setattr("service.delivery.batch_writes.BatchProbe", _FixedProbe)
        rig = WorkerRig(logic=f"{HANDLERS}:touch")
        bad = FakeMessage(b"error text", 0, 3, _error=BAD, _topic="in")
        empty = msg(7, value=b"")
        assert run(rig, [[msg(0), msg(1), msg(2), bad], [empty, msg(8)]]) == 0
        reasons = [dict(r["headers"])["x-dlq-reason"] for r in rig.producer.acked]
        assert reasons == [b"unreadable", b"empty"]
        assert dict(rig.producer.acked[0]["headers"])["x-dlq-last-offset"] == b"6"
        assert (0, 7) in rig.consumer.seeks
        assert stored(rig) == {0: 9}

    def test_repeated_while_pending_is_one_letter(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """librdkafka repeats the error while the range's letter waits behind a
        handler, and another partition's messages are released meanwhile."""
        from tests.unit.test_app import Rig as WorkerRig, msg
        from tests.unit.test_async_worker import run

        monkeypatch.setattr("service.delivery.batch_writes.BatchProbe", _FixedProbe)
        rig = WORKER[:] = [WorkerRig(logic=f"{__name__}:held_at_first")]
        bad = FakeMessage(b"error text", 0, 1, _error=BAD, _topic="in")
        batches = [[msg(0), bad], [msg(1, partition=1)], [bad], [bad]]
        assert run(rig[0], batches, assign=(0, 1)) == 0
        acked = rig[0].producer.acked
        assert [dict(r["headers"])["x-dlq-reason"] for r in acked] == [b"unreadable"]


WORKER: list[Any] = []


async def held_at_first(order: Any) -> None:
    """The first order waits until every batch was consumed; the others go at once."""
    from tests.unit.test_app import PAYLOADS

    while order.event_id == PAYLOADS[0]["event_id"] and WORKER[0].consumer.batches:
        await asyncio.sleep(0.001)
