"""`worker_group_lag_messages` against a real broker: the group's committed lag on
every partition, held by a live member or not (issue 31)."""

from __future__ import annotations

import contextlib
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from prometheus_client import CollectorRegistry

from localkafka import create_topic, delete_topic
from service.kafka.group_lag import GroupLag
from service.telemetry.metrics import Metrics


class TestGroupLag:
    """Log end minus the committed offset, per partition, from the broker."""

    def test_committed_partitions_get_their_backlog_others_none(
        self, kafka_bootstrap: str
    ) -> None:
        topic, group = f"group-lag-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
        create_topic(kafka_bootstrap, topic, 3)
        try:
            producer = Producer({"bootstrap.servers": kafka_bootstrap})
            for p in range(3):
                for _ in range(10):
                    producer.produce(topic, b"x", partition=p)
            assert producer.flush(15) == 0
            consumer = Consumer(
                {"bootstrap.servers": kafka_bootstrap, "group.id": group}
            )
            try:  # no member holds anything: a dead worker's partitions
                consumer.commit(
                    offsets=[TopicPartition(topic, 0, 10), TopicPartition(topic, 1, 4)],
                    asynchronous=False,
                )
            finally:
                consumer.close()
            registry = CollectorRegistry()
            lag = GroupLag(
                Metrics(registry, codec="msgspec-json", schema="medium"),
                {"bootstrap.servers": kafka_bootstrap},
                group,
                topic,
            )
            reader = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group})
            try:  # as the worker's thread reads: a client that never joins
                assert lag.read(reader) == {0: 0, 1: 6}
            finally:
                reader.close()
            value = registry.get_sample_value(
                "worker_group_lag_messages", {"topic": topic, "partition": "1"}
            )
            assert value == 6
            assert (
                registry.get_sample_value(
                    "worker_group_lag_messages", {"topic": topic, "partition": "2"}
                )
                is None
            )
        finally:
            with contextlib.suppress(KafkaException, TimeoutError):
                delete_topic(kafka_bootstrap, topic, timeout=15)
