"""Where a partition without a committed offset starts when the group reads `latest`.

librdkafka's `auto.offset.reset=latest` puts such a partition at its end when it is
assigned. For a partition the group just got because it was added to the topic,
that end lies after everything written to it between its creation and the
rebalance that assigned it (up to `topic.metadata.refresh.interval.ms` and a
rebalance later): those messages would never be read. So, with `latest`, a
partition without a committed offset starts:

- at its beginning when the group has a committed offset on another partition of
  the topic: the group was already reading the topic, so whatever the partition
  holds was written while it did (a partition that held messages the group never
  committed, e.g. after a crash before its first commit, is read from its start);
- else (a new group) at the first message written at or after this worker
  subscribed (`offsets_for_times`), its end if there is none: `latest` as of the
  worker's start, not as of the assignment, which a slow join would move.

A lookup that fails leaves the assignment to librdkafka (plain `latest`), with a
warning: the rule is best effort, never a reason to stop.
"""

from __future__ import annotations

from typing import Any, Final

import structlog
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaException, TopicPartition

log = structlog.get_logger(__name__)

_TIMEOUT_S: Final = 5.0


def start_uncommitted(
    consumer: Any,
    topic: str,
    partitions: list[Any],
    subscribed_ms: int,
    *,
    cooperative: bool = False,
) -> bool:
    """Set the start of each assigned partition without a committed offset, and
    assign (see the module); False when nothing needed it or a lookup failed.

    Args:
        cooperative: the group's assignor is cooperative (`incremental_assign`).
    """
    try:
        meta = consumer.list_topics(topic, timeout=_TIMEOUT_S).topics[topic]
        every = [TopicPartition(topic, p) for p in meta.partitions]
        committed = {
            tp.partition: tp.offset
            for tp in consumer.committed(every, timeout=_TIMEOUT_S)
        }
        fresh = [tp for tp in partitions if committed.get(tp.partition, -1) < 0]
        if not fresh:
            return False
        group_reads = any(offset >= 0 for offset in committed.values())
        if group_reads:
            starts = {tp.partition: OFFSET_BEGINNING for tp in fresh}
        else:
            asked = [TopicPartition(topic, tp.partition, subscribed_ms) for tp in fresh]
            found = consumer.offsets_for_times(asked, timeout=_TIMEOUT_S)
            starts = {
                t.partition: t.offset if t.offset >= 0 else OFFSET_END for t in found
            }
    except (KafkaException, KeyError) as exc:
        log.warning("start_offsets_unknown", error=str(exc))
        return False
    for tp in partitions:
        if tp.partition in starts:
            tp.offset = starts[tp.partition]
    try:
        if cooperative:
            consumer.incremental_assign(partitions)
        else:
            consumer.assign(partitions)
    except KafkaException as exc:
        log.warning("start_offsets_not_applied", error=str(exc))
        return False
    shown = {
        str(p): "beginning" if o == OFFSET_BEGINNING else o for p, o in starts.items()
    }
    log.info("uncommitted_partitions_start", partitions=shown)
    return True
