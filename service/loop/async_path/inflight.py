"""The async path's bookkeeping: each partition's messages in flight, in offset order.

A message is in flight from the `consume()` that returned it until its offset is
released: handled (its result or its dead letter kept on its `Entry`), and every
message before it in its partition released too. Handlers finish in any order
(`--ordering key|none`); `PartitionTrack.done_prefix` counts the finished messages
at the front of the partition, the contiguous completed prefix, and only those are
written, confirmed and stored (`service.loop.async_path.loop`). A partition taken away
is marked not `live`: what its handlers still finish is dropped, never stored.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from confluent_kafka import OFFSET_INVALID, TopicPartition

from service.delivery.dead_letters import Poison
from service.kafka.protocols import KafkaMessage


class Entry:
    """One message in flight: what its handling came to, once `done`."""

    __slots__ = ("done", "message", "out", "poison")

    def __init__(self, message: KafkaMessage) -> None:
        self.message = message
        self.out: object = None
        """The handler's result (None: nothing to write)."""
        self.poison: Poison | None = None
        """Set when the message goes to the dead-letter topic instead."""
        self.done = False


class PartitionTrack:
    """One partition's messages in flight, in the order `consume()` returned them
    (offset order: librdkafka delivers a partition's messages in order)."""

    __slots__ = ("entries", "live")

    def __init__(self) -> None:
        self.entries: deque[Entry] = deque()
        self.live = True
        """False once the partition was revoked or lost."""

    def add(self, message: KafkaMessage) -> Entry:
        """Track `message`, the partition's newest."""
        entry = Entry(message)
        self.entries.append(entry)
        return entry

    def done_prefix(self) -> int:
        """How many messages at the front are done (the contiguous prefix)."""
        n = 0
        for entry in self.entries:
            if not entry.done:
                break
            n += 1
        return n

    def release(self, n: int) -> tuple[list[Entry], int]:
        """Drop the first `n` (done) messages; return them and the offset to store
        (the one after the last: librdkafka's `store_offsets` stores as given)."""
        entries = self.entries
        out = [entries.popleft() for _ in range(n)]
        return out, int(out[-1].message.offset() or 0) + 1


class ReleasedPositions:
    """The consumer, except that `position()` answers the released offsets.

    Exactly-once sends `position()` of the assigned partitions to each transaction
    (`service.delivery.transactions`); on the async path that must be the offset
    after each partition's released prefix, not after what `consume()` returned
    (handlers may still be running on those). Until `released` is set (a sync loop,
    or before the event loop starts) it answers as the consumer does.
    """

    def __init__(self, consumer: Any) -> None:
        self._consumer = consumer
        self.released: dict[int, int] | None = None

    def position(self, partitions: Sequence[TopicPartition]) -> list[TopicPartition]:
        """The released offset of each partition (`OFFSET_INVALID`: none yet)."""
        if self.released is None:
            return list(self._consumer.position(list(partitions)))
        got = self.released.get
        return [
            TopicPartition(tp.topic, tp.partition, got(tp.partition, OFFSET_INVALID))
            for tp in partitions
        ]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)
