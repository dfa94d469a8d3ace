"""A real single-node KRaft Apache Kafka broker, run locally from Maven-resolved jars."""

from localkafka.broker import (
    LocalKafka,
    broker_properties,
    create_topic,
    delete_topic,
    kafka_version,
    new_cluster_id,
    wait_until_ready,
)
from service.errors import LocalKafkaError

__all__ = [
    "LocalKafka",
    "LocalKafkaError",
    "broker_properties",
    "create_topic",
    "delete_topic",
    "kafka_version",
    "new_cluster_id",
    "wait_until_ready",
]
