"""Exactly-once on fakes: one transaction per batch, aborted and rewound on failure."""

from __future__ import annotations

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

    def _do(self, name: str) -> None:
        self.calls.append(name)
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
    def __init__(self, s: Settings) -> None:
        self.consumer = TxnConsumer()
        self.producer = TxnProducer()
        metrics = Metrics(CollectorRegistry(), codec=CODEC.name, schema="medium")
        writes = batch_writes(s, metrics, self.consumer, self.producer, lambda: False)
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
