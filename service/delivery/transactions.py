"""Exactly-once delivery: each batch is one Kafka transaction.

`--processing-guarantee exactly-once` makes the worker's producer transactional
(`transactional.id`, idempotent) and turns auto-commit off. Per batch
(`service.loop.batch_loop.BatchLoop.process`):

1. `begin_transaction()` before the batch is handled;
2. its results and dead letters are produced in the transaction (the same
   `ConfirmedProducer` as at-least-once, which still waits for their acks);
3. the consumed positions go to the transaction with the consumer's group metadata
   (`send_offsets_to_transaction`, KIP-447: one producer per worker, fenced by the
   group's generation when a rebalance gave its partitions to another member);
4. `commit_transaction()`.

Any failure aborts the transaction: nothing of the batch is visible to a
`read_committed` reader and its offsets are not committed; the batch's partitions
are rewound to its first offsets (the last committed ones: every batch before it
committed) and paused, then retried with back-off (`service.delivery.held_partitions`).
A fatal error (this producer was fenced: another process took its transactional id,
or the broker says the producer is unusable) stops the worker with status 1; a
restart begins from the committed offsets and its `init_transactions()` aborts
whatever the old instance left open.

The transactional id is stable across restarts (`<group>-<host>-<worker index>`
by default, `--transactional-id` to choose it), so a restarted worker fences its
own zombie. Consumers of the output and dead-letter topics must read with
`isolation.level=read_committed`.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Container, Sequence
from typing import Any, Final

from confluent_kafka import KafkaException, TopicPartition

from schemas.errors import DeliveryError, FatalError

_RETRY_PAUSE_S: Final = 0.1
"""Pause between attempts of a call librdkafka says is retriable."""


def transactional_id(group: str, index: int, configured: str | None = None) -> str:
    """The producer's `transactional.id`: configured, else `<group>-<host>-<index>`:
    the same after a restart on the same host, distinct between live workers."""
    return configured or f"{group}-{socket.gethostname()}-{index}"


class NoTransactions:
    """At-least-once: nothing per batch (the offsets are stored and auto-committed)."""

    def begin(self) -> None:
        """Nothing to begin."""

    def commit(self, positions: Sequence[TopicPartition], held: Container[int]) -> None:
        """Nothing to commit here: the loop stores offsets."""

    def abort(self) -> None:
        """Nothing to abort."""


class Transactions:
    """One transaction per batch on a transactional producer.

    Args:
        producer: a confluent-kafka producer with `transactional.id` set;
            `init_transactions` is called here (it contacts the broker).
        consumer: the loop's consumer (`position`, `consumer_group_metadata`).
        timeout_s: how long each transactional call may take.
    """

    def __init__(self, producer: Any, consumer: Any, timeout_s: float) -> None:
        self._producer = producer
        self._consumer = consumer
        self._timeout_s = timeout_s
        self._open = False
        self.commits = 0
        self.aborts = 0
        self._call(producer.init_transactions, "init_transactions")

    def begin(self) -> None:
        """Begin the batch's transaction."""
        self._call(self._producer.begin_transaction, "begin_transaction")
        self._open = True

    def commit(self, positions: Sequence[TopicPartition], held: Container[int]) -> None:
        """Send the consumed positions (not those of rewound, `held`, partitions)
        to the transaction and commit it.

        Raises:
            DeliveryError: the transaction must be aborted (the caller does).
            FatalError: the producer is unusable (fenced).
        """
        done = []
        if positions:
            done = [
                tp
                for tp in self._consumer.position(list(positions))
                if tp.offset >= 0 and tp.partition not in held
            ]
        if done:
            metadata = self._consumer.consumer_group_metadata()
            self._call(
                lambda: self._producer.send_offsets_to_transaction(
                    done, metadata, self._timeout_s
                ),
                "send_offsets_to_transaction",
            )
        self._call(
            lambda: self._producer.commit_transaction(self._timeout_s),
            "commit_transaction",
        )
        self._open = False
        self.commits += 1

    def abort(self) -> None:
        """Abort the open transaction, if any (its writes are never visible).

        Raises:
            FatalError: it could not be aborted: a restart's `init_transactions`
                aborts it.
        """
        if not self._open:
            return
        self._open = False
        self.aborts += 1
        try:
            self._call(
                lambda: self._producer.abort_transaction(self._timeout_s),
                "abort_transaction",
            )
        except DeliveryError as exc:
            raise FatalError(str(exc)) from None

    def _call(self, call: Any, what: str) -> None:
        """`call()`, retried while librdkafka says retriable, up to the timeout."""
        deadline = time.monotonic() + self._timeout_s
        while True:
            try:
                call()
                return
            except KafkaException as exc:
                err = exc.args[0]
                if err.fatal():
                    raise FatalError(
                        f"{what}: {err.name()}: {err.str()} (the producer is unusable: "
                        "fenced by another instance with its transactional id?)"
                    ) from None
                if err.retriable() and time.monotonic() < deadline:
                    time.sleep(_RETRY_PAUSE_S)
                    continue
                raise DeliveryError(
                    f"{what} failed: {err.name()}: {err.str()}"
                ) from None
