"""The worker's `[worker.consumer]` section: what it reads, its group, and the
fetch sizes that bound its memory (`memory_bound`), in bytes of inflated data."""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field

from service.settings.processing import Section

METADATA_REFRESH_MS: Final = 10_000
"""The consumer's `topic.metadata.refresh.interval.ms`: partitions added to the
input topic are assigned within about this plus a rebalance (librdkafka's default,
300 s, left them unread for five minutes). One metadata request per broker every
10 s costs nothing measurable."""


class ConsumerSettings(Section):
    """What the worker reads and how its consumer group behaves.

    Every number is bounded by the range librdkafka accepts for the setting it
    becomes, so a value out of range is a configuration error naming the field,
    not a librdkafka error once a client is built (`delivery_timeout_s` becomes
    `message.timeout.ms`, at most 2^31-1 ms)."""

    topic: str = "orders"
    group_id: str = "codec-worker"
    client_id: str = "codec-worker"
    """librdkafka's `client.id`: how the broker's logs and quotas name this client."""
    auto_offset_reset: Literal["earliest", "latest", "error"] = "earliest"
    session_timeout_ms: Annotated[int, Field(ge=1000, le=3_600_000)] = 45_000
    """How long the group waits for a silent member (a kill -9) before its
    partitions move to the others; lower means faster recovery, more false alarms."""
    group_instance_id: str | None = None
    """Static membership (KIP-345): a restarted worker with the same id gets its
    partitions back without a rebalance, within the session timeout. Each of
    `processes` children appends `-<index>`."""
    commit_interval_ms: Annotated[int, Field(ge=100, le=86_400_000)] = 5000
    """How often the stored offsets are committed (`auto.commit.interval.ms`,
    librdkafka's default). A crash (kill -9, OOM, a lost node) re-reads at most
    what was processed since the last commit: this interval plus
    `offset_store_interval_ms` of traffic, plus the batch in flight. Lower trades
    those duplicates for one OffsetCommit request per interval to the group
    coordinator (see the worker guide for the measured cost). SIGTERM, revokes
    and shutdown commit at once, whatever this is."""
    max_poll_interval_ms: Annotated[int, Field(ge=1000, le=86_400_000)] = 300_000
    """How long the worker may go between two consumes before the group drops it
    (librdkafka's `max.poll.interval.ms`)."""
    fetch_max_bytes: Annotated[int, Field(ge=1024, le=2_147_483_135)] = 16 << 20
    """The most data one fetch asks the broker for, on the wire (`fetch.max.bytes`;
    a record batch larger than this still comes whole). At most
    `receive_message_max_bytes` - 512."""
    max_partition_fetch_bytes: Annotated[int, Field(ge=1, le=1 << 30)] = 64 << 10
    """The most data one fetch asks for per partition, on the wire
    (`max.partition.fetch.bytes`). Compressed data inflates after the fetch: a
    fetch of gzip can hold up to 1,032 times this (see `memory_bound`)."""
    receive_message_max_bytes: Annotated[int, Field(ge=1024, le=2_147_483_647)] = (
        32 << 20
    )
    """The largest fetch response, and the most a zstd record batch may inflate to
    (`receive.message.max.bytes`; librdkafka 2.16 refuses a larger zstd batch,
    `_BAD_COMPRESSION`, and the worker dead-letters it as `unreadable`). It does
    not bound gzip, lz4 or snappy batches: librdkafka inflates those whole."""
    queued_max_messages_kbytes: Annotated[int, Field(ge=1, le=2_097_151)] = 65_536
    """The prefetch queue's bound in KiB: librdkafka's default, 64 MiB. A full queue
    postpones the partition's next fetch by `fetch.queue.backoff.ms` (1 s), so a lower
    bound pauses a backlog's drain more often: at 32 MiB the worker drained 200k
    medium events in about twice the wall time of a bare loop at 64 MiB, and kept
    0.70-0.89 of its messages per CPU-second against 0.85-0.96 at 64 MiB (`make
    bench`, two runs each, msgspec-msgpack and protobuf)."""


INFLATION: Final[dict[str, float]] = {"gzip": 1032.0, "lz4": 255.0, "snappy": 21.4}
"""The most a byte of each format can inflate to (DEFLATE's 258-byte matches in
2 bits; LZ4's 255-byte length steps; Snappy's 64-byte copies in 3 bytes).
librdkafka 2.16 inflates these batches whole, whatever their size; zstd ones only
up to `receive_message_max_bytes`."""


def memory_bound(c: ConsumerSettings, partitions: int, largest_batch: int = 0) -> int:
    """The most message data, in inflated bytes, a worker with consumer settings
    `c` holds at once while `partitions` partitions are assigned to it.

    The prefetch queue (`queued_max_messages_kbytes`: librdkafka fetches no more
    for a partition past it) plus, twice (the batch the loop holds, copied out of
    the queue, and the fetch that refills the queue meanwhile), one fetch
    response inflated. Per partition, a fetch holds at most
    `max_partition_fetch_bytes` of record batches on the wire, each inflating to
    its format's ratio (`INFLATION`: gzip's is the worst) or, for zstd, to at
    most `receive_message_max_bytes`; or a single record batch larger than that
    on the wire (Kafka's rule: the first batch comes whole), which inflates to
    whatever its producer put in it: `largest_batch`, the largest inflated
    record batch of the input, which only the input topic's `max.message.bytes`
    bounds (up to ~1 GB of gzip for the default 1 MB). Dead letters add no copy of
    a value over the dead-letter topic's limit (refused by the client at once).
    """
    per_partition = max(
        c.receive_message_max_bytes,
        int(c.max_partition_fetch_bytes * max(INFLATION.values())),
        largest_batch,
    )
    return c.queued_max_messages_kbytes * 1024 + 2 * partitions * per_partition
