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

A failed call is handled by librdkafka's class of its error
(`service.delivery.txn_calls.error_class`): retriable, the call is made again
until its timeout; `txn_requires_abort` (or any other error), the transaction is
aborted: nothing of the batch is visible to a `read_committed` reader and its
offsets are not committed; the batch's partitions are rewound to its first offsets
(the last committed ones: every batch before it committed) and paused, then
retried with back-off (`service.delivery.held_partitions`).

A fatal error, or a call that does not return (librdkafka #5456:
`send_offsets_to_transaction` can block forever after a broker restart, see
`service.delivery.txn_calls`), makes the producer unusable: it is replaced by a new
one with the same `transactional.id` (`init_transactions` fences the old one and
ends whatever transaction it left open, committed or aborted), and the batch's
partitions are rewound to the offsets the group has committed: if the commit's
outcome is unknown, the group coordinator knows it. Being fenced (`_FENCED`,
`PRODUCER_FENCED`) is the exception: a newer instance took the transactional id,
and taking it back would fence that one in turn, so the worker stops with status 1;
so it does after `MAX_REPLACEMENTS` replacements without a commit between them.
A restart begins from the committed offsets.

The transactional id is stable across restarts (`<group>-<host>-<worker index>`
by default, `--transactional-id` to choose it), so a restarted worker fences its
own zombie. Consumers of the output and dead-letter topics must read with
`isolation.level=read_committed`.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import structlog
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from schemas.errors import DeliveryError, FatalError
from service.delivery.txn_calls import GRACE_S, CallThread, Stuck, error_class

log = structlog.get_logger(__name__)

_RETRY_PAUSE_S: Final = 0.1
"""Pause between attempts of a call librdkafka says is retriable."""
MAX_REPLACEMENTS: Final = 3
"""New producers in a row, with no commit between them, before the worker stops."""
MAX_STUCK: Final = 10
"""Stuck calls (each leaves a thread blocked in librdkafka) before the worker stops:
a restart frees them."""
_INIT_DEADLINE_S: Final = 120.0
"""How long a new producer's `init_transactions` is retried (the broker may still
be coming back), at least."""
_FENCED: Final = frozenset(
    {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
)

Rewind = dict[int, int]
"""Partition -> the offset to read it again from (the group's committed offset)."""


def transactional_id(group: str, index: int, configured: str | None = None) -> str:
    """The producer's `transactional.id`: configured, else `<group>-<host>-<index>`:
    the same after a restart on the same host, distinct between live workers."""
    return configured or f"{group}-{socket.gethostname()}-{index}"


class NoTransactions:
    """At-least-once: nothing per batch (the offsets are stored and auto-committed)."""

    def begin(self) -> None:
        """Nothing to begin."""

    def commit(
        self, positions: Sequence[TopicPartition], held: Mapping[int, TopicPartition]
    ) -> None:
        """Nothing to commit here: the loop stores offsets."""

    def abort(self) -> Rewind | None:
        """Nothing to abort; the batch is read again from its first offsets."""
        return None


class _Abortable(DeliveryError):
    """The transaction must be aborted (or a retriable call ran out of time)."""


class _Unusable(DeliveryError):
    """The producer is unusable (fatal, not fenced) or a call is stuck: replace it."""


class Transactions:
    """One transaction per batch on a transactional producer.

    Args:
        producer: a confluent-kafka producer with `transactional.id` set;
            `init_transactions` is called here (it contacts the broker).
        consumer: the loop's consumer (`position`, `consumer_group_metadata`,
            `assignment`, `committed`).
        timeout_s: how long each transactional call may take.
        renew: builds a new producer with the same settings (the same
            `transactional.id`); None: an unusable producer stops the worker.
        replaced: told each new producer (the batch's writes go through it).
        grace_s: how long past `timeout_s` a call may take before it is stuck.
    """

    def __init__(
        self,
        producer: Any,
        consumer: Any,
        timeout_s: float,
        *,
        renew: Callable[[], Any] | None = None,
        replaced: Callable[[Any], None] | None = None,
        grace_s: float = GRACE_S,
    ) -> None:
        self.producer = producer
        self._consumer = consumer
        self._timeout_s = timeout_s
        self._renew = renew
        self._replaced = replaced
        self._grace_s = grace_s
        self._calls = CallThread()
        self._open = False
        self._unknown = False
        """The batch's transaction ended with its producer: its outcome is the
        group coordinator's to say (`abort` reads the committed offsets)."""
        self._in_a_row = 0
        self.commits = 0
        self.aborts = 0
        self.replacements = 0
        self.stuck = 0
        self._init()

    def begin(self) -> None:
        """Begin the batch's transaction (after an abort or a new producer if the
        last one left the producer unable to).

        Raises:
            FatalError: it could not begin even so.
        """
        for _ in range(MAX_REPLACEMENTS + 1):
            try:
                self._call(self.producer.begin_transaction, "begin_transaction")
            except _Unusable as exc:
                self._replace(str(exc))
                continue
            except _Abortable as exc:
                log.warning("transaction_begin_failed", error=str(exc))
                self._open = True  # whatever is open: abort it (or replace)
                self.abort()  # nothing of a batch to rewind: none was read since
                continue
            self._open = True
            return
        raise FatalError("begin_transaction failed after aborts and new producers")

    def commit(
        self, positions: Sequence[TopicPartition], held: Mapping[int, TopicPartition]
    ) -> None:
        """Send the consumed positions (a rewound, `held`, partition's: the offset
        it was rewound to, nothing past it being done) to the transaction and
        commit it.

        Raises:
            DeliveryError: the transaction failed: the caller calls `abort`, which
                says where to read again from.
            FatalError: this producer was fenced, or no new one could commit.
        """
        done = []
        if positions:
            done = [
                tp
                for at in self._consumer.position(list(positions))
                if (tp := held.get(at.partition, at)).offset >= 0
            ]
        try:
            if done:
                metadata = self._consumer.consumer_group_metadata()
                self._call(
                    lambda: self.producer.send_offsets_to_transaction(
                        done, metadata, self._timeout_s
                    ),
                    "send_offsets_to_transaction",
                )
            self._call(
                lambda: self.producer.commit_transaction(self._timeout_s),
                "commit_transaction",
            )
        except _Unusable as exc:
            self._replace(str(exc))
            self._unknown = True
            raise DeliveryError(str(exc)) from None
        self._open = False
        self._in_a_row = 0
        self.commits += 1

    def abort(self) -> Rewind | None:
        """End the batch's failed transaction; its writes are never visible.

        Returns:
            None: the batch is read again from its first offsets (the transaction
            was aborted, so they are the committed ones); else the group's
            committed offsets to read it again from (the producer was replaced and
            the transaction's outcome is known only to the group coordinator).

        Raises:
            FatalError: no new producer could be made, or the committed offsets
                could not be read: a restart begins from them.
        """
        if self._unknown:
            self._unknown = False
            return self._committed()
        if not self._open:
            return None
        self._open = False
        self.aborts += 1
        try:
            self._call(
                lambda: self.producer.abort_transaction(self._timeout_s),
                "abort_transaction",
            )
        except DeliveryError as exc:
            self._replace(f"abort failed: {exc}")
            return self._committed()
        return None

    # -- the producer's lifecycle ---------------------------------------------------

    def _init(self, deadline_s: float | None = None) -> None:
        try:
            self._call(
                lambda: self.producer.init_transactions(self._timeout_s),
                "init_transactions",
                deadline_s,
            )
        except DeliveryError as exc:
            raise FatalError(f"cannot use transactions: {exc}") from None

    def _replace(self, why: str) -> None:
        """A new producer with the same `transactional.id` in place of this one."""
        if self._renew is None:
            raise FatalError(why)
        self._in_a_row += 1
        if self._in_a_row > MAX_REPLACEMENTS:
            raise FatalError(f"{why} ({MAX_REPLACEMENTS} new producers made no commit)")
        if self.stuck > MAX_STUCK:
            raise FatalError(f"{why} ({self.stuck} calls stuck in librdkafka)")
        log.warning("transactional_producer_replaced", reason=why)
        self._calls.abandon()  # its thread ends if its call ever returns
        self._calls = CallThread()
        self._open = False
        self.producer = self._renew()
        self.replacements += 1
        # Fences the old producer; ends its open transaction first.
        self._init(max(_INIT_DEADLINE_S, self._timeout_s))
        if self._replaced is not None:
            self._replaced(self.producer)

    def _committed(self) -> Rewind:
        """The group's committed offset of each assigned partition that has one."""
        try:
            tps = self._consumer.committed(
                self._consumer.assignment(), timeout=self._timeout_s
            )
        except KafkaException as exc:
            raise FatalError(
                f"committed offsets unknown after a new producer: {exc.args[0].str()}"
            ) from None
        return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}

    def _call(self, call: Any, what: str, deadline_s: float | None = None) -> None:
        """`call()` on the call thread, retried while librdkafka says retriable,
        for up to `deadline_s` (the timeout by default).

        Raises:
            _Abortable: the transaction must be aborted.
            _Unusable: the producer is unusable, or the call is stuck.
            FatalError: the producer was fenced.
        """
        deadline = time.monotonic() + (deadline_s or self._timeout_s)
        while True:
            try:
                self._calls.call(call, self._timeout_s + self._grace_s, what)
                return
            except Stuck as exc:
                self.stuck += 1
                raise _Unusable(str(exc)) from None
            except KafkaException as exc:
                err = exc.args[0]
                text = f"{what} failed: {err.name()}: {err.str()}"
                kind = error_class(err)
                if kind == "fatal" and err.code() in _FENCED:
                    raise FatalError(
                        f"{text} (fenced: a newer instance took this transactional id)"
                    ) from None
                if kind == "fatal":
                    raise _Unusable(text) from None
                if kind == "retry" and time.monotonic() < deadline:
                    time.sleep(_RETRY_PAUSE_S)
                    continue
                raise _Abortable(text) from None
