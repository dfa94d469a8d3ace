"""The shutdown budget: what a SIGTERM may still cost, whatever the broker does.

From the stop request, the loop's wait for write acknowledgements ends within a
quarter second (`service.delivery.gated_writes`: the batch is left unstored, to be read again),
then the producer's flush and the consumer's `close()` (commit, leave the group)
share `shutdown_timeout_s` (10 s by default). With the broker stalled the worker
therefore exits about `shutdown_timeout_s` + 1 s after SIGTERM, inside the
manifests' 45 s grace period; what it could not commit is processed again.
"""

from __future__ import annotations

import time

import structlog
from confluent_kafka import KafkaException

from service.kafka.protocols import KafkaProducer, WorkerConsumer
from service.lifecycle.child_processes import run_within

log = structlog.get_logger("service.app")


class Shutdown:
    """One budget of `timeout_s` for everything after the stop request.

    Args:
        timeout_s: the budget (`worker.processing.shutdown_timeout_s`).
    """

    def __init__(self, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._started: float | None = None
        self.close_timed_out = False

    def start(self) -> None:
        """The stop request (signal-safe; only the first one counts)."""
        if self._started is None:
            self._started = time.monotonic()

    def left(self) -> float:
        """Seconds left of the budget, at least 0.1 (from now if not started)."""
        self.start()
        assert self._started is not None  # noqa: S101 (set by start)
        return max(0.1, self._started + self._timeout_s - time.monotonic())

    def flush(self, producer: KafkaProducer) -> None:
        """Send what is queued, within the budget.

        A transactional producer in a fatal state (exactly-once, fenced or
        refused by its coordinator) raises instead: what it held was never
        committed, so there is nothing to send; the worker already exits 1."""
        try:
            unsent = producer.flush(self.left())
        except KafkaException as exc:
            log.warning("producer_flush_failed", error=exc.args[0].str())
            return
        if unsent:
            log.warning("producer_flush_timed_out", unsent=unsent)

    def close(self, consumer: WorkerConsumer) -> None:
        """Commit the stored offsets and leave the group, within the budget.

        `close()` waits for the group coordinator; with the broker stalled it would
        wait until it returns. Past the budget the worker exits without it: the
        group notices after its session timeout, and uncommitted offsets are
        processed again (at-least-once)."""
        timeout = self.left()
        if not run_within(consumer.close, timeout, "close"):
            self.close_timed_out = True
            log.error("consumer_close_timed_out", timeout_s=round(timeout, 1))
        else:
            log.info("consumer_closed")
