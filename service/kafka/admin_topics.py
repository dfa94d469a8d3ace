"""Topics on any cluster through one AdminClient: exists, create, delete, list.

Every tool goes through `TopicAdmin`: the worker checks (or creates) its input,
dead-letter and output topics at start-up, the load generator its topic, and
`codec-kafka topics` builds on it. A creation waits until every partition has a
leader, so a client started right after it finds the topic ready. The AdminClient
lives as long as its `TopicAdmin`: a dropped client fails the futures of its
requests with "Handle is terminating".
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, Final, Protocol

import structlog
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, not in __all__
    AdminClient,
    ConfigResource,
    ResourceType,
)
from confluent_kafka.cimpl import NewTopic

from schemas.errors import ConfigError
from service.kafka.topic_hint import missing_topics_text
from service.telemetry.log_setup import KafkaErrors, cannot_reach

log = structlog.get_logger(__name__)

CONNECT_TIMEOUT_S: Final = 5.0
"""How long a tool waits for a broker before it says it cannot reach Kafka: long
enough for librdkafka's first reconnects (100 ms backoff, doubling) to find a broker
that is still starting (the local one takes ~5 s), short enough that the error comes
in the first few seconds rather than after a silence taken for a hang."""

_METADATA_TIMEOUT_S: Final = 5.0

_NO_AUTO_CREATE: Final = {"allow.auto.create.topics": False}
"""An AdminClient is a producer inside librdkafka, and a producer's metadata request
may create the topic it asks about on brokers with `auto.create.topics.enable`: a
check must never create a topic (a typo would become one)."""


def admin_client(conf: Mapping[str, Any]) -> AdminClient:
    """An AdminClient from librdkafka settings that never auto-creates topics.

    Keep it referenced until the futures of its requests have resolved.
    """
    return AdminClient({**conf, **_NO_AUTO_CREATE})


def kafka_error_text(exc: KafkaException) -> str:
    """librdkafka's text for `exc`, without the `KafkaError{...}` wrapper."""
    error = exc.args[0] if exc.args else None
    return error.str() if isinstance(error, KafkaError) else str(exc)


class TopicAdmin:
    """Creates, deletes, lists and inspects the topics of one cluster.

    Args:
        conf: librdkafka settings (at least `bootstrap.servers`); an `error_cb` in
            them is called as well as the one that keeps `last_error`.
    """

    def __init__(self, conf: Mapping[str, Any]) -> None:
        self.bootstrap = str(conf.get("bootstrap.servers", ""))
        # The callback must not refer back to this object: a cycle would keep the
        # client (its threads, its connections) alive until a full collection,
        # and after the worker's gc.freeze() for ever.
        self._errors = _LastError(conf.get("error_cb"))
        self._admin = admin_client({**conf, "error_cb": self._errors})

    @property
    def last_error(self) -> str | None:
        """The text of the last error librdkafka reported (why a broker is not
        reachable, typically), served by `poll` after a request fails."""
        return self._errors.text

    def probe(self, timeout: float) -> str | None:
        """None once a broker answers within `timeout` seconds, else why not."""
        try:
            self._admin.list_topics(timeout=timeout)
        except KafkaException as exc:
            return self.failure(exc)
        return None

    def failure(self, exc: KafkaException) -> str:
        """Why a request failed: librdkafka's last reported error, else `exc`'s text.

        "Failed to get metadata: Local: Broker transport failure" says less than the
        connection error behind it ("Connect to ipv4#127.0.0.1:1 failed: Connection
        refused"), which librdkafka hands to `error_cb` on the next `poll`.
        """
        self._admin.poll(0)
        return self.last_error or kafka_error_text(exc)

    def max_message_bytes(
        self, name: str, timeout: float = _METADATA_TIMEOUT_S
    ) -> int | None:
        """The topic's `max.message.bytes` (the largest record batch it takes), or
        None if it cannot be read (no such topic, not authorized, no broker)."""
        resource = ConfigResource(ResourceType.TOPIC, name)
        try:
            future = self._admin.describe_configs([resource])[resource]
            entry = future.result(timeout=timeout).get("max.message.bytes")
        except (KafkaException, TimeoutError, ValueError):
            return None
        return None if entry is None or entry.value is None else int(entry.value)

    def partitions(self, name: str, timeout: float = _METADATA_TIMEOUT_S) -> int | None:
        """The topic's partition count, or None if there is no such topic.

        Raises:
            KafkaException: No broker answered within `timeout` seconds.
            ConfigError: The cluster refused to describe the topic (authorization).
        """
        meta = self._admin.list_topics(topic=name, timeout=timeout).topics.get(name)
        if meta is None:
            return None
        err = meta.error
        if err is None or err.code() == KafkaError.LEADER_NOT_AVAILABLE:
            return len(meta.partitions)
        if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return None
        raise ConfigError(
            f"config error: topic {name!r} on {self.bootstrap}: {err.name()}: "
            f"{err.str()}"
        )

    def create(
        self,
        name: str,
        partitions: int,
        *,
        config: Mapping[str, str] | None = None,
        replication_factor: int = -1,
        timeout: float = 30.0,
    ) -> bool:
        """Creates a topic; waits until every partition has a leader.

        An existing topic is accepted as it is (partitions and configuration).

        Args:
            name: The topic.
            partitions: Its partition count.
            config: Topic settings (`retention.ms`...).
            replication_factor: -1: the cluster's `default.replication.factor`.
            timeout: Seconds for the request and again for the leaders.

        Returns:
            True if created, False if it existed already.

        Raises:
            KafkaException: The broker rejected the creation (name, config, ACLs).
            TimeoutError: The partitions got no leader in time.
        """
        topic = NewTopic(
            name,
            partitions,
            replication_factor=replication_factor,
            config=dict(config or {}),
        )
        futures = self._admin.create_topics(
            [topic], request_timeout=timeout, operation_timeout=timeout
        )
        created = self._answer(
            f"create topic {name!r}",
            futures[name],
            timeout,
            KafkaError.TOPIC_ALREADY_EXISTS,
        )

        def led(meta: Any) -> bool:
            if meta is None or meta.error is not None or not meta.partitions:
                return False
            return all(
                p.leader >= 0 and p.error is None for p in meta.partitions.values()
            )

        self._wait(name, timeout, led)
        return created

    def delete(self, name: str, *, timeout: float = 30.0) -> bool:
        """Deletes a topic; waits until its metadata is gone.

        Returns:
            True if deleted, False if there was no such topic.

        Raises:
            KafkaException: The broker refused the deletion.
            TimeoutError: The metadata still showed the topic after `timeout`.
        """
        futures = self._admin.delete_topics(
            [name], request_timeout=timeout, operation_timeout=timeout
        )
        deleted = self._answer(
            f"delete topic {name!r}",
            futures[name],
            timeout,
            KafkaError.UNKNOWN_TOPIC_OR_PART,
        )
        self._wait(name, timeout, lambda meta: meta is None or meta.error is not None)
        return deleted

    def names(self, *, internal: bool = False) -> list[str]:
        """The topic names, sorted.

        Args:
            internal: Include Kafka's own topics (`__consumer_offsets`...): the
                names starting with `__`, which Kafka reserves for itself.
        """
        meta = self._admin.list_topics(timeout=_METADATA_TIMEOUT_S)
        return sorted(n for n in meta.topics if internal or not n.startswith("__"))

    def _answer(
        self, what: str, future: Future[Any], timeout: float, harmless: int
    ) -> bool:
        """`_succeeded`, with a timeout that says what was asked of whom and why
        no answer came (the future's own TimeoutError says nothing)."""
        try:
            return _succeeded(future, timeout, harmless)
        except TimeoutError:
            self._admin.poll(0)  # serve the error callback: the last error
            why = f": {self.last_error}" if self.last_error else ""
            raise TimeoutError(
                f"no answer from Kafka at {self.bootstrap} to {what} within "
                f"{timeout:g} s{why}"
            ) from None

    def _wait(self, name: str, timeout: float, done: Callable[[Any], bool]) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(KafkaException):
                meta = self._admin.list_topics(topic=name, timeout=_METADATA_TIMEOUT_S)
                if done(meta.topics.get(name)):
                    return
            self._admin.poll(0)  # serve the client's log lines and error callbacks
            time.sleep(0.1)
        raise TimeoutError(f"topic {name!r} not settled after {timeout:.0f}s")


class _LastError:
    """An `error_cb` keeping the last error's text, then calling `chained`."""

    def __init__(self, chained: Callable[[KafkaError], None] | None) -> None:
        self.text: str | None = None
        self._chained = chained

    def __call__(self, err: KafkaError) -> None:
        self.text = err.str()
        if self._chained is not None:
            self._chained(err)


def _succeeded(future: Future[Any], timeout: float, harmless: int) -> bool:
    """Waits for an admin request; False if it failed only with the `harmless` code.

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


class Topics(Protocol):
    """What `ensure_topics` needs of a `TopicAdmin` (tests pass a fake)."""

    bootstrap: str

    def failure(self, exc: KafkaException) -> str: ...
    def partitions(self, name: str, timeout: float = ...) -> int | None: ...
    def create(
        self,
        name: str,
        partitions: int,
        *,
        config: Mapping[str, str] | None = ...,
        replication_factor: int = ...,
        timeout: float = ...,
    ) -> bool: ...
    def max_message_bytes(self, name: str, timeout: float = ...) -> int | None: ...


def ensure_topics(
    admin: Topics,
    roles: Mapping[str, str],
    *,
    create: bool,
    partitions: int,
    timeout: float = CONNECT_TIMEOUT_S,
    connect: Sequence[str] | None = None,
) -> dict[str, int]:
    """Check that each topic exists; with `create`, create the missing ones.

    Args:
        admin: The cluster's topics.
        roles: Each topic with what it is for, named in errors (`"input, --topic"`).
        create: Create missing topics (`--create-topics`) instead of failing.
        partitions: The partition count of a created topic.
        timeout: Seconds to wait for the cluster's first answer.
        connect: How the tool was told the cluster (`KafkaConnection.arguments`),
            repeated in the `codec-kafka topics create` a missing topic's error
            prints, so that it runs as printed; None: `--bootstrap-servers` alone.

    Returns:
        Each topic's partition count.

    Raises:
        KafkaException: No broker answered within `timeout` seconds.
        ConfigError: A topic is missing (and not to be created), or the cluster
            refused to describe or create it; one line naming it and the fix.
        TimeoutError: A created topic's partitions got no leader in time.
    """
    found = {name: admin.partitions(name, timeout) for name in roles}
    missing = [name for name, count in found.items() if count is None]
    if missing and not create:
        where = ["--bootstrap-servers", admin.bootstrap] if connect is None else connect
        raise ConfigError(
            missing_topics_text(admin.bootstrap, missing, roles, partitions, where)
        )
    counts = {name: count for name, count in found.items() if count is not None}
    for name in missing:
        try:
            made = admin.create(name, partitions)
        except KafkaException as exc:
            raise ConfigError(
                f"config error: cannot create topic {name!r} ({roles[name]}) on "
                f"{admin.bootstrap}: {kafka_error_text(exc)}"
            ) from None
        counts[name] = admin.partitions(name) or partitions
        if made:
            log.info("topic_created", topic=name, partitions=counts[name])
    return counts


PROBE_S: Final = 1.0
"""Each metadata request of `await_topics` waits this long, so a stop asked for
while Kafka is unreachable is honoured within a second."""


def await_topics(
    admin: Topics,
    roles: Mapping[str, str],
    *,
    create: bool,
    partitions: int,
    errors: KafkaErrors,
    stopped: Callable[[], bool],
    connect: Sequence[str] | None = None,
    give_up_s: float = 0.0,
) -> bool:
    """`ensure_topics`, retried while no broker answers (a service's start).

    An unanswered cluster is reported through `errors` once `CONNECT_TIMEOUT_S`
    has passed (a broker still starting is given that long), then every
    `REMIND_S` seconds; after `give_up_s` (0: never) it is a TimeoutError whose
    text is the one line. `connect` is as for `ensure_topics`.

    Returns:
        True once every topic is there; False if `stopped()` came first.

    Raises:
        ConfigError: as `ensure_topics`.
        TimeoutError: as `ensure_topics`.
    """
    started = time.monotonic()
    while not stopped():
        try:
            ensure_topics(
                admin,
                roles,
                create=create,
                partitions=partitions,
                timeout=PROBE_S,
                connect=connect,
            )
        except KafkaException as exc:
            waited = time.monotonic() - started
            if give_up_s and waited >= give_up_s:
                raise TimeoutError(
                    f"{cannot_reach(errors.bootstrap, admin.failure(exc))}; no broker "
                    f"answered in {give_up_s:g} s (worker.processing.startup_timeout_s)"
                ) from None
            if waited >= CONNECT_TIMEOUT_S:
                errors.unreachable(admin.failure(exc))
            continue
        errors.reachable()
        return True
    return False
