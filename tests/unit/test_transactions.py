"""Exactly-once on fakes: one transaction per batch, aborted and rewound on failure."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from prometheus_client import CollectorRegistry

from codec import get_codec
from loadgen.payloads import make_payloads
from schemas.errors import FatalError
from service.delivery.batch_writes import batch_writes
from service.delivery.gated_writes import writer_config
from service.delivery.txn_calls import error_class
from service.logic.builtin import Handler
from service.loop.batch_loop import BatchLoop
from service.settings.worker import Settings
from service.telemetry.metrics import Metrics
from tests.fakes import FakeConsumer, FakeMessage, FakeProducer

BASICS = "tests.fixtures.handlers.basics"
CODEC = get_codec("msgspec-msgpack", "medium")
PAYLOADS = make_payloads("medium", 20, seed=5)
GIFTS = [i for i, p in enumerate(PAYLOADS) if p["gift"]]


@dataclass
class TxnProducer(FakeProducer):
    """A FakeProducer with librdkafka's transactional calls, recorded in order."""

    calls: list[str] = field(default_factory=list)
    fail_on: dict[str, KafkaError] = field(default_factory=dict)
    offsets: list[list[tuple[int, int]]] = field(default_factory=list)
    hang_on: str | None = None
    """A call that blocks until `release` is set (librdkafka #5456)."""
    release: threading.Event = field(default_factory=threading.Event)

    def _do(self, name: str) -> None:
        self.calls.append(name)
        if name == self.hang_on:
            self.hang_on = None
            self.release.wait()
        err = self.fail_on.pop(name, None)
        if err is not None:
            raise KafkaException(err)

    def init_transactions(self, timeout: float = -1) -> None:
        self._do("init")

    def begin_transaction(self) -> None:
        self._do("begin")

    def send_offsets_to_transaction(
        self, positions: list[TopicPartition], metadata: Any, timeout: float = -1
    ) -> None:
        assert metadata == "group-metadata"
        self.offsets.append([(tp.partition, tp.offset) for tp in positions])
        self._do("offsets")

    def commit_transaction(self, timeout: float = -1) -> None:
        self._do("commit")

    def abort_transaction(self, timeout: float = -1) -> None:
        self._do("abort")


class TxnConsumer(FakeConsumer):
    def consumer_group_metadata(self) -> str:
        return "group-metadata"


def settings(**processing: Any) -> Settings:
    return Settings(
        consumer={"topic": "in", "group_id": "g"},
        codec={"name": CODEC.name, "schema": "medium"},
        processing={
            "processing_guarantee": "exactly-once",
            "output_topic": "out",
            "logic": f"{BASICS}:refuse_gifts",
            "max_attempts": 1,
            **processing,
        },
    )


class Rig:
    def __init__(self, s: Settings, *, renew: bool = False) -> None:
        self.consumer = TxnConsumer()
        self.producer = TxnProducer()
        self.producers = [self.producer]
        metrics = Metrics(CollectorRegistry(), codec=CODEC.name, schema="medium")
        writes = batch_writes(
            s,
            metrics,
            self.consumer,
            self.producer,
            lambda: False,
            self._renew if renew else None,
        )
        assert writes.transactions is not None
        self.txn = writes.transactions
        self.txn._grace_s = 0.05  # a stuck call is given up at once
        p = s.processing
        handler = Handler("medium", p.logic)
        self.loop = BatchLoop(
            self.consumer,
            codec=CODEC,
            step=handler.step,
            results=handler.results,
            transactions=writes.transactions,
            metrics=metrics,
            poison=writes.poison,
            output=writes.output,
            max_payload_bytes=1 << 20,
            batch_size=100,
            batch_timeout_s=0.01,
        )
        self.loop.assign([TopicPartition("in", 0), TopicPartition("in", 1)])

    def _renew(self) -> TxnProducer:
        self.producers.append(TxnProducer())
        return self.producers[-1]

    def run(self, first: int, n: int, partition: int = 0) -> None:
        batch = [
            FakeMessage(
                CODEC.encode(CODEC.from_builtins(PAYLOADS[i % 20])),
                partition,
                i,
                _key=str(i).encode(),
                _topic="in",
            )
            for i in range(first, first + n)
        ]
        self.consumer.batches.append(batch)
        self.loop.process(self.consumer.consume(n))


class TestConfig:
    """Exactly-once turns auto-commit off, reads committed, and names its producer."""

    def test_clients(self) -> None:
        s = settings(index=3)
        consumer = s.consumer_config()
        assert consumer["enable.auto.commit"] is False
        assert consumer["isolation.level"] == "read_committed"
        conf = writer_config(s, None)
        assert conf["transactional.id"].startswith("g-") and conf[
            "transactional.id"
        ].endswith("-3")
        assert conf["transaction.timeout.ms"] > conf["message.timeout.ms"]
        chosen = writer_config(settings(transactional_id="w-a"), None)
        assert chosen["transactional.id"] == "w-a"

    def test_at_least_once_is_unchanged(self) -> None:
        s = settings(processing_guarantee="at-least-once")
        assert s.consumer_config()["enable.auto.commit"] is True
        assert "isolation.level" not in s.consumer_config()
        assert "transactional.id" not in writer_config(s, None)


class TestBatches:
    """Each batch: begin, results and dead letters, offsets, commit."""

    def test_one_transaction_per_batch(self) -> None:
        rig = Rig(settings())
        rig.run(0, 20)
        rig.run(20, 5, partition=1)
        assert rig.producer.calls == [
            "init",
            *("begin", "offsets", "commit"),
            *("begin", "offsets", "commit"),
        ]
        assert rig.producer.offsets == [[(0, 20)], [(0, 20), (1, 25)]]
        topics = [r["topic"] for r in rig.producer.acked[:20]]
        assert topics.count("out") == 20 - len(GIFTS)
        assert topics.count("in.dlq") == len(GIFTS)

    @pytest.mark.parametrize("where", ["offsets", "commit"])
    def test_a_failed_transaction_is_aborted_and_rewound(self, where: str) -> None:
        rig = Rig(settings())
        rig.producer.fail_on[where] = KafkaError(KafkaError._STATE, "no")
        rig.run(0, 10)
        assert rig.producer.calls[-1] == "abort"
        assert rig.loop.hold.held[0].offset == 0  # rewound to the batch's first
        assert rig.consumer.stored == []

    def test_a_fenced_producer_stops_the_worker(self) -> None:
        rig = Rig(settings())
        fenced = KafkaError(KafkaError._FENCED, "fenced", fatal=True)
        rig.producer.fail_on["commit"] = fenced
        with pytest.raises(FatalError, match="fenced"):
            rig.run(0, 10)


def _err(code: int, **kind: bool) -> KafkaError:
    return KafkaError(code, "injected", **kind)


class TestErrorClasses:
    """A failed transactional call is handled by librdkafka's class of its error:
    retriable is retried, txn_requires_abort aborts and rewinds to the batch's
    first offsets, fatal (not fenced) and a call that never returns get a new
    producer with the same transactional id and rewind to the committed offsets."""

    def test_the_classes(self) -> None:
        fatal = _err(KafkaError._FATAL, fatal=True, txn_requires_abort=True)
        assert error_class(fatal) == "fatal"
        both = _err(KafkaError._TIMED_OUT, retriable=True, txn_requires_abort=True)
        assert error_class(both) == "abort"
        assert error_class(_err(KafkaError._TIMED_OUT, retriable=True)) == "retry"
        assert error_class(_err(KafkaError._STATE)) == "abort"

    def test_retriable_is_retried(self) -> None:
        rig = Rig(settings(), renew=True)
        rig.producer.fail_on["commit"] = _err(KafkaError._TIMED_OUT, retriable=True)
        rig.run(0, 10)
        assert rig.producer.calls == ["init", "begin", "offsets", "commit", "commit"]
        assert not rig.loop.hold.active
        assert rig.txn.commits == 1

    def test_requires_abort_aborts_and_rewinds(self) -> None:
        rig = Rig(settings(), renew=True)
        rig.consumer.committed_offsets[0] = 0
        rig.producer.fail_on["offsets"] = _err(
            KafkaError.CONCURRENT_TRANSACTIONS, txn_requires_abort=True
        )
        rig.run(0, 10)
        assert rig.producer.calls[-1] == "abort"
        assert len(rig.producers) == 1
        assert rig.loop.hold.held[0].offset == 0
        rig.run(10, 5, partition=1)  # the next batch's transaction goes through
        assert rig.producer.calls[-3:] == ["begin", "offsets", "commit"]

    @pytest.mark.parametrize("where", ["offsets", "commit"])
    def test_fatal_gets_a_new_producer_and_rewinds_to_committed(
        self, where: str
    ) -> None:
        rig = Rig(settings(), renew=True)
        rig.run(0, 10)
        fatal = _err(KafkaError.INVALID_TXN_STATE, fatal=True)
        rig.producer.fail_on[where] = fatal
        # The group coordinator says whether the transaction got through: here
        # it did (a commit that failed after the coordinator wrote it).
        rig.consumer.committed_offsets[0] = 15
        rig.run(10, 5)
        assert len(rig.producers) == 2
        new = rig.producers[1]
        assert new.calls == ["init"]  # fences the old one
        assert rig.loop.hold.held[0].offset == 15  # not 10: no duplicate
        rig.loop.hold.due()  # (its back-off is not waited for here)
        rig.run(15, 5, partition=1)  # resumed through the new producer
        assert new.calls == ["init", "begin", "offsets", "commit"]
        assert [r["topic"] for r in new.acked].count("out") + [
            r["topic"] for r in new.acked
        ].count("in.dlq") == 5

    def test_a_stuck_call_gets_a_new_producer(self) -> None:
        rig = Rig(settings(delivery_timeout_s=0.05), renew=True)
        rig.consumer.committed_offsets[0] = 0
        rig.producer.hang_on = "offsets"
        try:
            rig.run(0, 10)
            assert rig.txn.stuck == 1
            assert len(rig.producers) == 2
            assert rig.producers[1].calls == ["init"]
            assert rig.loop.hold.held[0].offset == 0
            rig.run(0, 10, partition=1)
            assert rig.producers[1].calls[-3:] == ["begin", "offsets", "commit"]
        finally:
            rig.producer.release.set()

    def test_without_renew_a_stuck_call_stops_the_worker(self) -> None:
        rig = Rig(settings(delivery_timeout_s=0.05))
        rig.producer.hang_on = "commit"
        try:
            with pytest.raises(FatalError, match="did not return"):
                rig.run(0, 10)
        finally:
            rig.producer.release.set()

    def test_a_failed_begin_aborts_then_begins(self) -> None:
        rig = Rig(settings(), renew=True)
        rig.producer.fail_on["begin"] = _err(KafkaError._STATE)
        rig.run(0, 10)
        assert rig.producer.calls == [
            *("init", "begin", "abort"),
            *("begin", "offsets", "commit"),
        ]

    def test_new_producers_that_never_commit_stop_the_worker(self) -> None:
        rig = Rig(settings(), renew=True)
        fatal = _err(KafkaError._FATAL, fatal=True)

        def broken() -> TxnProducer:
            p = TxnProducer(fail_on={"begin": fatal})
            rig.producers.append(p)
            return p

        rig.txn._renew = broken
        rig.producer.fail_on["begin"] = fatal
        with pytest.raises(FatalError, match="made no commit"):
            rig.run(0, 10)


class TestAb:
    """codec-ab runs its workers under either guarantee and says which."""

    def test_the_workers_get_the_flag_and_the_report_says_so(self) -> None:
        from abrunner import cli as ab_cli
        from abrunner.config import AbSettings
        from abrunner.report.logic_verdicts import section
        from abrunner.report.tables import aggregate, environment
        from abrunner.results import Report

        s = AbSettings(codecs=["protobuf"], processing_guarantee="exactly-once")
        plan = ab_cli.plan_from_settings(s)
        assert plan.worker_args == ("--processing-guarantee", "exactly-once")
        report = Report(
            plan=plan,
            environment=environment("4.1.2"),
            results=[],
            summary=aggregate([], []),
        )
        assert "**exactly-once**" in (section(report) or "")
        default = ab_cli.plan_from_settings(AbSettings(codecs=["protobuf"]))
        assert default.worker_args == ()


class TestLostWhileHeld:
    """A partition held after an aborted transaction and then lost comes back
    unpaused when the group gives it back (librdkafka keeps pauses)."""

    def test_forgotten_partitions_are_resumed(self) -> None:
        rig = Rig(settings())
        rig.producer.fail_on["offsets"] = KafkaError(KafkaError._STATE, "no")
        rig.run(0, 10)
        assert rig.consumer.paused == {0}
        rig.loop.revoke([0])
        assert rig.consumer.paused == set()
        assert not rig.loop.hold.active


class TestShutdownFlush:
    """A transactional producer in a fatal state cannot flush: the shutdown says so
    and goes on (the worker exits 1 already), with no traceback."""

    def test_a_fatal_producer(self) -> None:
        from service.loop.shutdown_budget import Shutdown

        class Fatal(TxnProducer):
            def flush(self, timeout: float = -1) -> int:
                raise KafkaException(KafkaError(KafkaError.INVALID_TXN_STATE, "x"))

        Shutdown(1.0).flush(Fatal())
