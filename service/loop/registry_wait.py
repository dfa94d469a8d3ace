"""A message whose schema the registry could not give: its partition waits.

A framed codec asks the registry once per schema id. When it cannot (no answer
within the client's bounded attempts, a login refused, a certificate no longer
trusted: `DecodeError` reason `registry_unavailable`), the message is not at fault:
dead-lettering it would dead-letter every message of a new id for as long as the
registry is down. Instead the per-message code raises `RegistryWait`
(`wait_if_registry`), and the batch loop (`after_wait`) stops that partition at
that message for this batch, hands it to the hold (`service.delivery.held_partitions`:
paused, rewound to the message, `/readyz` 503 and `worker_degraded` 1 with the
reason, `worker_registry_waits_total` counted, retried after a back-off of 1 s
doubling to 30 s) and handles the batch's other partitions. Nothing of the waiting
partition is stored past the message. When a retry's lookup is answered, the
partition goes on; an id the registry answers it does not know (HTTP 404) is a dead
letter (`schema_unknown`), the only lookup failure that is.

Performance note: nothing here runs on the per-message path; a batch without a
wait costs nothing (the batch loop's `try` is free until it raises).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from codec.registry.client import UNAVAILABLE
from service.delivery.dead_letters import Poison
from service.delivery.held_partitions import Hold
from service.kafka.protocols import KafkaMessage


class Tally(Protocol):
    """What a batch's messages came to (`service.loop.hotpath.Tally`, which imports
    this module)."""

    poison: list[Poison]


HandleEach = Callable[[Sequence[KafkaMessage], Any, list[int], list[int]], int]
"""The batch loop's `_handle_each`: handles messages, returns their payload bytes."""


class RegistryWait(Exception):
    """A message whose schema the registry could not give: neither handled nor a
    dead letter; its partition waits for the registry."""

    def __init__(self, message: KafkaMessage, error: BaseException) -> None:
        super().__init__(str(error))
        self.message = message


def wait_if_registry(m: KafkaMessage, exc: BaseException) -> None:
    """Raise `RegistryWait` if ``exc`` is the registry's failure, not ``m``'s."""
    if getattr(exc, "reason", None) == UNAVAILABLE:
        raise RegistryWait(m, exc)


def after_wait(
    handle_each: HandleEach,
    first: RegistryWait,
    msgs: Sequence[KafkaMessage],
    tally: Tally,
    hold: Hold,
) -> tuple[Sequence[KafkaMessage], int]:
    """The rest of a batch whose handling stopped at ``first``: its partition is
    held (by ``hold``, the loop's) from that message on, the batch's other
    partitions are handled (and any other waiting one held the same way).

    Returns:
        The messages handled (a waiting partition's from the waiting message on
        left out) and their payload bytes.
    """
    handled: list[KafkaMessage] = []
    waiting: list[KafkaMessage] = []
    nbytes, rest, wait = 0, msgs, first
    decode_ns: list[int] = []  # the rest's samples are not timed: a rare path
    handle_ns: list[int] = []
    while True:
        at = next(i for i, m in enumerate(rest) if m is wait.message)
        handled += rest[:at]
        nbytes += _handled_bytes(rest[:at], tally)
        waiting.append(wait.message)
        stopped = wait.message.partition()
        rest = [m for m in rest[at + 1 :] if m.partition() != stopped]
        try:
            if rest:
                nbytes += handle_each(rest, tally, decode_ns, handle_ns)
                handled += rest
            break
        except RegistryWait as again:
            wait = again
    hold.fail(waiting, wait, registry=True)
    return handled, nbytes


def _handled_bytes(msgs: Sequence[KafkaMessage], tally: Tally) -> int:
    """The payload bytes of ``msgs`` that were handled (not errors, not poison), as
    the per-message code counts them."""
    poison = {id(p.message) for p in tally.poison}
    return sum(
        len(value)
        for m in msgs
        if m.error() is None
        and (value := m.value()) is not None
        and id(m) not in poison
    )
