"""The per-message code of the hot loop: decode, handle and drop each message.

`MessagePath.run` handles a run of consumed messages and does per message only what
the work needs: the consumer-error and size checks, the decode, the logic, the
bytes count. It is built once per configuration (STYLE.md 26), so nothing in it
tests the configuration: a fixed codec with no output topic (the common case, and
every A/B case) gets a loop without the `auto` and output branches, one with the
logic step and one without (`--logic noop`); the `auto` codec or an output topic
get the general loop. Whatever is unusual (a consumer error, no value, a value over
`max_payload_bytes`, a decode or logic failure) leaves the loop through one
`except` and is sorted out off the common path (`_failed`, `_rejected`).

A framed value whose schema the registry could not give (down, refusing this client)
is no dead letter: its partition waits (`service.loop.registry_wait`).

A framed codec's value that failed to decode and carries a `__value_schema_id`
header (confluent-kafka 2.x's header form: the value unframed, its schema id in the
header) is decoded again there, by the header (`_failed` returns the object and the
loop goes on with it): the header is read on the failure path only, so a message
without it costs not one instruction more.

`MessagePath.timed` handles one message the same way and times its decode and its
logic alone (`perf_counter_ns`, wall time; the batch loop takes the clock's own cost,
`clock_overhead_ns`, off each sample). The batch loop hands
it every k-th message and the runs in between to `run`, so the histograms hold
single decodes and the other messages pay nothing for the timing.

Performance note: counted with callgrind (`make bench-instructions`, deterministic),
the worker adds ~1,300 machine instructions a message to a bare `decode(m.value())`
loop, the same for every codec: ~570 for the checks any safe loop makes
(`m.error()`, the size limit), ~300 for the rest of `run`, ~170 for timing every
32nd decode, ~270 for the per-batch metrics and offset store. The loop this replaced
(a countdown and configuration tests per message) added ~1,830. Against a protobuf
decode of a medium order event (12,700 instructions, the cheapest codec) that is
10 %; in a real drain such a message costs ~3 us of CPU in all (`consume()` and
librdkafka's fetch thread included), of which the worker's main thread spends 0.1-0.3
us more than a bare loop's (`make bench`, per-thread figures in `--json`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from time import perf_counter_ns
from typing import Any, Final

from codec import AutoCodec, Codec
from codec.registry.frame import SCHEMA_ID_HEADER
from schemas.errors import DeliveryError
from service.delivery.dead_letters import Poison
from service.delivery.outputs import Emit
from service.kafka.headers import CONTENT_TYPE
from service.kafka.protocols import KafkaMessage
from service.loop.message_budget import OverBudget
from service.loop.registry_wait import wait_if_registry
from service.loop.timer_overhead import clock_overhead_ns as clock_overhead_ns

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
        consumer_error: called with a consumer error delivered in place of a
            message (counts it; raises `FatalError` if it is fatal).
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
        consumer_error: Callable[[Any], None],
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
    # Python call per message (~60 ns), and one loop testing `step`, `emit` and the
    # codec kind would cost ~15-20 ns a test, which is what building them once saves.
    # `len(value)` of a missing value (None) raises TypeError, which the `except`
    # sorts out with the other unusual cases: one test fewer per message.

    def _plain_noop(self, decode: Callable[[bytes], object]) -> Run:
        limit, failed = self._limit, self._failed

        def run(msgs: Sequence[KafkaMessage], tally: Tally) -> int:
            nbytes = 0
            for m in msgs:
                value = m.value()
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
        limit, failed, rejected = self._limit, self._failed, self._rejected

        def run(msgs: Sequence[KafkaMessage], tally: Tally) -> int:
            nbytes = 0
            for m in msgs:
                value = m.value()
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
                value = m.value()
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
        the clock readings (the `auto` codec's choice by header is made before)."""
        limit, failed, rejected = self._limit, self._failed, self._rejected
        pick, step, emit = self._pick, self._step, self._emit
        unencodable, clock = self._unencodable, perf_counter_ns

        def timed(
            m: KafkaMessage, tally: Tally, decode_ns: list[int], handle_ns: list[int]
        ) -> int:
            value = m.value()
            try:
                if m.error() is not None or (size := len(value)) > limit:  # type: ignore[arg-type]
                    raise _Unusable
                decoder = decode if pick is None else pick(m)
                t0 = clock()
                obj = decoder(value)  # type: ignore[arg-type]
                t1 = clock()
            except MemoryError:
                raise
            except (Exception, OverBudget) as exc:
                if (obj := failed(m, exc, tally)) is _UNDECODED:
                    return 0
                t1 = clock()  # decoded by its header: that decode is not timed
            else:
                decode_ns.append(t1 - t0)
            out = None
            if step is not None:
                try:
                    out = step(obj)
                    handle_ns.append(clock() - t1)
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
        err = m.error()
        if err is not None:
            tally.errors += 1
            self._consumer_error(err)
            return _UNDECODED
        value = m.value()
        if isinstance(exc, OverBudget):
            tally.poison.append(Poison.over_budget(m, self._name, exc, "decode"))
        elif value is None or len(value) > self._limit:
            tally.poison.append(Poison.unusable(m, self._name, self._limit))
        else:
            if self._headed is not None and (header := _schema_id(m)) is not None:
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
        value, header = m.value(), self._headed and _schema_id(m)
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
    """The `auto` codec's choice: the decoder named by a message's header (raises
    `DecodeError` for an unknown one)."""
    codec_for = codec.codec_for

    def pick(m: KafkaMessage) -> Callable[[bytes], Any]:
        return codec_for(_content_type(m)).decode_unchecked

    return pick


def _schema_id(m: KafkaMessage) -> bytes | None:
    for key, value in m.headers() or ():
        if key == SCHEMA_ID_HEADER:
            return value  # type: ignore[no-any-return]
    return None


def _content_type(m: KafkaMessage) -> bytes | None:
    for key, value in m.headers() or ():
        if key == CONTENT_TYPE:
            return value  # type: ignore[no-any-return]
    return None
