"""The per-message code of the hot loop: decode, handle and drop each message.

`MessagePath.run` handles a run of consumed messages and does per message only what
the work needs: the consumer-error and size checks, the decode, the logic, the
bytes count. It is built once per configuration (STYLE.md 26), so nothing in it
tests the configuration: a fixed codec with no output topic (the common case, and
every A/B case) gets a loop without the `auto` and output branches, one with the
logic step and one without (`--logic noop`); the `auto` codec or an output topic
get the general loop. Whatever is unusual (a consumer error, no value or an empty
one, a value over `max_payload_bytes`, a decode or logic failure) leaves the loop
through one `except`, sorted out off the common path (`_failed`, `_rejected`): an
empty value is read as None, so it is dead-lettered `empty` before a codec sees it.

A framed value whose schema the registry could not give (down, refusing this client)
is no dead letter: its partition waits (`service.loop.registry_wait`).

A framed codec's value that failed to decode and carries a `__value_schema_id`
header (confluent-kafka 2.x's header form: the value unframed, its schema id in the
header) is decoded again there, by the header (`_failed` returns the object and the
loop goes on with it): the header is read on the failure path only, so a message
without it costs not one instruction more.

`MessagePath.timed` handles one message the same way and times its decode and logic
alone in the worker thread's CPU time, leaving out a call whose thread was descheduled
(`service.loop.sample_clock`). The batch loop hands it every k-th message and the runs
between to `run`: the histograms hold single decodes, the rest pay nothing for them.

Performance note: `make bench-instructions` counts with callgrind (deterministic)
what the worker adds per message to a bare `decode(m.value())` loop, part by part
(the checks any safe loop makes, the rest of `run`, the timing, the per-batch
metrics and offset store); docs/benchmarks.md has the figures per codec.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from codec import AutoCodec, Codec
from codec.registry.frame import SCHEMA_ID_HEADER
from schemas.errors import DeliveryError
from service.delivery.dead_letters import Poison
from service.delivery.outputs import Emit
from service.kafka.headers import CONTENT_TYPE, last_header
from service.kafka.protocols import KafkaMessage
from service.loop.message_budget import OverBudget
from service.loop.registry_wait import wait_if_registry
from service.loop.sample_clock import DESCHEDULED_NS, cpu_clock, wall_clock

Step = Callable[[Any], object]
"""The business logic for one decoded message; raises to reject it."""


_REJECTED: Final = object()
"""What `_rejected` returns when every attempt failed (a step may return None)."""

_UNDECODED: Final = object()
"""What `_failed` returns when the message is not decoded (set aside or an error)."""

Run = Callable[[Sequence[KafkaMessage], "Tally"], int]
"""Handles a run of messages; returns the payload bytes of those handled."""

Timed = Callable[[KafkaMessage, "Tally", list[int], list[int]], int]
"""Handles one message, appending its decode and logic times in ns to the lists."""


class Tally:
    """What a batch's messages came to besides the bytes handled."""

    __slots__ = ("errors", "poison")

    def __init__(self) -> None:
        self.poison: list[Poison] = []
        """Messages set aside for the dead-letter topic, in order."""
        self.errors = 0
        """Consumer errors delivered in place of messages (not messages)."""


class _Unusable(Exception):
    """A consumer error, or a value that is missing or too large: not decoded."""


class MessagePath:
    """The per-message code for one configuration.

    Args:
        codec: the configured codec (an `AutoCodec` reads `content-type`).
        step: the logic for one message, None for none (`noop`).
        emit: writes a result downstream, None for no output topic.
        max_payload_bytes: larger values are rejected before decoding.
        consumer_error: called with a message whose `error()` is set (counts and
            logs it; raises `FatalError` if it is fatal); returns the `Poison`
            for a range of unreadable data, else None
            (`service.delivery.unreadable`).
        retried: called once per logic retry (the retry metric).
        max_attempts: attempts of `step` per message before it is dead-lettered.
        retry_backoff_s: the pause before the first retry, doubled after each.
    """

    def __init__(
        self,
        codec: Codec[Any],
        *,
        step: Step | None,
        emit: Emit | None,
        max_payload_bytes: int,
        consumer_error: Callable[[KafkaMessage], Poison | None],
        retried: Callable[[], None],
        max_attempts: int = 1,
        retry_backoff_s: float = 0.0,
    ) -> None:
        self._name = self.codec_name = codec.name
        self._step = step
        self._emit = emit
        self._limit = max_payload_bytes
        self._consumer_error = consumer_error
        self._retried = retried
        self._attempts = max_attempts
        self._backoff_s = retry_backoff_s
        self._decode = codec.decode_unchecked
        self._pick = _by_content_type(codec) if isinstance(codec, AutoCodec) else None
        self._headed: Callable[[bytes, bytes], Any] | None = getattr(
            codec, "decode_headed", None
        )
        """A framed codec's decode by the `__value_schema_id` header (`_failed`)."""
        self.run: Run
        self.timed: Timed
        """Handles one message as `run` would, timing its decode and its logic alone;
        returns its payload bytes if it was handled, else 0."""
        self.rebind(step)
        self.hot_code = (self.run.__code__, self.timed.__code__, _REJECTED_CODE)
        """The per-message functions' code, each holding the message in `m`
        (`service.loop.message_budget` finds the message in hand by it)."""

    def rebind(self, step: Step | None) -> None:
        """Build the loops for `step`; called again, from the next run on
        (`FirstCallProbe`: a team's handler whose first call said it is sync)."""
        self._step, decode = step, self._decode
        if self._pick is not None or self._emit is not None:
            self.run = self._general(decode)
        elif step is None:
            self.run = self._plain_noop(decode)
        else:
            self.run = self._plain(decode, step)
        self.timed = self._timed(decode)

    # -- the loops ------------------------------------------------------------------------
    # The three loops repeat their first lines on purpose: a shared helper would cost a
    # Python call per message (~60 ns), one loop testing `step`, `emit` and the codec
    # kind ~15-20 ns a test. `len(None)` raises TypeError, sorted out by the `except`:
    # one test fewer per message. The plain loops' defaults are fast locals, not cells.

    def _plain_noop(self, decode: Callable[[bytes], object]) -> Run:
        def run(
            msgs: Sequence[KafkaMessage],
            tally: Tally,
            limit: int = self._limit,
            decode: Callable[[bytes], object] = decode,
            failed: Any = self._failed,
        ) -> int:
            nbytes = 0
            for m in msgs:
                value = m.value() or None  # empty: `len` raises, as for None
                try:
                    if m.error() is not None or (size := len(value)) > limit:  # type: ignore[arg-type]
                        raise _Unusable
                    decode(value)  # type: ignore[arg-type]
                except MemoryError:
                    raise
                except (Exception, OverBudget) as exc:
                    if failed(m, exc, tally) is _UNDECODED:
                        continue
                nbytes += size
            return nbytes

        return run

    def _plain(self, decode: Callable[[bytes], object], step: Step) -> Run:
        def run(
            msgs: Sequence[KafkaMessage],
            tally: Tally,
            limit: int = self._limit,
            decode: Callable[[bytes], object] = decode,
            step: Step = step,
            failed: Any = self._failed,
            rejected: Any = self._rejected,
        ) -> int:
            nbytes = 0
            for m in msgs:
                value = m.value() or None  # empty: `len` raises, as for None
                try:
                    if m.error() is not None or (size := len(value)) > limit:  # type: ignore[arg-type]
                        raise _Unusable
                    obj = decode(value)  # type: ignore[arg-type]
                except MemoryError:
                    raise
                except (Exception, OverBudget) as exc:
                    if (obj := failed(m, exc, tally)) is _UNDECODED:
                        continue
                try:
                    step(obj)
                except MemoryError:
                    raise
                except (Exception, OverBudget) as exc:
                    if rejected(m, obj, exc, tally) is _REJECTED:
                        continue
                nbytes += size
            return nbytes

        return run

    def _general(self, decode: Callable[[bytes], object]) -> Run:
        """The `auto` codec or an output topic: the branches the plain loops skip."""
        limit, failed, rejected = self._limit, self._failed, self._rejected
        pick, step, emit = self._pick, self._step, self._emit
        unencodable = self._unencodable

        def run(msgs: Sequence[KafkaMessage], tally: Tally) -> int:
            nbytes = 0
            for m in msgs:
                value = m.value() or None  # empty: `len` raises, as for None
                try:
                    if m.error() is not None or (size := len(value)) > limit:  # type: ignore[arg-type]
                        raise _Unusable
                    obj = (decode if pick is None else pick(m))(value)  # type: ignore[arg-type]
                except MemoryError:
                    raise
                except (Exception, OverBudget) as exc:
                    if (obj := failed(m, exc, tally)) is _UNDECODED:
                        continue
                out = None
                if step is not None:
                    try:
                        out = step(obj)
                    except MemoryError:
                        raise
                    except (Exception, OverBudget) as exc:
                        if (out := rejected(m, obj, exc, tally)) is _REJECTED:
                            continue
                if emit is not None and unencodable(emit, m, obj, out, tally):
                    continue
                nbytes += size
            return nbytes

        return run

    def _timed(self, decode: Callable[[bytes], object]) -> Timed:
        """The timed path: only the library's decode call and the logic are inside
        the clock readings (the `auto` codec's choice by header is made before),
        the CPU clock's inside the wall clock's (`DESCHEDULED_NS`)."""
        limit, failed, rejected = self._limit, self._failed, self._rejected
        pick, step, emit = self._pick, self._step, self._emit
        unencodable, cpu, wall = self._unencodable, cpu_clock, wall_clock
        away = DESCHEDULED_NS

        def timed(
            m: KafkaMessage, tally: Tally, decode_ns: list[int], handle_ns: list[int]
        ) -> int:
            value = m.value() or None  # empty: `len` raises, as for None
            try:
                if m.error() is not None or (size := len(value)) > limit:  # type: ignore[arg-type]
                    raise _Unusable
                decoder = decode if pick is None else pick(m)
                w0, c0 = wall(), cpu()
                obj = decoder(value)  # type: ignore[arg-type]
                c1, w1 = cpu(), wall()
            except MemoryError:
                raise
            except (Exception, OverBudget) as exc:
                if (obj := failed(m, exc, tally)) is _UNDECODED:
                    return 0
                c1, w1 = (
                    cpu(),
                    wall(),
                )  # decoded by its header: that decode is not timed
                kept = True
            else:
                if kept := w1 - w0 - (c1 - c0) < away:
                    decode_ns.append(c1 - c0)
            out = None
            if step is not None:
                try:
                    out = step(obj)
                    c2, w2 = cpu(), wall()
                    if kept and w2 - w1 - (c2 - c1) < away:
                        handle_ns.append(c2 - c1)
                except MemoryError:
                    raise
                except (Exception, OverBudget) as exc:
                    # Not timed: a retry's time includes its back-off.
                    if (out := rejected(m, obj, exc, tally)) is _REJECTED:
                        return 0
            if emit is not None and unencodable(emit, m, obj, out, tally):
                return 0
            return size

        return timed

    # -- off the common path --------------------------------------------------------------

    def _failed(self, m: KafkaMessage, exc: BaseException, tally: Tally) -> object:
        """A message the loop could not decode: say why (`exc` may be `_Unusable`).

        Returns:
            `_UNDECODED`; or, for a framed codec's value that carries a
            `__value_schema_id` header, the object decoded by that header (the
            header wins over the value's first bytes, as in confluent-kafka's
            `dual_schema_id_deserializer`): the loop goes on with it.
        """
        if m.error() is not None:
            if (unreadable := self._consumer_error(m)) is None:
                tally.errors += 1
            else:
                tally.poison.append(unreadable)
            return _UNDECODED
        value = m.value()
        if isinstance(exc, OverBudget):
            tally.poison.append(Poison.over_budget(m, self._name, exc, "decode"))
        elif not value or len(value) > self._limit:
            tally.poison.append(Poison.unusable(m, self._name, self._limit))
        else:
            if self._headed is not None and (
                header := last_header(m.headers(), SCHEMA_ID_HEADER)
            ):
                try:
                    return self._headed(header, value)
                except MemoryError:
                    raise
                except Exception as again:  # the header's error is the one to tell
                    exc = again
            wait_if_registry(m, exc)  # the registry's failure, not the message's
            tally.poison.append(Poison.undecodable(m, self._name, exc))  # type: ignore[arg-type]
        return _UNDECODED

    def _rejected(
        self, m: KafkaMessage, obj: Any, exc: BaseException, tally: Tally
    ) -> object:
        """Retry the logic in place (order is kept), each attempt on the message
        decoded again, up to the budget of attempts; not one over its time budget.

        Returns:
            What the attempt that passed returned, or `_REJECTED` if every attempt
            failed: the message is set aside as poison.
        """
        assert self._step is not None  # noqa: S101 (only called after a step failed)
        attempt = 1
        while attempt < self._attempts and not isinstance(exc, OverBudget):
            attempt += 1
            try:
                time.sleep(self._backoff_s * 2 ** (attempt - 2))
                self._retried()
                return self._step(self._fresh(m))
            except MemoryError:
                raise
            except (Exception, OverBudget) as again:
                exc = again
                continue
        if isinstance(exc, OverBudget):
            tally.poison.append(Poison.over_budget(m, self._name, exc, "process"))
        else:
            tally.poison.append(Poison.rejected(m, exc, attempt))  # type: ignore[arg-type]
        return _REJECTED

    def _fresh(self, m: KafkaMessage) -> Any:
        """`m` decoded again: a retry never sees what an attempt changed."""
        value = m.value()
        header = self._headed and last_header(m.headers(), SCHEMA_ID_HEADER)
        if header:
            return self._headed(header, value)  # type: ignore[misc, arg-type]
        return (self._decode if self._pick is None else self._pick(m))(value)  # type: ignore[arg-type]

    def _unencodable(
        self, emit: Emit, m: KafkaMessage, obj: Any, out: object, tally: Tally
    ) -> bool:
        """Write the result; True if the output codec refused it (then poison)."""
        try:
            emit(m, obj, out)
        except (MemoryError, DeliveryError):
            raise
        except Exception as exc:
            tally.poison.append(Poison.unencodable(m, self._name, exc))
            return True
        return False


_REJECTED_CODE: Final = MessagePath._rejected.__code__


def _by_content_type(
    codec: AutoCodec,
) -> Callable[[KafkaMessage], Callable[[bytes], Any]]:
    """The `auto` codec's choice: the decoder named by a message's last
    `content-type` header (raises `DecodeError` for an unknown one)."""
    codec_for = codec.codec_for

    def pick(m: KafkaMessage) -> Callable[[bytes], Any]:
        return codec_for(last_header(m.headers(), CONTENT_TYPE)).decode_unchecked

    return pick
