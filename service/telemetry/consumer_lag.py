"""`worker_consumer_lag_messages`: per assigned partition, from the first second.

Once a partition has been fetched, its lag is the cached high watermark minus the
consumer's position (no network call). Before its first fetch the position is
unknown (librdkafka reports -1001), so a newly assigned partition, or one that
nothing was written to since, would read 0 while a backlog waits: for those
partitions the lag is computed from the group's committed offset (asked once;
with none, the low or high watermark that `auto.offset.reset` starts from) and the
watermarks librdkafka caches from its fetch responses, which it has for every
partition it fetches, empty or not. Only a partition not fetched yet needs a
watermark query (a round trip, on the loop's thread): at most once a second, and
only until its first fetch response, so an idle partition does not stall the loop
every second.

Partitions added to the topic belong to no member until the rebalance that their
discovery triggers (`topic.metadata.refresh.interval.ms`, 10 s, plus the
rebalance): the member that holds partition 0, one per group, reports their lag
too, from a metadata query every `_UNOWNED_EVERY_S`, so a backlog on them shows
instead of a lag of 0.
"""

from __future__ import annotations

import time
from typing import Any, Final

from confluent_kafka import KafkaException, TopicPartition

from service.telemetry.metrics import Metrics

_QUERY_TIMEOUT_S: Final = 1.0
_UNOWNED_EVERY_S: Final = 5.0


class LagGauges:
    """The lag gauge's children for the assigned partitions, and their sum.

    Args:
        metrics: the worker's metrics.
        topic: the input topic.
        offset_reset: the consumer's `auto.offset.reset` (where a partition
            without a committed offset starts).
    """

    def __init__(self, metrics: Metrics, topic: str, offset_reset: str) -> None:
        self._m = metrics
        self._topic = topic
        self._reset = offset_reset
        self._children: dict[int, Any] = {}
        self._committed: dict[int, int] = {}
        self._baseline: int | None = None
        """The topic's partition count after the last assignment: any above it
        are new and not yet assigned to any member."""
        self._unowned: list[int] = []
        self._next_query = 0.0
        self.total = 0

    def assign(self, partitions: list[int]) -> None:
        """Start gauges for newly assigned partitions."""
        self._drop_unowned()
        self._baseline, self._next_query = None, 0.0
        for p in partitions:
            self._children[p] = self._m.consumer_lag.labels(self._topic, str(p))

    def forget(self, partitions: list[int]) -> None:
        """Drop the gauges of revoked or lost partitions."""
        self._drop_unowned()
        for p in partitions:
            self._committed.pop(p, None)
            if self._children.pop(p, None) is not None:
                self._m.consumer_lag.remove(self._topic, str(p))

    def update(self, consumer: Any) -> None:
        """Set each partition's gauge; keep their sum in `total`."""
        total = 0
        if not self._children or consumer is None:
            self.total = 0
            return
        tps = [TopicPartition(self._topic, p) for p in self._children]
        unfetched = []
        for tp in consumer.position(tps):
            child = self._children.get(tp.partition)
            if child is None:
                continue
            if tp.offset < 0:
                unfetched.append(tp.partition)
                continue
            _low, high = consumer.get_watermark_offsets(tp, cached=True)
            if high >= 0:
                lag = max(0, high - tp.offset)
                child.set(lag)
                total += lag
        if 0 in self._children:
            self._find_unowned(consumer)
        if unfetched or self._unowned:
            total += self._before_first_fetch(
                consumer, unfetched + self._unowned, added=set(self._unowned)
            )
        self.total = total

    def _find_unowned(self, consumer: Any) -> None:
        """Partitions above the count the last assignment saw (see the module)."""
        now = time.monotonic()
        if now < self._next_query:
            return
        self._next_query = now + _UNOWNED_EVERY_S
        try:
            meta = consumer.list_topics(self._topic, timeout=_QUERY_TIMEOUT_S)
            count = len(meta.topics[self._topic].partitions)
        except (KafkaException, KeyError):
            return
        if self._baseline is None:
            self._baseline = count
        for p in range(self._baseline, count):
            if p not in self._children:
                self._children[p] = self._m.consumer_lag.labels(self._topic, str(p))
                self._unowned.append(p)

    def _drop_unowned(self) -> None:
        """A rebalance gives the new partitions owners, who report them."""
        unowned, self._unowned = self._unowned, []
        for p in unowned:
            self._committed.pop(p, None)
            if self._children.pop(p, None) is not None:
                self._m.consumer_lag.remove(self._topic, str(p))

    def _before_first_fetch(
        self, consumer: Any, partitions: list[int], added: set[int]
    ) -> int:
        """Lag from the committed offset and a watermark query (see the module);
        `added`: partitions added since the last assignment (unowned)."""
        missing = [p for p in partitions if p not in self._committed]
        if missing:
            try:
                tps = consumer.committed(
                    [TopicPartition(self._topic, p) for p in missing],
                    timeout=_QUERY_TIMEOUT_S,
                )
            except KafkaException:  # the next second tries again
                return 0
            for tp in tps:
                self._committed[tp.partition] = tp.offset
        total = 0
        for p in partitions:
            child = self._children.get(p)
            if child is None:
                continue
            tp = TopicPartition(self._topic, p)
            low, high = consumer.get_watermark_offsets(tp, cached=True)
            if low < 0 or high < 0:  # not fetched yet: ask the broker
                try:
                    low, high = consumer.get_watermark_offsets(
                        tp, timeout=_QUERY_TIMEOUT_S
                    )
                except KafkaException:  # unreachable: keep the old value
                    continue
            start = self._committed.get(p, -1)
            if start < 0:  # nothing committed: where the partition starts
                # (`service.loop.partition_starts`): with `latest`, its end only in a new group,
                # and never for a partition added since this worker's assignment:
                # all it holds was written after the worker subscribed. (The
                # committed offsets cached here can be those of the start, before
                # the group's first commit: they do not tell a new group.)
                reads = any(o >= 0 for o in self._committed.values())
                fresh = self._reset == "latest" and not reads and p not in added
                start = high if fresh else low
            lag = max(0, high - start)
            child.set(lag)
            total += lag
        return total
