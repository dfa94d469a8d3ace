"""Loss verification after a case: committed offsets at the end, `x-seq` read back.

Counting handled messages cannot tell a lost message from a duplicate that took
its place; reading the topic back can: every `x-seq` of the measured run must be
there. The group's committed offsets must also have reached the end of every
partition once the worker stopped (at-least-once, nothing left to redeliver).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from typing import Any, Final, cast

from confluent_kafka import Consumer, TopicPartition

from abrunner.report import rejections
from service.kafka import headers

_TIMEOUT_S: Final = 10.0
"""Broker round trips here (offsets, watermarks, metadata) take milliseconds on the
A/B's local broker: 10 s only fails when the broker is gone."""

READ_WAIT_S: Final = 0.1
"""The longest one `consume` call of a read-back waits: librdkafka's `consume(n,
timeout)` returns when it has `n` messages or when `timeout` has passed, so the
call that reads a topic's last messages always waits its whole timeout."""
_READ_S: Final = 120.0
"""Reading a dead-letter topic back: 200k letters take seconds; 2 min is a stall."""
_READ_BACK: Final = {
    "enable.auto.commit": False,
    # 8 MiB per partition and 64 MiB per fetch: a `large:1500000` profile read
    # back a few messages at a time would take minutes.
    "max.partition.fetch.bytes": 8 << 20,
    "fetch.max.bytes": 64 << 20,
}


def _conf(bootstrap: str | Mapping[str, Any]) -> dict[str, Any]:
    """librdkafka settings of a cluster given by address or by its settings."""
    if isinstance(bootstrap, str):
        return {"bootstrap.servers": bootstrap}
    return dict(bootstrap)


def committed_to_end(
    bootstrap: str | Mapping[str, Any], group: str, topic: str, partitions: int
) -> bool:
    """Whether `group` has committed every non-empty partition up to its end."""
    consumer = Consumer({**_conf(bootstrap), "group.id": group})
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        for tp in consumer.committed(tps, timeout=_TIMEOUT_S):
            _low, high = consumer.get_watermark_offsets(tp, timeout=_TIMEOUT_S)
            if high > 0 and tp.offset != high:
                return False
        return True
    finally:
        consumer.close()


def missing_seqs(
    bootstrap: str | Mapping[str, Any], topic: str, run_id: str, expected: int
) -> int:
    """Read the topic back to its end: how many `x-seq` of run `run_id` are absent.

    Partitions are assigned from offset 0 (no group to join) and read up to the
    high watermarks taken first, so the read ends as soon as the data does.

    Args:
        bootstrap: the Kafka bootstrap servers, or the cluster's librdkafka settings.
        topic: the case's topic.
        run_id: the measured run's `x-run-id` (warm-up messages have another).
        expected: messages the run had acknowledged: `x-seq` 0 to `expected - 1`.
    """
    config = {**_conf(bootstrap), "group.id": f"verify-{run_id}"}
    consumer = Consumer({**config, **_READ_BACK})
    try:
        ends = _high_watermarks(consumer, topic)
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        seen = _read_seqs(consumer, ends, run_id.encode())
    finally:
        consumer.close()
    return len(set(range(expected)) - seen)


def _high_watermarks(consumer: Consumer, topic: str) -> dict[int, int]:
    """partition -> high watermark, for the partitions that hold anything."""
    meta = consumer.list_topics(topic, timeout=_TIMEOUT_S).topics[topic]
    ends = {}
    for p in meta.partitions:
        tp = TopicPartition(topic, p)
        _low, high = consumer.get_watermark_offsets(tp, timeout=_TIMEOUT_S)
        if high > 0:
            ends[p] = high
    return ends


def _read_seqs(consumer: Consumer, ends: dict[int, int], run_id: bytes) -> set[int]:
    """The `x-seq` values of `run_id` up to `ends` (emptied as partitions finish)."""
    seen: set[int] = set()
    while ends:
        for m in consumer.consume(10_000, READ_WAIT_S):
            if m.error() is not None:
                continue
            found = dict(cast("list[tuple[str, bytes | None]]", m.headers() or []))
            seq = found.get(headers.SEQ)
            if found.get(headers.RUN_ID) == run_id and seq is not None:
                seen.add(int(seq))
            if (m.offset() or 0) + 1 >= ends.get(m.partition() or 0, 0):
                ends.pop(m.partition() or 0, None)
    return seen


def dead_letters(
    bootstrap: str | Mapping[str, Any], dlq: str, run_id: str
) -> Counter[str]:
    """The dead letters of run `run_id` in topic `dlq`, by `"<field path>: <reason>"`.

    Read to the high watermarks taken first, like `missing_seqs`, for at most
    `_READ_S` seconds (an optional figure never holds the run up).
    """
    config = {**_conf(bootstrap), "group.id": f"dlq-{run_id}"}
    consumer = Consumer({**config, **_READ_BACK})
    found: Counter[str] = Counter()
    deadline = time.monotonic() + _READ_S
    try:
        ends = _high_watermarks(consumer, dlq)
        consumer.assign([TopicPartition(dlq, p, 0) for p in ends])
        while ends and time.monotonic() < deadline:
            for m in consumer.consume(10_000, READ_WAIT_S):
                if m.error() is not None:
                    continue
                hs = dict(cast("list[tuple[str, bytes | None]]", m.headers() or []))
                if hs.get(headers.RUN_ID) == run_id.encode():
                    found[rejections.reason(hs)] += 1
                if (m.offset() or 0) + 1 >= ends.get(m.partition() or 0, 0):
                    ends.pop(m.partition() or 0, None)
    finally:
        consumer.close()
    return found
