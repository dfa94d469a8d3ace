"""The worker's wiring on fake Kafka clients: its callbacks, lag, health, whole runs."""

from __future__ import annotations

import gc
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from structlog.testing import capture_logs

from codec import get_codec
from loadgen.payloads import make_payloads
from schemas.errors import ConfigError
from service.app import _STALL_S, READY_STALL_S, Worker
from service.kafka import admin_topics
from service.kafka.headers import SENT_NS
from service.settings.worker import Settings
from service.telemetry.log_setup import cannot_reach, kafka_logger
from tests.fakes import FakeConsumer, FakeMessage, FakeProducer, FakeTopicPartition

TOPIC = "in"
DLQ = f"{TOPIC}.dlq"
CODEC = get_codec("msgspec-msgpack", "medium")
PAYLOADS = make_payloads("medium", 20, seed=7)


def make_settings(
    *,
    metrics: dict[str, Any] | None = None,
    topics: dict[str, Any] | None = None,
    **processing: Any,
) -> Settings:
    """The one place these tests spell settings; keywords override the processing
    section (and `metrics`, `topics` theirs)."""
    return Settings(
        consumer={"topic": TOPIC, "group_id": "g"},
        codec={"name": CODEC.name, "schema": "medium"},
        # Port 0: the control plane binds a free port. A 1 ms summary interval makes
        # the first tick log a summary line.
        metrics={
            "port": 0,
            "summary_interval_s": 0.001,
            "latency_sample_every": 1,
            **(metrics or {}),
        },
        processing={"batch_timeout_ms": 1.0, **processing},
        topics=topics or {},
    )


def msg(offset: int, partition: int = 0, value: bytes | None = None) -> FakeMessage:
    """A good medium order event (or `value`) at `partition`@`offset`."""
    if value is None:
        value = CODEC.encode(CODEC.from_builtins(PAYLOADS[offset % len(PAYLOADS)]))
    headers: list[tuple[str, bytes | None]] = [(SENT_NS, str(time.time_ns()).encode())]
    return FakeMessage(value, partition, offset, _headers=headers, _topic=TOPIC)


@dataclass
class FakeAdmin:
    """The start-up check's admin client: `topics` exist; the first `down` calls
    find no broker. Like the other fakes, it is its own factory."""

    topics: dict[str, int] = field(default_factory=lambda: {TOPIC: 2, DLQ: 1})
    down: int = 0
    on_call: Callable[[], None] | None = None
    created: list[tuple[str, int]] = field(default_factory=list)
    config: dict[str, Any] | None = None
    bootstrap: str = "fake:9092"
    limits: dict[str, int] = field(default_factory=dict)

    def __call__(self, config: dict[str, Any]) -> FakeAdmin:
        self.config = config
        return self

    def failure(self, exc: KafkaException) -> str:
        return "Connect to fake:9092 failed: Connection refused"

    def partitions(self, name: str, timeout: float = 5.0) -> int | None:
        if self.on_call is not None:
            self.on_call()
        if self.down:
            self.down -= 1
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        return self.topics.get(name)

    def max_message_bytes(self, name: str, timeout: float = 5.0) -> int | None:
        return self.limits.get(name)

    def create(self, name: str, partitions: int, **_options: Any) -> bool:
        self.created.append((name, partitions))
        self.topics[name] = partitions
        return True


class Rig:
    """A worker built with fake Kafka clients; consumer and producer share events."""

    def __init__(self, admin: FakeAdmin | None = None, **sections: Any) -> None:
        self.events: list[str] = []
        self.consumer = FakeConsumer(events=self.events)
        self.producer = FakeProducer(events=self.events)
        self.admin = admin or FakeAdmin()
        self.worker = Worker(
            make_settings(**sections),
            consumer_factory=self.consumer,
            producer_factory=self.producer,
            admin_factory=self.admin,
        )

    def sample(self, name: str, **labels: str) -> float | None:
        return self.worker.registry.get_sample_value(name, labels)

    def consumer_errors(self) -> dict[str, float]:
        """Every `worker_consumer_errors_total` series, by its `code` label."""
        return {
            sample.labels["code"]: sample.value
            for family in self.worker.registry.collect()
            if family.name == "worker_consumer_errors"
            for sample in family.samples
            if sample.name.endswith("_total")
        }

    def lag(self, partition: int) -> float | None:
        return self.sample(
            "worker_consumer_lag_messages", topic=TOPIC, partition=str(partition)
        )

    def assign(self, *partitions: int) -> None:
        self.worker._on_assign(self.consumer, tps(*partitions))


def tps(*partitions: int) -> list[TopicPartition]:
    return [TopicPartition(TOPIC, p) for p in partitions]


@pytest.fixture
def unfreeze() -> Iterator[None]:
    """`run()` freezes the heap for its lifetime; give the test process it back."""
    yield
    gc.unfreeze()


class TestRebalance:
    """Assignment creates each partition's lag series; revoke and loss remove them."""

    def test_assign_counts_partitions_and_creates_lag_series(self) -> None:
        rig = Rig()
        with capture_logs() as logs:
            rig.assign(2, 0)
        assert rig.sample("worker_assigned_partitions") == 2
        assert rig.lag(0) == 0 and rig.lag(2) == 0
        assert rig.lag(1) is None
        assert logs == [
            {"event": "partitions_assigned", "partitions": [0, 2], "log_level": "info"}
        ]

    def test_revoke_removes_only_the_revoked_series(self) -> None:
        rig = Rig()
        rig.assign(0, 1, 2)
        with capture_logs() as logs:
            rig.worker._on_revoke(rig.consumer, tps(1))
        assert rig.sample("worker_assigned_partitions") == 2
        assert rig.lag(1) is None
        assert rig.lag(0) == 0 and rig.lag(2) == 0
        assert rig.worker.assigned == {0, 2}
        assert logs == [
            {"event": "partitions_revoked", "partitions": [1], "log_level": "info"}
        ]

    def test_lost_removes_series_and_warns(self) -> None:
        rig = Rig()
        rig.assign(0, 1)
        with capture_logs() as logs:
            rig.worker._on_lost(rig.consumer, tps(0, 1))
        assert rig.sample("worker_assigned_partitions") == 0
        assert rig.lag(0) is None and rig.lag(1) is None
        assert logs == [
            {"event": "partitions_lost", "partitions": [0, 1], "log_level": "warning"}
        ]


class TestCommitCallback:
    """A failed commit is counted and logged; idle and successful commits are not."""

    def test_no_offset_is_ignored(self) -> None:
        rig = Rig()
        with capture_logs() as logs:
            rig.worker._on_commit(KafkaError(KafkaError._NO_OFFSET), tps(0))
        assert rig.consumer_errors() == {}
        assert logs == []

    def test_success_is_silent(self) -> None:
        rig = Rig()
        with capture_logs() as logs:
            rig.worker._on_commit(None, [FakeTopicPartition(TOPIC, 0, 10)])
        assert rig.consumer_errors() == {}
        assert logs == []

    def test_failed_commit_is_counted_with_its_code(self) -> None:
        rig = Rig()
        with capture_logs() as logs:
            rig.worker._on_commit(
                KafkaError(KafkaError.REBALANCE_IN_PROGRESS), tps(0, 1)
            )
            rig.worker._on_commit(KafkaError(KafkaError.REBALANCE_IN_PROGRESS), [])
        assert rig.consumer_errors() == {"commit:REBALANCE_IN_PROGRESS": 2}
        assert logs[0]["event"] == "commit_failed"
        assert logs[0]["code"] == "REBALANCE_IN_PROGRESS"
        assert logs[0]["log_level"] == "warning"

    def test_partition_error_is_counted(self) -> None:
        rig = Rig()
        failed = FakeTopicPartition(
            TOPIC, 3, 7, error=KafkaError(KafkaError.UNKNOWN_MEMBER_ID)
        )
        with capture_logs() as logs:
            rig.worker._on_commit(None, [FakeTopicPartition(TOPIC, 0, 5), failed])
        assert rig.consumer_errors() == {"commit:UNKNOWN_MEMBER_ID": 1}
        [entry] = logs
        assert entry["event"] == "commit_failed" and entry["partitions"] == [3]


class TestClientError:
    """Client errors are counted by code; a fatal one asks the loop to stop."""

    def test_transient_error_is_counted_and_does_not_stop(self) -> None:
        rig = Rig()
        with capture_logs() as logs:
            rig.worker._on_client_error(KafkaError(KafkaError._TRANSPORT))
        assert rig.consumer_errors() == {"_TRANSPORT": 1}
        assert not rig.worker.stopping
        [entry] = logs
        assert entry["event"] == "kafka_client_error"
        # One broker connection failing is routine (a restart): info, not warning.
        assert entry["code"] == "_TRANSPORT" and entry["log_level"] == "info"

    def test_repeated_errors_are_counted_but_logged_once(self) -> None:
        rig = Rig()
        with capture_logs() as logs:
            for _ in range(100):
                rig.worker._on_client_error(
                    KafkaError(KafkaError._MSG_TIMED_OUT, "timed out")
                )
        assert rig.consumer_errors() == {"_MSG_TIMED_OUT": 100}
        assert [e["event"] for e in logs] == ["kafka_client_error"]

    def test_all_brokers_down_says_kafka_cannot_be_reached_once(self) -> None:
        rig = Rig()
        refused = "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed"
        with capture_logs() as logs:
            rig.worker._on_client_error(KafkaError(KafkaError._TRANSPORT, refused))
            rig.worker._on_client_error(KafkaError(KafkaError._ALL_BROKERS_DOWN))
            for _ in range(50):  # librdkafka's reconnects, ~20 a second
                rig.worker._on_client_error(KafkaError(KafkaError._TRANSPORT, refused))
        unreachable = [e for e in logs if e["event"] == "kafka_unreachable"]
        assert len(unreachable) == 1
        bootstrap = rig.worker.settings.kafka.bootstrap_servers
        assert unreachable[0]["error"] == cannot_reach(bootstrap, refused)
        assert unreachable[0]["log_level"] == "error"
        assert len(logs) == 2  # and the first refused connection, at info

    def test_fatal_error_sets_the_stop_flag(self) -> None:
        rig = Rig()
        rig.worker._on_client_error(KafkaError(KafkaError._FENCED, fatal=True))
        assert rig.consumer_errors() == {"_FENCED": 1}
        assert rig.worker.stopping


class TestLag:
    """Lag is the high watermark minus the position, per assigned partition."""

    def test_lag_from_position_and_high_watermark(self) -> None:
        rig = Rig()
        rig.assign(0, 1, 2, 3)
        rig.worker.consumer = rig.consumer
        rig.consumer.positions = {0: 10, 1: 40, 3: 5}  # 2: nothing consumed yet
        rig.consumer.watermarks = {0: (0, 25), 1: (0, 40), 2: (0, 99)}  # 3: unknown
        # A previous tick's value stays while the watermark is unknown.
        rig.worker.metrics.consumer_lag.labels(TOPIC, "3").set(7)
        rig.worker._lag.update(rig.consumer)
        # 2 has a backlog before its first fetch: from its low watermark (no commit).
        assert [rig.lag(p) for p in range(4)] == [15, 0, 99, 7]

    def test_before_the_first_fetch_lag_starts_at_the_committed_offset(self) -> None:
        rig = Rig()
        rig.assign(0, 1)
        rig.consumer.positions = {}  # neither fetched yet
        rig.consumer.watermarks = {0: (5, 1000), 1: (0, 50)}
        rig.consumer.committed_offsets = {0: 400}
        rig.worker._lag.update(rig.consumer)
        assert [rig.lag(p) for p in range(2)] == [600, 50]
        assert rig.worker._lag.total == 650

    def test_an_idle_partition_is_not_asked_of_the_broker_every_second(self) -> None:
        """Nothing consumed from it (no position), but fetched: librdkafka's cached
        watermarks serve; only a partition never fetched costs a round trip."""
        rig = Rig()
        rig.assign(0, 1)
        rig.consumer.positions = {}
        rig.consumer.watermarks = {0: (0, 70), 1: (0, 20)}
        rig.consumer.committed_offsets = {0: 70, 1: 5}
        rig.consumer.unfetched = {1}
        rig.worker._lag.update(rig.consumer)
        assert [rig.lag(p) for p in range(2)] == [0, 15]
        assert rig.consumer.watermark_queries == [1]
        rig.consumer.unfetched = set()  # its first fetch response came
        rig.worker._lag.update(rig.consumer)
        rig.worker._lag.update(rig.consumer)
        assert rig.consumer.watermark_queries == [1]
        assert [rig.lag(p) for p in range(2)] == [0, 15]

    def test_partitions_added_and_not_yet_assigned_are_counted(self) -> None:
        """The member holding partition 0 reports the lag of partitions added since
        the last assignment, until a rebalance gives them owners."""
        rig = Rig()
        rig.assign(0, 1)
        rig.consumer.positions = {0: 10, 1: 10}
        rig.consumer.watermarks = {0: (0, 10), 1: (0, 10)}
        rig.consumer.partition_count = 2
        rig.worker._lag.update(rig.consumer)  # the count after the assignment: 2
        assert rig.worker._lag.total == 0
        rig.consumer.partition_count = 4  # two partitions added, written to
        rig.consumer.watermarks.update({2: (0, 30), 3: (0, 12)})
        rig.consumer.committed_offsets = {0: 10, 1: 10}
        rig.worker._lag._next_query = 0.0
        rig.worker._lag.update(rig.consumer)
        assert [rig.lag(p) for p in range(4)] == [0, 0, 30, 12]
        assert rig.worker._lag.total == 42
        rig.assign(0, 1, 2, 3)  # the rebalance: their owners report them now
        rig.consumer.positions.update({2: 30, 3: 12})
        rig.worker._lag.update(rig.consumer)
        assert rig.worker._lag.total == 0

    def test_added_partitions_count_from_their_start_with_latest(self) -> None:
        """With `latest`, a partition added mid-run is read from its beginning
        (`service.loop.partition_starts`), so all it holds is lag, even when the only committed
        offsets the gauge has seen are those of the start (none yet)."""
        rig = Rig()
        rig.worker._lag._reset = "latest"
        rig.assign(0, 1)
        rig.consumer.positions = {}  # the start: neither fetched, nothing committed
        rig.consumer.watermarks = {0: (0, 0), 1: (0, 0)}
        rig.consumer.partition_count = 2
        rig.worker._lag.update(rig.consumer)
        assert rig.worker._lag.total == 0
        rig.consumer.positions = {0: 10, 1: 10}  # reading, committing
        rig.consumer.watermarks = {0: (0, 10), 1: (0, 10)}
        rig.consumer.committed_offsets = {0: 10, 1: 10}
        rig.consumer.partition_count = 4  # two partitions added, written to
        rig.consumer.watermarks.update({2: (0, 30), 3: (0, 12)})
        rig.worker._lag._next_query = 0.0
        rig.worker._lag.update(rig.consumer)
        assert [rig.lag(p) for p in range(4)] == [0, 0, 30, 12]

    def test_without_partition_0_nothing_unassigned_is_reported(self) -> None:
        rig = Rig()
        rig.assign(1)
        rig.consumer.positions = {1: 10}
        rig.consumer.watermarks = {1: (0, 10), 2: (0, 30)}
        rig.consumer.partition_count = 2
        rig.worker._lag.update(rig.consumer)
        rig.consumer.partition_count = 3
        rig.worker._lag._next_query = 0.0
        rig.worker._lag.update(rig.consumer)
        assert rig.worker._lag.total == 0


class TestHealth:
    """/healthz is healthy only once the loop exists and while it comes round."""

    def test_unhealthy_before_the_loop_is_built(self) -> None:
        assert not Rig().worker._healthy()

    @pytest.mark.usefixtures("unfreeze")
    def test_unhealthy_once_the_heartbeat_is_stale(self) -> None:
        rig = Rig()
        rig.consumer.on_drained = rig.worker.stop
        assert rig.worker.run() == 0
        loop = rig.worker.loop
        assert loop is not None and rig.worker._healthy()
        loop.heartbeat = time.monotonic() - _STALL_S - 1
        assert not rig.worker._healthy()

    @pytest.mark.usefixtures("unfreeze")
    def test_unready_once_the_loop_stalls_a_few_seconds(self) -> None:
        """A loop waiting for acknowledgements makes /readyz 503 within seconds."""
        rig = Rig()
        rig.consumer.on_drained = rig.worker.stop
        assert rig.worker.run() == 0
        loop = rig.worker.loop
        assert loop is not None
        rig.worker.assigned = {0}
        loop.heartbeat = time.monotonic()
        assert rig.worker._ready() is None
        loop.heartbeat = time.monotonic() - READY_STALL_S - 1
        why = rig.worker._ready()
        assert why is not None and why.startswith("stalled:")


def http_status(port: int, path: str) -> int | str:
    """The control plane's answer to GET `path`, or the connection error's name."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError as exc:
        return type(exc).__name__


@pytest.mark.usefixtures("unfreeze")
class TestRun:
    """A whole run on scripted batches: processed, stored, closed, exit status."""

    def test_graceful_stop_after_the_script(self) -> None:
        rig = Rig()
        rig.consumer.to_assign = [0, 1]
        # Lag after batch 1: 10 - 10 = 0 and 9 - 5 = 4; batch 2 (partition 0 only)
        # leaves both where they are, however many ticks a slow machine runs.
        rig.consumer.watermarks = {0: (0, 10), 1: (0, 9)}
        rig.consumer.batches = [
            [*(msg(i) for i in range(10)), *(msg(i, partition=1) for i in range(5))],
            [msg(10, value=b"\xc1 not msgpack"), msg(11)],
        ]
        rig.consumer.on_drained = rig.worker.stop
        with capture_logs() as logs:
            assert rig.worker.run() == 0
        assert rig.consumer.subscribed == [TOPIC]
        worker = rig.worker
        assert worker._admin is None  # released once the start-up checks were done
        assert rig.consumer.rebalance == {
            "assign": worker._on_assign,
            "revoke": worker._on_revoke,
            "lost": worker._on_lost,
        }
        conf = rig.consumer.config
        assert conf is not None and conf["enable.auto.offset.store"] is False
        assert conf["error_cb"] == rig.worker._on_client_error
        assert conf["on_commit"] == rig.worker._on_commit
        assert rig.consumer.stored == [
            [(TOPIC, 0, 10), (TOPIC, 1, 5)],
            [(TOPIC, 0, 12)],
        ]
        assert rig.events == ["subscribe", "store", "ack:in.dlq", "store", "close"]
        assert [r["value"] for r in rig.producer.acked] == [b"\xc1 not msgpack"]
        assert rig.consumer.closed
        assert rig.sample("worker_assigned_partitions") == 2
        assert rig.lag(0) == 0 and rig.lag(1) == 4
        events = {e["event"]: e for e in logs}
        assert events["worker_summary"]["lag"] == 4
        assert events["worker_final"]["processed"] == 17
        assert "consumer_closed" in events
        ok = {"codec": CODEC.name, "outcome": "ok"}
        assert rig.sample("worker_messages_total", **ok) == 16

    def test_poison_with_fail_policy_exits_1_without_storing(self) -> None:
        rig = Rig(on_decode_error="fail")
        rig.consumer.to_assign = [0]
        rig.consumer.batches = [[msg(0)], [msg(1), msg(2, value=b"\xc1")], [msg(3)]]
        with capture_logs() as logs:
            assert rig.worker.run() == 1
        assert rig.consumer.stored == [[(TOPIC, 0, 1)]]
        assert len(rig.consumer.batches) == 1  # the batch after the poison: unread
        assert rig.consumer.closed
        assert rig.producer.config is None  # no dead letters, no output: no producer
        assert [e["event"] for e in logs if e["log_level"] == "error"] == [
            "worker_failed"
        ]

    def test_fatal_client_error_exits_1(self) -> None:
        rig = Rig()
        rig.consumer.to_assign = [0]
        rig.consumer.batches = [[msg(0)], [msg(1)]]

        def fatal() -> None:
            conf = rig.consumer.config
            assert conf is not None
            conf["error_cb"](KafkaError(KafkaError._FENCED, "fenced", fatal=True))

        rig.consumer.on_drained = fatal
        with capture_logs() as logs:
            assert rig.worker.run() == 1
        assert rig.consumer.stored == [[(TOPIC, 0, 1)], [(TOPIC, 0, 2)]]
        assert rig.consumer.closed
        failed = [e for e in logs if e["event"] == "worker_failed"]
        assert len(failed) == 1 and "fenced" in failed[0]["error"]
        assert "worker_final" not in {e["event"] for e in logs}

    def test_logged_metrics_port_serves_ready_and_healthy(self) -> None:
        rig = Rig()
        rig.consumer.to_assign = [0]
        rig.consumer.batches = [[msg(0)]]
        statuses: dict[str, int | str] = {}

        def probe() -> None:  # runs on the loop's thread, inside consume()
            started = next(e for e in logs if e["event"] == "worker_started")
            for path in ("/readyz", "/healthz"):
                statuses[path] = http_status(started["metrics_port"], path)
            rig.worker.stop()

        rig.consumer.on_drained = probe
        with capture_logs() as logs:
            assert rig.worker.run() == 0
        assert statuses == {"/readyz": 200, "/healthz": 200}

    def test_producer_settings_follow_the_processing_section(self) -> None:
        rig = Rig(delivery_timeout_s=2.5)
        rig.consumer.on_drained = rig.worker.stop
        assert rig.worker.run() == 0
        conf = rig.producer.config
        assert conf is not None and conf["message.timeout.ms"] == 2500
        assert conf["logger"] is kafka_logger()
        # The producer's client errors are counted apart from the consumer's.
        conf["error_cb"](KafkaError(KafkaError._TRANSPORT))
        assert rig.consumer_errors() == {"producer:_TRANSPORT": 1}

    @pytest.mark.parametrize(
        ("limit", "batch_size"), [(None, None), (1_048_588, None), (300_000, 298_976)]
    )
    def test_batches_stay_below_the_dlq_topics_limit(
        self, limit: int | None, batch_size: int | None
    ) -> None:
        admin = FakeAdmin()
        if limit is not None:
            admin.limits[DLQ] = limit
        rig = Rig(admin)
        rig.consumer.on_drained = rig.worker.stop
        assert rig.worker.run() == 0
        conf = rig.producer.config
        assert conf is not None and conf.get("batch.size") == batch_size
        # What the consumer can fetch, the producer can write, up to the largest
        # written topic's limit: a record over it is refused at once, not queued.
        fetch = (16 << 20) + 65_536
        assert conf["message.max.bytes"] == min(fetch, limit or fetch)

    def test_kafka_settings_rejected_by_the_client_are_a_config_error(self) -> None:
        def refuse(conf: dict[str, Any]) -> FakeConsumer:
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG, "no such key"))

        worker = Worker(
            make_settings(), consumer_factory=refuse, admin_factory=FakeAdmin()
        )
        with pytest.raises(ConfigError, match="config error: kafka: no such key"):
            worker.run()


@pytest.mark.usefixtures("unfreeze")
class TestStartup:
    """Before any consumer exists: the metrics port, then every topic the worker uses."""

    def test_a_missing_dlq_is_one_config_error_before_any_consumer(self) -> None:
        rig = Rig(FakeAdmin(topics={TOPIC: 2}))
        with pytest.raises(ConfigError) as info:
            rig.worker.run()
        message = str(info.value)
        assert "\n" not in message
        assert f"no topic '{DLQ}' (dead letters, --dlq-topic) on fake:9092" in message
        assert f"codec-kafka topics create {DLQ} --partitions 4" in message
        assert "--create-topics" in message
        assert rig.consumer.config is None and rig.producer.config is None

    def test_every_missing_topic_is_named_in_one_line(self) -> None:
        rig = Rig(FakeAdmin(topics={}), output_topic="out")
        with pytest.raises(ConfigError) as info:
            rig.worker.run()
        message = str(info.value)
        assert "\n" not in message
        assert f"'{TOPIC}' (input, --topic), '{DLQ}' (dead letters" in message
        assert "'out' (output, --output-topic)" in message
        assert f"topics create {TOPIC} {DLQ} out " in message

    def test_the_fail_policy_needs_no_dlq(self) -> None:
        rig = Rig(FakeAdmin(topics={TOPIC: 2}), on_decode_error="fail")
        rig.consumer.on_drained = rig.worker.stop
        assert rig.worker.run() == 0
        assert rig.consumer.subscribed == [TOPIC]

    def test_create_topics_creates_only_the_missing_ones(self) -> None:
        rig = Rig(
            FakeAdmin(topics={TOPIC: 2}),
            output_topic="out",
            topics={"create": True, "partitions": 3},
        )
        rig.consumer.on_drained = rig.worker.stop
        with capture_logs() as logs:
            assert rig.worker.run() == 0
        assert rig.admin.created == [(DLQ, 3), ("out", 3)]
        created = [
            (e["topic"], e["partitions"]) for e in logs if e["event"] == "topic_created"
        ]
        assert created == [(DLQ, 3), ("out", 3)]
        assert rig.consumer.subscribed == [TOPIC]

    def test_the_check_uses_the_connection_and_routes_client_logs(self) -> None:
        rig = Rig()
        rig.consumer.on_drained = rig.worker.stop
        assert rig.worker.run() == 0
        admin, consumer = rig.admin.config, rig.consumer.config
        assert admin is not None and consumer is not None
        assert admin["bootstrap.servers"] == consumer["bootstrap.servers"]
        assert admin["logger"] is consumer["logger"] is kafka_logger()

    def test_unreachable_kafka_is_said_once_then_the_worker_starts(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(admin_topics, "CONNECT_TIMEOUT_S", 0.0)  # report at once
        rig = Rig(FakeAdmin(down=3))
        rig.consumer.on_drained = rig.worker.stop
        with capture_logs() as logs:
            assert rig.worker.run() == 0
        events = [e["event"] for e in logs]
        assert events.count("kafka_unreachable") == 1
        assert events.index("kafka_unreachable") < events.index("kafka_reachable")
        [line] = [e for e in logs if e["event"] == "kafka_unreachable"]
        bootstrap = rig.worker.settings.kafka.bootstrap_servers
        assert line["error"] == cannot_reach(
            bootstrap, "Connect to fake:9092 failed: Connection refused"
        )
        assert rig.consumer.subscribed == [TOPIC]

    def test_a_worker_that_never_reached_kafka_gives_up_in_one_line(self) -> None:
        """No broker answers within `startup_timeout_s`: one `worker_failed` line
        naming the address, the reason, the setting to check and the timeout; exit 1
        (a worker that once reached Kafka retries for ever: librdkafka's own)."""
        rig = Rig(FakeAdmin(down=10**9), startup_timeout_s=0.2)
        with capture_logs() as logs:
            assert rig.worker.run() == 1
        [line] = [e for e in logs if e["event"] == "worker_failed"]
        refused = "Connect to fake:9092 failed: Connection refused"
        bootstrap = rig.worker.settings.kafka.bootstrap_servers
        assert line["error"] == (
            f"{cannot_reach(bootstrap, refused)}; no broker answered in 0.2 s "
            "(worker.processing.startup_timeout_s)"
        )
        assert rig.consumer.config is None

    def test_a_stop_while_waiting_for_kafka_exits_0_and_healthy_meanwhile(
        self,
    ) -> None:
        rig = Rig(FakeAdmin(down=10**9))
        health: list[bool] = []

        def stop() -> None:
            health.append(rig.worker._healthy())
            rig.worker.stop()

        rig.admin.on_call = stop
        assert rig.worker.run() == 0
        assert health == [True]  # alive and retrying: a restart would not help
        assert rig.consumer.config is None

    def test_a_metrics_port_in_use_is_a_config_error_before_kafka(self) -> None:
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            port = busy.getsockname()[1]
            rig = Rig(metrics={"port": port})
            with pytest.raises(ConfigError) as info:
                rig.worker.run()
        assert str(info.value) == (
            f"config error: cannot serve metrics on 127.0.0.1:{port}: the port is in "
            "use (another worker or load generator?): choose a free port, or 0 for "
            "any free one (--metrics-host/--metrics-port)"
        )
        assert rig.admin.config is None and rig.consumer.config is None


@pytest.mark.usefixtures("unfreeze")
class TestLatencySamples:
    """worker_e2e_latency_seconds is fed by real messages only."""

    def test_a_consumer_error_is_not_a_latency_sample(self) -> None:
        rig = Rig()
        rig.consumer.to_assign = [0]
        error = FakeMessage(
            None, 0, -1, _error=KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
        )
        rig.consumer.batches = [[msg(0), error, msg(1), error, msg(2)]]
        rig.consumer.on_drained = rig.worker.stop
        assert rig.worker.run() == 0
        count = rig.sample("worker_e2e_latency_seconds_count", codec=CODEC.name)
        assert count == 3
        assert rig.consumer_errors() == {"UNKNOWN_TOPIC_OR_PART": 2}
