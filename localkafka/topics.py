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
from service.kafka.broker_record import read_state, recorded_client_settings
from service.kafka.connection import DEFAULT_BOOTSTRAP, KafkaConnection
from service.settings.sources import load

__all__ = [
    "CONNECT_TIMEOUT_S",
    "TopicAdmin",
    "admin_client",
    "cluster",
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
                    f"{connect_timeout:g} s ({reason}): check --bootstrap-servers "
                    "or KAFKA_BOOTSTRAP_SERVERS, and that the brokers run"
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


TOOL: Final = "topics"
"""`codec-kafka topics`' name in the settings system: no section of its own."""


class TopicsCommandSettings(BaseModel):
    """`codec-kafka topics`' settings: the `[kafka]` connection only."""

    kafka: KafkaConnection = Field(default_factory=KafkaConnection)


def cluster(
    *,
    flags: Mapping[str, Any],
    flag_names: Mapping[tuple[str, ...], str],
    config_file: Path | None,
    data_dir: Path,
    environ: Mapping[str, str],
) -> KafkaConnection:
    """The cluster `codec-kafka topics` talks to, and how, as every tool finds it.

    Precedence as everywhere: `[kafka]` of `config_file` < `KAFKA_*` of `environ` <
    `flags`. With no address in any of them, the broker `codec-kafka start`
    recorded in `data_dir`, if it runs, with the client settings it recorded under
    the given ones (a secured local broker), else 127.0.0.1:9092.

    Args:
        flags: The `[kafka]` flags given, nested (`{"kafka": {...}}`).
        flag_names: The flag of each settings path, named in errors.
        config_file: `--config FILE`.
        data_dir: `--data-dir`, where `start` records its broker.
        environ: The environment.

    Raises:
        ConfigError: A bad setting, one line per problem.
    """

    def loaded(base: Mapping[str, Any] | None, origin: str = "") -> KafkaConnection:
        return load(
            TopicsCommandSettings,
            TOOL,
            flags=flags,
            flag_names=flag_names,
            config_file=config_file,
            environ=environ,
            base=base,
            base_origin=origin,
        ).kafka

    given = loaded(None)
    if "bootstrap_servers" in given.model_fields_set:
        return given
    data_dir = data_dir.resolve()
    if (state := read_state(data_dir)) is None:
        return loaded({"kafka": {"bootstrap_servers": DEFAULT_BOOTSTRAP}})
    recorded = {
        **recorded_client_settings(data_dir),
        "bootstrap_servers": state["bootstrap"],
    }
    return loaded({"kafka": recorded}, state.get("client_config") or str(data_dir))


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
