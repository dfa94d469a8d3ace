"""A real single-node KRaft Apache Kafka broker, run locally from Maven-resolved jars."""

from localkafka.broker import (
    LocalKafka,
    broker_properties,
    new_cluster_id,
    wait_until_ready,
)
from localkafka.classpath import kafka_version, resolve_classpath
from localkafka.state import STATE_FILE, BrokerState, read_state
from localkafka.topics import TopicAdmin, create_topic, delete_topic
from schemas.errors import LocalKafkaError

__all__ = [
    "STATE_FILE",
    "BrokerState",
    "LocalKafka",
    "LocalKafkaError",
    "TopicAdmin",
    "broker_properties",
    "create_topic",
    "delete_topic",
    "kafka_version",
    "new_cluster_id",
    "read_state",
    "resolve_classpath",
    "wait_until_ready",
]
