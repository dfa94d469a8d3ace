"""Where a record batch librdkafka cannot read ends: a second consumer asks.

librdkafka delivers a batch it cannot turn into messages (a compressed batch that
does not inflate, `_BAD_COMPRESSION`; a corrupt one, `_BAD_MSG`; an unknown codec)
as one error naming the partition and the batch's first offset, and then fetches
that offset again for ever: it never moves past it on its own. The worker
dead-letters the batch and seeks past it, and for that it must know the batch's
last offset, which the error does not say.

`BatchProbe` finds it with a consumer of its own (assigned, never in the group,
never committing), fetching one batch at a time (`max.partition.fetch.bytes` 1:
the broker returns the batch holding the fetch offset and no more). A fetch at
offset X inside the batch yields the same error with the same first offset; a
fetch past it yields a message at X or later, or another batch's error. Batches
are contiguous, so that test is monotonic in X: doubling steps, then bisection,
find the last offset in about 2 log2(n) fetches for a batch of n records (a few
milliseconds each on a local broker). Only errors that name the batch's first
offset (`BASE_OFFSET_ERRORS`) are probed; one that names the fetch position
instead (`MSG_SIZE_TOO_LARGE`) cannot tell one batch from the next, so the worker
moves past it one offset at a time.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from confluent_kafka import KafkaError, TopicPartition

UNREADABLE_CODES: Final = frozenset(
    {
        KafkaError._BAD_COMPRESSION,
        KafkaError._BAD_MSG,
        KafkaError._NOT_IMPLEMENTED,
        KafkaError.INVALID_MSG,
        KafkaError.UNSUPPORTED_COMPRESSION_TYPE,
        KafkaError.MSG_SIZE_TOO_LARGE,
    }
)
"""Errors librdkafka reports in place of a partition's data at an offset and does
not move past: the bytes there cannot become messages (a retry reads the same
bytes). Other per-partition errors (a leader moving, an offset reset, an ACL) are
about the cluster, not the data: they heal, or need a person, and are never
skipped."""

BASE_OFFSET_ERRORS: Final = frozenset(
    {
        KafkaError._BAD_COMPRESSION,
        KafkaError._BAD_MSG,
        KafkaError._NOT_IMPLEMENTED,
        KafkaError.UNSUPPORTED_COMPRESSION_TYPE,
    }
)
"""Those whose offset is the failing batch's first (librdkafka's msgset reader)."""

PROBE_BUDGET_S: Final = 20.0
"""The longest a probe may take in all; past it the worker moves one offset on."""
_FETCH_WAIT_S: Final = 2.0
"""How long one probe fetch may wait for its answer (the batch or its error)."""

Fetch = Callable[[int], tuple[str, int]]
"""Fetches at an offset: ("error", first offset) for a batch that cannot be read,
("message", offset) for a readable one, ("end", -1) past the partition's end."""


def is_unreadable(err: Any, partition: int | None, offset: int | None) -> bool:
    """Whether a consumer error is data the worker must dead-letter and skip."""
    return (
        err.code() in UNREADABLE_CODES
        and partition is not None
        and partition >= 0
        and offset is not None
        and offset >= 0
    )


def last_in_batch(fetch: Fetch, first: int, start: int, end: int) -> int:
    """The last offset of the unreadable batch whose first offset is `first`.

    Args:
        fetch: see `Fetch`.
        first: the batch's first offset, as the error named it.
        start: an offset known to be in the batch (`first` or later).
        end: the partition's end (its high watermark): nothing is at or past it.
    """

    def inside(x: int) -> bool:
        kind, at = fetch(x)
        return kind == "error" and at == first

    lo, step = start, 1  # lo: inside; hi: past
    hi = end
    while lo + step < end:
        if not inside(lo + step):
            hi = lo + step
            break
        lo += step
        step *= 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if inside(mid):
            lo = mid
        else:
            hi = mid
    return lo


class BatchProbe:
    """A consumer of its own that finds where unreadable batches end.

    Args:
        config: the worker consumer's librdkafka settings (connection, security);
            the group, commits and fetch sizes are replaced.
        factory: builds the consumer (`confluent_kafka.Consumer`).
        clock: monotonic seconds (tests pass a fake).
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        factory: Callable[[dict[str, Any]], Any],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        keep = {k: v for k, v in config.items() if not k.startswith("group.")}
        for key in ("on_commit", "error_cb", "partition.assignment.strategy"):
            keep.pop(key, None)
        self._config = {
            **keep,
            "group.id": f"codec-worker-probe-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "max.partition.fetch.bytes": 1,
            "fetch.wait.max.ms": 10,
            "fetch.error.backoff.ms": 10,
            "queued.max.messages.kbytes": 1024,
        }
        self._factory = factory
        self._clock = clock
        self._consumer: Any = None

    def last_offset(self, topic: str, partition: int, first: int, start: int) -> int:
        """The last offset of the batch at `first` (at least `start`); `start`
        if it cannot be told within `PROBE_BUDGET_S` (a slower, safe answer:
        the worker then meets the batch's error again at `start + 1`)."""
        deadline = self._clock() + PROBE_BUDGET_S
        consumer = self._consumer
        if consumer is None:
            consumer = self._consumer = self._factory(dict(self._config))
        tp = TopicPartition(topic, partition)
        _, end = consumer.get_watermark_offsets(tp, timeout=5, cached=False)

        def fetch(x: int) -> tuple[str, int]:
            if self._clock() > deadline:
                raise TimeoutError
            consumer.assign([TopicPartition(topic, partition, x)])
            wait_until = min(deadline, self._clock() + _FETCH_WAIT_S)
            while self._clock() < wait_until:
                for m in consumer.consume(1, 0.1):
                    if m.partition() != partition:
                        continue
                    err = m.error()
                    if err is None:
                        return "message", m.offset()
                    if err.code() in UNREADABLE_CODES:
                        return "error", m.offset()
            return "end", -1

        try:
            return last_in_batch(fetch, first, start, max(end, start + 1))
        except TimeoutError:
            return start
        finally:
            consumer.unassign()

    def close(self) -> None:
        """Close the probe's consumer, if one was made."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
