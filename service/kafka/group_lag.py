"""`worker_group_lag_messages`: the group's backlog on every partition, as the broker
sees it.

`worker_consumer_lag_messages` covers the partitions this worker holds, from its
own position. When a worker of the group dies (kill -9, OOM), its partitions belong
to nobody until the group's session timeout and the rebalance after it: tens of
seconds in which the backlog grows where no live member reports it, and Prometheus
drops the dead worker's series. So every worker also exports, for every partition of
its input topic, the log end minus the group's committed offset (one
`ListConsumerGroupOffsets` and one `ListOffsets` request a second, from a thread and
an AdminClient of its own: no round trip on the loop's thread). Readers take, per
partition, a live member's own gauge where there is one, else the largest of these
(`abrunner/staging/backlog.py`, the Prometheus lag alert). Partitions the group never
committed are not exported: their start depends on `auto.offset.reset`, and their
holder reports them.

Performance note: two small admin requests a second per worker, and the
AdminClient's librdkafka threads; nothing on the hot loop.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Final, Protocol

import structlog
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]  # public, not in __all__

from service.kafka.admin_topics import admin_client, kafka_error_text
from service.telemetry.log_setup import kafka_logger
from service.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)

INTERVAL_S: Final = 1.0
"""Between two reads: the shipped Prometheus scrapes every 1-15 s, and a crash's
backlog grows at the full traffic rate (2,500 messages a second in issue 31)."""
_TIMEOUT_S: Final = 5.0


class GroupSettings(Protocol):
    """What `watch_group` reads of the worker's settings
    (`service.settings.worker.Settings`)."""

    @property
    def consumer(self) -> Any:
        """The consumer section: `group_id`, `topic`."""

    def admin_config(self, *, plaintext_secrets: bool = False) -> dict[str, Any]:
        """AdminClient settings."""


class GroupLag:
    """Exports the group's committed lag per partition, once a second, from a thread.

    Args:
        metrics: the worker's metrics (`group_lag`).
        conf: AdminClient settings (the worker's `admin_config`).
        group: the consumer group.
        topic: the input topic.
        admin_factory: builds the AdminClient (tests pass a fake).
    """

    def __init__(
        self,
        metrics: Metrics,
        conf: Mapping[str, Any],
        group: str,
        topic: str,
        admin_factory: Callable[[Mapping[str, Any]], Any] = admin_client,
    ) -> None:
        self._gauge = metrics.group_lag
        self._conf, self._factory = dict(conf), admin_factory
        self._group, self._topic = group, topic
        self._children: dict[int, Any] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failed: str | None = None

    def __enter__(self) -> GroupLag:
        self._thread = threading.Thread(target=self._run, name="group-lag", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=_TIMEOUT_S + 1)

    def _run(self) -> None:
        admin = self._factory(self._conf)  # referenced until its futures resolve
        while not self._stop.is_set():
            self.read(admin)
            self._stop.wait(INTERVAL_S)

    def read(self, admin: Any) -> dict[int, int]:
        """One read: set each committed partition's gauge; return partition -> lag.
        A failure (broker away, no Describe permission) is logged once and the
        gauges keep their last values until a read succeeds."""
        try:
            meta = admin.list_topics(self._topic, timeout=_TIMEOUT_S)
            count = len(meta.topics[self._topic].partitions)
            tps = [TopicPartition(self._topic, p) for p in range(count)]
            request = [ConsumerGroupTopicPartitions(self._group, tps)]
            answer = admin.list_consumer_group_offsets(request)[self._group]
            committed = {
                tp.partition: tp.offset
                for tp in answer.result(timeout=_TIMEOUT_S).topic_partitions
                if tp.error is None and tp.offset >= 0
            }
            if not committed:
                return {}
            wanted = {
                TopicPartition(self._topic, p): OffsetSpec.latest()  # type: ignore[no-untyped-call]  # untyped in confluent-kafka
                for p in committed
            }
            ends = {
                tp.partition: future.result(timeout=_TIMEOUT_S).offset
                for tp, future in admin.list_offsets(wanted).items()
            }
        except (KafkaException, KeyError, TimeoutError) as exc:
            text = (
                kafka_error_text(exc) if isinstance(exc, KafkaException) else str(exc)
            )
            if text != self._failed:
                log.warning("group_lag_failed", group=self._group, error=text)
            self._failed = text
            return {}
        self._failed = None
        lags = {
            p: max(0, ends[p] - offset) for p, offset in committed.items() if p in ends
        }
        for p, lag in lags.items():
            if (child := self._children.get(p)) is None:
                child = self._children[p] = self._gauge.labels(self._topic, str(p))
            child.set(lag)
        return lags


def watch_group(
    settings: GroupSettings, metrics: Metrics, *, real: bool
) -> contextlib.AbstractContextManager[Any]:
    """The worker's `GroupLag` (nothing when `real` is False: a fake cluster)."""
    if not real:
        return contextlib.nullcontext()
    conf = {**settings.admin_config(plaintext_secrets=True), "logger": kafka_logger()}
    return GroupLag(metrics, conf, settings.consumer.group_id, settings.consumer.topic)
