"""A batch whose writes failed: rewind and pause its partitions, retry with back-off.

When a batch's dead letters or output are refused or not acknowledged in time (the
DLQ topic deleted, an ACL, a broker stalled past `delivery_timeout_s`), the loop
stores none of the batch's offsets and hands the batch here. Each partition in it
is paused and rewound to the batch's first offset for it; the other partitions go
on. After a back-off (1 s, doubling to 30 s) the held partitions are resumed and the
batch is processed again; when such a retry is confirmed, the worker is healthy
again. Meanwhile `/readyz` answers 503 with the reason and `worker_degraded` is 1:
the worker is alive (a restart would not help) but not making progress on those
partitions. Nothing is stored past a message whose writes are unconfirmed, and the
process never exits for it (RELIABILITY P4).

None of this runs on the per-message path: the loop tests `active` once per batch.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import structlog
from confluent_kafka import KafkaException, TopicPartition

from service.kafka.protocols import KafkaMessage
from service.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)

FIRST_BACKOFF_S: Final = 1.0
MAX_BACKOFF_S: Final = 30.0


class Hold:
    """The partitions paused after a failed write, and when to try them again.

    Args:
        consumer: the loop's consumer (`pause`, `resume`, `seek`).
        metrics: the worker's metrics (`worker_degraded`,
            `worker_delivery_failures_total`).
        clock: monotonic seconds (tests pass a fake).
    """

    def __init__(
        self,
        consumer: Any,
        metrics: Metrics,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._consumer = consumer
        self._m = metrics
        self._clock = clock
        self.held: dict[int, TopicPartition] = {}
        """Paused partitions and the offset each is rewound to: everything before
        it is done (its writes confirmed), so it is what is stored for it."""
        self._retrying: set[int] = set()
        self._backoff = FIRST_BACKOFF_S
        self._retry_at = 0.0
        self.reason: str | None = None
        """Why the worker is degraded (for `/readyz`); None when it is not."""
        self.active = False
        """True while anything is held or being retried (the loop's one test)."""

    def fail(
        self,
        msgs: Sequence[KafkaMessage],
        error: BaseException,
        rewind: Mapping[int, int] | None = None,
        *,
        registry: bool = False,
    ) -> None:
        """Pause and rewind every partition of `msgs`; retry after the back-off.

        Each is rewound to the batch's first offset for it, or to `rewind`'s
        offset for it if given (exactly-once, a new producer: the group's
        committed offsets, `service.delivery.transactions`). `registry`: not a
        write but the schema registry failed (`service.loop.registry_wait`)."""
        firsts: dict[int, TopicPartition] = {}
        rewind = rewind or {}
        for m in msgs:
            partition: Any = m.partition()
            if m.error() is None and partition not in firsts:
                topic: Any = m.topic()
                offset: Any = rewind.get(partition, m.offset())
                firsts[partition] = TopicPartition(topic, partition, offset)
        tps = list(firsts.values())
        if tps:
            self._consumer.pause(tps)
            for tp in tps:
                self._consumer.seek(tp)
        for p, tp in firsts.items():
            if p not in self.held or tp.offset < self.held[p].offset:
                self.held[p] = tp  # the earliest: a failed write after a wait
            self._retrying.discard(p)
        retry_in = self._backoff
        self._retry_at = self._clock() + retry_in
        self._backoff = min(self._backoff * 2, MAX_BACKOFF_S)
        what = "the schema registry failed" if registry else "writes failed"
        self.reason = f"degraded: {what}, {len(self.held)} partition(s) paused: {error}"
        self.active = True
        (self._m.registry_waits if registry else self._m.delivery_failures).inc()
        self._m.degraded.set(1)
        log.error(
            "registry_unavailable" if registry else "delivery_failed",
            error=str(error),
            paused=sorted(self.held),
            rewound_to=[f"{p}@{tp.offset}" for p, tp in sorted(self.held.items())],
            retry_in_s=retry_in,
        )

    def due(self) -> None:
        """Resume the held partitions once their back-off has passed."""
        if not self.held or self._clock() < self._retry_at:
            return
        tps = list(self.held.values())
        self._consumer.resume(tps)
        self._retrying.update(self.held)
        log.info("delivery_retry", partitions=sorted(self.held))
        self.held.clear()

    def filter(self, msgs: Sequence[KafkaMessage]) -> Sequence[KafkaMessage]:
        """`msgs` without held partitions' messages (fetched before the pause)."""
        if not self.held:
            return msgs
        held = self.held
        return [m for m in msgs if m.partition() not in held]

    def confirmed(self, msgs: Sequence[KafkaMessage]) -> None:
        """A batch of `msgs` was confirmed: a retried partition in it has healed."""
        if self._retrying:
            self._retrying.difference_update({m.partition() for m in msgs})
        if not self._retrying and not self.held:
            self._heal()

    def forget(self, partitions: Sequence[int]) -> None:
        """Revoked or lost partitions: no longer ours to hold or retry.

        A held one is resumed first (the callback runs while it is still
        assigned): librdkafka keeps a partition's pause across a rebalance, so
        one given back to this consumer would otherwise never be fetched again
        (seen in the exactly-once broker restart: the group lost the member, the
        partitions came back paused, lag 26,315 and no progress)."""
        resume = [self.held[p] for p in partitions if p in self.held]
        if resume:
            with contextlib.suppress(KafkaException):  # already unassigned
                self._consumer.resume(resume)
        for p in partitions:
            self.held.pop(p, None)
            self._retrying.discard(p)
        if self.active and not self.held and not self._retrying:
            self._heal()

    def _heal(self) -> None:
        if self.reason is not None:
            log.info("delivery_recovered")
        self.reason = None
        self.active = False
        self._backoff = FIRST_BACKOFF_S
        self._m.degraded.set(0)
