"""A transactional producer's calls, each with a deadline librdkafka cannot overrun.

librdkafka's transactional calls take a timeout, and most honour it. One does not:
`send_offsets_to_transaction` hands its `TxnOffsetCommit` to a coordinator request
whose timeout is set and never checked (librdkafka #5456, still open at 2.16): when
the group coordinator goes away (a broker restart) and no later broker state change
wakes the request (librdkafka #5511: a coordinator dropped from the metadata is
never looked up again), the call blocks forever, well past its timeout, with the
broker back. The exactly-once worker saw exactly this on a single-node restart.

So each call runs on a helper thread of its own producer (`CallThread`) and the
caller waits for it with a deadline: the call's own timeout plus `GRACE_S`. A call
that has not returned by then is `Stuck`: the producer is given up (its thread is
left blocked in librdkafka, a daemon thread that cannot keep the process alive) and
`service.delivery.transactions` builds a new one with the same `transactional.id`,
whose `init_transactions` fences the old one and ends its open transaction.

An error a call returns is sorted by librdkafka's own classes (`txn_errors`):
fatal, then `txn_requires_abort`, then retriable; anything else is handled as
abortable (the transaction is aborted and the batch read again).

Performance note: a hand-off to the thread and back costs about 20-40 us; the
worker makes three calls per batch (begin, offsets, commit), each of which is a
round trip to librdkafka's own thread anyway (the offsets and the commit also to
the broker), and only under exactly-once.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, Final, Literal

from schemas.errors import DeliveryError

GRACE_S: Final = 5.0
"""How long past its own timeout a call may take before it counts as stuck. A
call that honours its timeout returns within milliseconds of it (librdkafka checks
its timers every 100 ms or faster); 5 s is far outside that and far inside
`max.poll.interval.ms` (300 s)."""

ErrorClass = Literal["fatal", "abort", "retry"]


class Stuck(DeliveryError):
    """A transactional call did not return by its deadline: the producer is given up."""


def error_class(err: Any) -> ErrorClass:
    """librdkafka's class of a transactional call's `KafkaError`, most severe first.

    `fatal()`: the producer is unusable (fenced, or an unrecoverable broker answer);
    `txn_requires_abort()`: the transaction must be aborted and the batch read
    again; `retriable()`: the same call may be made again. An error with none of
    the three (a local state error, say) is handled as abortable: aborting is always
    safe, and retrying a call librdkafka did not call retriable is not.
    """
    if err.fatal():
        return "fatal"
    if err.txn_requires_abort():
        return "abort"
    if err.retriable():
        return "retry"
    return "abort"


class _Call:
    __slots__ = ("done", "error", "fn")

    def __init__(self, fn: Callable[[], object]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.fn()
        except BaseException as exc:  # handed to the caller, raised there
            self.error = exc
        self.done.set()


class CallThread:
    """One daemon thread that makes one producer's calls, one at a time.

    Args:
        name: the thread's name (shown in a stack dump of a stuck worker).
    """

    def __init__(self, name: str = "txn-calls") -> None:
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def call(self, fn: Callable[[], object], deadline_s: float, what: str) -> None:
        """`fn()` on the thread; raises what it raises.

        Raises:
            Stuck: it had not returned after `deadline_s`; the thread is still in
                it, so this `CallThread` must not be used again (`abandon`).
        """
        job = _Call(fn)
        self._calls.put(job)
        if not job.done.wait(deadline_s):
            raise Stuck(
                f"{what} did not return in {deadline_s:.0f} s (librdkafka #5456: "
                "a coordinator request that never times out)"
            )
        if job.error is not None:
            raise job.error

    def abandon(self) -> None:
        """Stop the thread once its current call returns (if it ever does)."""
        self._calls.put(None)

    def _serve(self) -> None:
        while (job := self._calls.get()) is not None:
            job.run()
