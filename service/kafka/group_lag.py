"""`worker_group_lag_messages`: the group's backlog on every partition, as the broker
sees it.

`worker_consumer_lag_messages` covers the partitions this worker holds, from its
own position. When a worker of the group dies (kill -9, OOM), its partitions belong
to nobody until the group's session timeout and the rebalance after it: tens of
seconds in which the backlog grows where no live member reports it, and Prometheus
drops the dead worker's series. So every worker also exports, for every partition of
its input topic, the log end minus the group's committed offset (an offset fetch and
a watermark query per committed partition, once a second, from a thread and a
consumer of its own that never joins the group: no round trip on the loop's thread). Readers take, per
partition, a live member's own gauge where there is one, else the largest of these
(`abrunner/staging/backlog.py`, the Prometheus lag alert). Partitions the group never
committed are not exported: their start depends on `auto.offset.reset`, and their
holder reports them.

Performance note: 1 + partitions small requests a second per worker, and the reading
consumer's librdkafka threads; nothing on the hot loop. Measured on an idle worker (6
partitions, two 60 s runs beside one without the thread, load average ~29 on 2
cores): 0.5-1.2 ms of CPU a second, i.e. 0.05-0.12 % of a core.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Final, Protocol

import structlog
from confluent_kafka import Consumer, KafkaException, TopicPartition

from service.kafka.admin_topics import kafka_error_text
from service.telemetry.log_setup import kafka_logger
from service.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)

INTERVAL_S: Final = 1.0
"""Between two reads: the shipped Prometheus scrapes every 1-15 s, and a crash's
backlog grows at the full traffic rate (2,500 messages a second in issue 31)."""
_TIMEOUT_S: Final = 5.0


def _reader(conf: Mapping[str, Any]) -> Consumer:
    """A consumer that never joins the group: it only asks for the group's committed
    offsets and the log ends. (AdminClient's `list_consumer_group_offsets` would be
    the natural call, but confluent-kafka 2.16 crashes the process with a
    segmentation fault when it is called before the broker has a group coordinator,
    as on a fresh broker.)"""
    return Consumer({**conf, "group.id": conf["group.id"], "enable.auto.commit": False})


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
        conf: connection settings (the worker's `admin_config`).
        group: the consumer group.
        topic: the input topic.
        client_factory: builds the reading client (tests pass a fake).
    """

    def __init__(
        self,
        metrics: Metrics,
        conf: Mapping[str, Any],
        group: str,
        topic: str,
        client_factory: Callable[[Mapping[str, Any]], Any] = _reader,
    ) -> None:
        self._gauge = metrics.group_lag
        self._conf, self._factory = dict(conf), client_factory
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
        client = self._factory(self._conf)
        try:
            while not self._stop.is_set():
                self.read(client)
                self._stop.wait(INTERVAL_S)
        finally:
            client.close()

    def read(self, client: Any) -> dict[int, int]:
        """One read: set each committed partition's gauge; return partition -> lag.
        A failure (broker away, no Describe permission) is logged once and the
        gauges keep their last values until a read succeeds."""
        try:
            meta = client.list_topics(self._topic, timeout=_TIMEOUT_S)
            count = len(meta.topics[self._topic].partitions)
            tps = [TopicPartition(self._topic, p) for p in range(count)]
            committed = {
                tp.partition: tp.offset
                for tp in client.committed(tps, timeout=_TIMEOUT_S)
                if tp.error is None and tp.offset >= 0
            }
            ends = {
                p: client.get_watermark_offsets(
                    TopicPartition(self._topic, p), timeout=_TIMEOUT_S
                )[1]
                for p in committed
            }
        except (KafkaException, KeyError, TimeoutError, TypeError) as exc:
            text = (
                kafka_error_text(exc) if isinstance(exc, KafkaException) else str(exc)
            )
            if text != self._failed:
                log.warning("group_lag_failed", group=self._group, error=text)
            self._failed = text
            return {}
        self._failed = None
        lags = {p: max(0, end - committed[p]) for p, end in ends.items() if end >= 0}
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
    group = settings.consumer.group_id
    conf = {
        **settings.admin_config(plaintext_secrets=True),
        "group.id": group,
        "logger": kafka_logger(),
    }
    return GroupLag(metrics, conf, group, settings.consumer.topic)
