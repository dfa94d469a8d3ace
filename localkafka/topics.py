"""Topic administration for `codec-kafka topics` and the tests, on any cluster.

Built on `service.kafka.admin_topics.TopicAdmin`; this module adds what a local command wants:
a fail-fast probe, quiet or silent librdkafka logging, replication 1 (one broker)
and a partition count that must match an existing topic's.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, not in __all__
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from pydantic import BaseModel, Field

from schemas.errors import LocalKafkaError
from service.kafka import admin_topics as topics
from service.kafka.admin_topics import kafka_error_text
from service.kafka.broker_record import recorded_client_settings
from service.kafka.connection import KafkaConnection
from service.settings.sources import load

__all__ = [
    "CONNECT_TIMEOUT_S",
    "TopicAdmin",
    "admin_client",
    "create_topic",
    "delete_topic",
    "kafka_error_text",
]

CONNECT_TIMEOUT_S: Final = 8.0
"""How long a command waits for an unreachable broker: under the ~10 s after which
a user takes a silent command for hung, and long enough for librdkafka's first
reconnect attempts (100 ms backoff, doubling) to find a broker still starting."""

_QUIET: Final = {"log.connection.close": False, "log_level": 3}
"""librdkafka logs errors only, not every idle connection it closes."""
_SILENT: Final = {"log.connection.close": False, "log_level": 0}
"""For the command line: failures come back as exceptions and are reported once,
instead of librdkafka printing a line per refused connection (~20 a second)."""


Cluster = str | Mapping[str, Any]
"""A cluster: its bootstrap address, or librdkafka settings (a secured cluster's
`KafkaConnection.librdkafka(plaintext_secrets=True)`)."""


def _conf(cluster: Cluster, silent: bool) -> dict[str, Any]:
    given = {"bootstrap.servers": cluster} if isinstance(cluster, str) else cluster
    return {**(_SILENT if silent else _QUIET), **given}


def admin_client(bootstrap: Cluster, *, silent: bool = False) -> AdminClient:
    """Returns an AdminClient for ``bootstrap`` that logs errors only (or nothing).

    Keep it referenced until the futures of its requests have resolved: a dropped
    client fails them with "Handle is terminating".
    """
    return topics.admin_client(_conf(bootstrap, silent))


class TopicAdmin(topics.TopicAdmin):
    """Creates, deletes and lists the topics of one cluster through one AdminClient.

    Args:
        bootstrap: The cluster's bootstrap servers.
        connect_timeout: If set, check at once that a broker answers within this
            many seconds (a command's fail-fast probe).
        silent: Suppress librdkafka's own log lines (command-line use).

    Raises:
        LocalKafkaError: ``connect_timeout`` is set and no broker answered.
    """

    def __init__(
        self,
        bootstrap: Cluster,
        *,
        connect_timeout: float | None = None,
        silent: bool = False,
    ) -> None:
        super().__init__(_conf(bootstrap, silent))
        if connect_timeout is not None:
            reason = self.probe(connect_timeout)
            if reason is not None:
                raise LocalKafkaError(
                    f"no Kafka broker answers at {self.bootstrap} within "
                    f"{connect_timeout:g} s ({reason})"
                )

    def create(
        self,
        name: str,
        partitions: int,
        *,
        config: Mapping[str, str] | None = None,
        replication_factor: int = 1,
        timeout: float = 30.0,
    ) -> bool:
        """Creates a topic (replication 1); waits until every partition has a leader.

        An existing topic is accepted if it has ``partitions`` partitions (its
        configuration is left as it is).

        Returns:
            True if created, False if it existed already.

        Raises:
            LocalKafkaError: The topic exists with another partition count.
            KafkaException: The broker rejected the creation (name, config).
            TimeoutError: The partitions got no leader in time.
        """
        created = super().create(
            name,
            partitions,
            config=config,
            replication_factor=replication_factor,
            timeout=timeout,
        )
        if (got := self.partitions(name)) != partitions:
            raise LocalKafkaError(
                f"topic {name!r} has {got} partitions, not {partitions}"
            )
        return created

    def set_config(
        self, name: str, config: Mapping[str, str], *, timeout: float = 30.0
    ) -> None:
        """Sets topic settings on an existing topic (incremental: others are kept).

        Raises:
            KafkaException: The broker refused (unknown setting, bad value).
        """
        entries = [
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
            for key, value in config.items()
        ]
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        futures = self._admin.incremental_alter_configs([resource])
        futures[resource].result(timeout=timeout)


class _TopicsSettings(BaseModel):
    """`codec-kafka topics`' settings: the `[kafka]` connection only."""

    kafka: KafkaConnection = Field(default_factory=KafkaConnection)


def connection(
    bootstrap: str, recorded: Path | None, environ: Mapping[str, str]
) -> KafkaConnection:
    """The connection to `bootstrap`: the `KAFKA_*` settings of `environ`, under
    the client settings a secured broker recorded in data dir `recorded`.

    Raises:
        ConfigError: A bad setting (one line per problem).
    """
    kafka: dict[str, Any] = {"bootstrap_servers": bootstrap}
    if recorded is not None:
        kafka = {**recorded_client_settings(recorded.resolve()), **kafka}
    flags = {"kafka": kafka}
    return load(_TopicsSettings, "topics", flags=flags, environ=environ).kafka


def create_topic(
    bootstrap: Cluster,
    name: str,
    partitions: int,
    *,
    config: dict[str, str] | None = None,
    timeout: float = 30,
) -> None:
    """Creates a topic (replication 1); waits until every partition has a leader.

    An existing topic is accepted if it has ``partitions`` partitions.

    Raises:
        LocalKafkaError: The topic exists with another partition count.
        KafkaException: The broker rejected the creation.
        TimeoutError: The partitions got no leader in time.
    """
    TopicAdmin(bootstrap).create(name, partitions, config=config, timeout=timeout)


def delete_topic(bootstrap: Cluster, name: str, *, timeout: float = 30) -> None:
    """Deletes a topic (a missing one is fine); waits until its metadata is gone."""
    TopicAdmin(bootstrap).delete(name, timeout=timeout)
