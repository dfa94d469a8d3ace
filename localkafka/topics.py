"""Topic administration on any Kafka cluster: create, delete and list topics.

Every call waits until the change is visible in the cluster's metadata, so a
producer or consumer started right after it finds the topic (or does not).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any, Final

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from service.errors import LocalKafkaError

CONNECT_TIMEOUT_S: Final = 8.0
"""How long a command waits for an unreachable broker: under the ~10 s after which
a user takes a silent command for hung, and long enough for librdkafka's first
reconnect attempts (100 ms backoff, doubling) to find a broker still starting."""

_QUIET: Final = {"log.connection.close": False, "log_level": 3}
"""librdkafka logs errors only, not every idle connection it closes."""
_SILENT: Final = {"log.connection.close": False, "log_level": 0}
"""For the command line: failures come back as exceptions and are reported once,
instead of librdkafka printing a line per refused connection (~20 a second)."""
_METADATA_TIMEOUT_S: Final = 5.0


def admin_client(bootstrap: str, *, silent: bool = False) -> AdminClient:
    """Returns an AdminClient for ``bootstrap`` that logs errors only (or nothing).

    Keep it referenced until the futures of its requests have resolved: a dropped
    client fails them with "Handle is terminating".
    """
    return AdminClient(
        {"bootstrap.servers": bootstrap, **(_SILENT if silent else _QUIET)}
    )


class TopicAdmin:
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
        bootstrap: str,
        *,
        connect_timeout: float | None = None,
        silent: bool = False,
    ) -> None:
        self.bootstrap = bootstrap
        self._admin = admin_client(bootstrap, silent=silent)
        if connect_timeout is not None:
            try:
                self._admin.list_topics(timeout=connect_timeout)
            except KafkaException as exc:
                raise LocalKafkaError(
                    f"no Kafka broker answers at {bootstrap} within "
                    f"{connect_timeout:g} s ({kafka_error_text(exc)})"
                ) from None

    def create(
        self,
        name: str,
        partitions: int,
        *,
        config: Mapping[str, str] | None = None,
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
        topic = NewTopic(
            name, partitions, replication_factor=1, config=dict(config or {})
        )
        futures = self._admin.create_topics(
            [topic], request_timeout=timeout, operation_timeout=timeout
        )
        created = _succeeded(futures[name], timeout, KafkaError.TOPIC_ALREADY_EXISTS)

        def ready(meta: Any) -> bool:
            if meta is None or meta.error is not None or not meta.partitions:
                return False
            if (got := len(meta.partitions)) != partitions:
                raise LocalKafkaError(
                    f"topic {name!r} has {got} partitions, not {partitions}"
                )
            return all(
                p.leader >= 0 and p.error is None for p in meta.partitions.values()
            )

        self._wait(name, timeout, ready)
        return created

    def delete(self, name: str, *, timeout: float = 30.0) -> bool:
        """Deletes a topic; waits until its metadata is gone.

        Returns:
            True if deleted, False if there was no such topic.

        Raises:
            KafkaException: The broker refused the deletion.
            TimeoutError: The metadata still showed the topic after ``timeout``.
        """
        futures = self._admin.delete_topics(
            [name], request_timeout=timeout, operation_timeout=timeout
        )
        deleted = _succeeded(futures[name], timeout, KafkaError.UNKNOWN_TOPIC_OR_PART)
        self._wait(name, timeout, lambda meta: meta is None or meta.error is not None)
        return deleted

    def names(self, *, internal: bool = False) -> list[str]:
        """Returns the topic names, sorted.

        Args:
            internal: Include Kafka's own topics (``__consumer_offsets``...): the
                names starting with ``__``, which Kafka reserves for itself.
        """
        meta = self._admin.list_topics(timeout=_METADATA_TIMEOUT_S)
        return sorted(n for n in meta.topics if internal or not n.startswith("__"))

    def _wait(self, name: str, timeout: float, done: Callable[[Any], bool]) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(KafkaException):
                meta = self._admin.list_topics(topic=name, timeout=_METADATA_TIMEOUT_S)
                if done(meta.topics.get(name)):
                    return
            time.sleep(0.1)
        raise TimeoutError(f"topic {name!r} not settled after {timeout:.0f}s")


def _succeeded(future: Future[Any], timeout: float, harmless: int) -> bool:
    """Waits for an admin request; False if it failed only with the ``harmless`` code.

    Raises:
        KafkaException: It failed with any other code.
    """
    try:
        future.result(timeout=timeout)
    except KafkaException as exc:
        if exc.args[0].code() != harmless:
            raise
        return False
    return True


def kafka_error_text(exc: KafkaException) -> str:
    """Returns librdkafka's text for ``exc``, without the ``KafkaError{...}`` wrapper."""
    error = exc.args[0] if exc.args else None
    return error.str() if isinstance(error, KafkaError) else str(exc)


def create_topic(
    bootstrap: str,
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


def delete_topic(bootstrap: str, name: str, *, timeout: float = 30) -> None:
    """Deletes a topic (a missing one is fine); waits until its metadata is gone."""
    TopicAdmin(bootstrap).delete(name, timeout=timeout)
