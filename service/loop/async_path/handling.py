"""One message on the async path: decoded, then the handler awaited, with its retries.

The decode and what makes a message unusable (no value, over `max_payload_bytes`,
undecodable, a framed value decoded by its `__value_schema_id` header) are the
sync loop's own (`service.loop.hotpath.MessagePath`), so both paths set aside the
same messages with the same dead-letter headers. A handler that raises is retried
up to `max_attempts`, the back-off awaited (other messages go on meanwhile), each
retry on the message decoded again: a retry never sees what an attempt changed
(one decode per retry). A message past `budget_s` is cancelled where it awaits
(`sweep`, every `SWEEP_S` of the loop) and set aside with reason `budget`.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from time import perf_counter_ns
from typing import Any, Final

from codec import Codec
from service.delivery.dead_letters import Poison
from service.loop.async_path.event_loop import CpuTimed
from service.loop.async_path.inflight import Entry
from service.loop.hotpath import _UNDECODED, MessagePath, Tally, _Unusable
from service.loop.message_budget import OverBudget
from service.telemetry.metrics import Metrics

SAMPLE_EVERY: Final = 32
"""Time the decode and the handler's CPU of every 32nd message (`CpuTimed`)."""
SWEEP_S: Final = 0.1
"""How often the loop checks the message budget (its resolution)."""


class Handling:
    """The per-message work of the async path.

    Args:
        codec: the configured codec.
        step: the team's handler.
        metrics: the worker's metrics (retries are counted as they happen).
        max_payload_bytes: larger values are set aside undecoded.
        max_attempts: attempts of the handler per message.
        retry_backoff_s: the pause before the first retry, doubled after each.
        budget_s: the per-message budget (0: none).
        consumer_error: what the sync path does with a consumer error.
    """

    def __init__(
        self,
        codec: Codec[Any],
        step: Callable[[Any], object],
        metrics: Metrics,
        *,
        max_payload_bytes: int,
        max_attempts: int,
        retry_backoff_s: float,
        budget_s: float,
        consumer_error: Callable[[Any], None],
    ) -> None:
        self._path = MessagePath(
            codec,
            step=None,
            emit=None,
            max_payload_bytes=max_payload_bytes,
            consumer_error=consumer_error,
            retried=metrics.logic_retries.inc,
        )
        self._retried = metrics.logic_retries.inc
        self._decode = codec.decode_unchecked
        self._codec = codec.name
        self._limit = max_payload_bytes
        self._step = step
        self._attempts = max_attempts
        self._backoff_s = retry_backoff_s
        self.budget_s = budget_s
        self._running: dict[Entry, tuple[float, asyncio.Task[Any]]] = {}
        self._over: set[Entry] = set()
        self._counter = 0
        self.decode_ns: list[int] = []
        """Sampled decodes' wall time since the last release."""
        self.handle_ns: list[int] = []
        """Every handled message's handler wall time (awaits included)."""
        self.cpu_ns: list[int] = []
        """Sampled handlers' CPU in their own steps (`CpuTimed`)."""

    async def handle(self, entry: Entry) -> None:
        """Decode the entry's message, then await the handler (retried on a fresh
        decode): its result or its poison is set on the entry. A stop's
        cancellation propagates (the message stays unfinished)."""
        self._counter += 1
        sampled = self._counter % SAMPLE_EVERY == 0
        obj = self._decoded(entry, sampled)
        if obj is _UNDECODED:
            return
        task = asyncio.current_task()
        assert task is not None  # noqa: S101 (always inside the loop's tasks)
        self._running[entry] = (time.monotonic(), task)
        try:
            await self._attempts_of(entry, obj, sampled)
        except asyncio.CancelledError:
            if entry not in self._over:
                raise  # a stop: not done, never stored
            self._over.discard(entry)
            task.uncancel()
            over = OverBudget(self.budget_s, self.budget_s)
            entry.poison = Poison.over_budget(
                entry.message, self._codec, over, "process"
            )
        finally:
            self._running.pop(entry, None)

    def sweep(self, now: float) -> None:
        """Cancel, where they await, the handlers past the message budget."""
        for entry, (start, task) in list(self._running.items()):
            if now - start > self.budget_s and entry not in self._over:
                self._over.add(entry)
                task.cancel()

    async def _attempts_of(self, entry: Entry, obj: Any, sampled: bool) -> None:
        m, step, clock = entry.message, self._step, perf_counter_ns
        attempt = 1
        while True:
            t0 = clock()
            try:
                out = step(obj)
                if inspect.isawaitable(out):
                    if sampled:
                        timed = CpuTimed(out)
                        out = await timed
                        self.cpu_ns.append(timed.cpu_ns)
                    else:
                        out = await out
            except Exception as exc:
                if attempt >= self._attempts:
                    entry.poison = Poison.rejected(m, exc, attempt)
                    return
                attempt += 1
                await asyncio.sleep(self._backoff_s * 2 ** (attempt - 2))
                self._retried()
                try:
                    obj = self._path._fresh(m)
                except Exception as again:  # it decoded once: a fluke, not lost
                    entry.poison = Poison.undecodable(m, self._codec, again)
                    return
                continue
            self.handle_ns.append(clock() - t0)
            entry.out = out
            return

    def _decoded(self, entry: Entry, sampled: bool) -> Any:
        """The decoded message, or `_UNDECODED` with the entry's poison set."""
        m = entry.message
        value = m.value()
        path = self._path
        try:
            if len(value) > self._limit:  # type: ignore[arg-type]
                raise _Unusable
            decode = self._decode if path._pick is None else path._pick(m)
            if not sampled:
                return decode(value)  # type: ignore[arg-type]
            t0 = perf_counter_ns()
            obj = decode(value)  # type: ignore[arg-type]
            self.decode_ns.append(perf_counter_ns() - t0)
            return obj
        except MemoryError:
            raise
        except Exception as exc:
            tally = Tally()
            obj = path._failed(m, exc, tally)
            if obj is _UNDECODED:
                entry.poison = tally.poison[0]
            return obj
