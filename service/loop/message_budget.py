"""The per-message budget for decode plus logic, enforced without a per-message cost.

A message whose decode and logic (its retries and back-offs included) run longer
than `message_budget_ms` is dead-lettered with reason `budget`, and the batch goes
on with the next message. How, in CPython, with nothing added to the hot loop:

- **A periodic timer, not a per-message one.** While the loop runs, `setitimer
  (ITIMER_REAL)` sends the process SIGALRM every `TICK_S` (0.1 s): two system calls
  when the loop starts and stops, none per batch or message. Python runs the
  handler (`_tick`) in the main thread, between two bytecodes, with the frame
  it interrupted.
- **Which message, and since when, read off the stack.** The handler walks up from
  that frame to the innermost frame of the hot loop (`MessagePath`'s loops and its
  retry), and reads its local `m`: the message in hand. The first tick that sees a
  message notes the time; a tick that still sees it `budget` seconds later, with
  the loop's frame on a line that calls the decode, the logic or the retry's
  back-off (`protected_lines`), raises `OverBudget` there. The loop's `except`
  sets the message aside as poison (`Poison.over_budget`) and goes on. A message
  is never cut before its budget, and is cut at most two ticks after it.
- **`OverBudget` is a `BaseException`** (as `KeyboardInterrupt` is): a logic's own
  `except Exception` does not swallow it; a logic that swallows everything gets it
  again at the next tick.
- **SIGTERM during a long message.** Once a stop is requested, a message still in
  hand at a tick after the one that first saw it raises `BatchAbandoned`: the batch
  is left unstored (its partitions rewound, as a batch whose writes a stalled
  broker does not acknowledge at shutdown), so the worker leaves within its
  shutdown budget and the next owner reads the batch again.
- **`/healthz`.** Each tick inside the hot loop sets the loop's heartbeat: a batch
  of slow messages that each stay under the budget is progress, not a stall.

What it cannot interrupt: a call into C that holds the GIL (a msgspec, upb or
fastavro decode, a `re` match, a C extension's loop) runs until it returns to the
interpreter; the handler runs then. The decoders' own work is bounded by the
message's size (README, "What bounds decode work"), so this matters for a logic
calling such code. For that, a hard backstop: `faulthandler.dump_traceback_later`,
whose watchdog is a C thread that needs no GIL, is re-armed by the ticks at most
once a second; if no tick runs for `hard_s` (twice the budget, plus the batch
wait, plus `HARD_MARGIN_S`), it writes every thread's traceback to stderr and
exits the process with status 1, for the supervisor to restart it. The restarted
worker reads the message again: that offset is not recorded.
"""

from __future__ import annotations

import faulthandler
import inspect
import re
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from types import CodeType, FrameType
from typing import Any, Final, Protocol

TICK_S: Final = 0.1
"""The timer's period: the budget's resolution. A tick costs a few microseconds
(a frame walk and a dict lookup): 10 a second are lost in the noise."""
HARD_MARGIN_S: Final = 30.0
"""Added to the hard backstop's limit: `consume()` and the flush of writes block in
C for up to the batch wait and a quarter second at a time, and no tick runs then."""
_REARM_S: Final = 1.0
"""The backstop is re-armed at most this often (each arming starts a C thread)."""
_CALLS: Final = re.compile(r"\b(decode|decoder|step|_step|sleep)\(|\)\(value\)")
"""Source lines of the hot loop a budget may interrupt: the decode, the logic and
the retry's back-off (see `protected_lines`)."""


class OverBudget(BaseException):
    """Raised into the hot loop: the message in hand ran past its budget."""

    def __init__(self, seconds: float, budget_s: float) -> None:
        super().__init__(
            f"decode and logic ran {seconds:.1f} s, over the message budget of "
            f"{budget_s:g} s (message_budget_ms)"
        )


class BatchAbandoned(BaseException):
    """Raised into the hot loop: a stop was requested during a long message."""


class Heartbeat(Protocol):
    """The loop whose `heartbeat` (monotonic seconds) `/healthz` reads."""

    heartbeat: float


def protected_lines(code: CodeType) -> frozenset[int]:
    """The lines of `code` that call the decode, the logic or a back-off sleep."""
    lines, first = inspect.getsourcelines(code)
    return frozenset(
        first + i for i, line in enumerate(lines) if _CALLS.search(line.split("#")[0])
    )


class MessageBudget:
    """The budget of one worker's hot loop.

    Args:
        hot_code: the code of the loop's per-message functions (`MessagePath.hot_code`);
            each must keep the message in hand in a local `m`.
        budget_s: seconds of decode plus logic per message; 0 for no budget (no
            timer, no backstop).
        batch_wait_s: the loop's longest wait for a batch (in `consume()`, where
            no tick runs), for the backstop's limit (`hard_limit_s`).
    """

    def __init__(
        self, hot_code: Iterable[CodeType], budget_s: float, batch_wait_s: float = 0.0
    ) -> None:
        self.budget_s = budget_s
        self.hard_s = hard_limit_s(budget_s, batch_wait_s)
        """The backstop's limit, 0 for none."""
        self._lines: Mapping[CodeType, frozenset[int]] = {
            code: protected_lines(code) for code in hot_code
        }
        self._stopping: Callable[[], bool] = lambda: False
        self._loop: Heartbeat | None = None
        self._current: Any = None
        self._since = 0.0
        self._armed_at = 0.0
        self.over = 0
        """Messages interrupted for their budget so far."""

    @contextmanager
    def watching(self, stopping: Callable[[], bool], loop: Heartbeat) -> Iterator[None]:
        """Enforce the budget while the block runs (the loop's `run`).

        A no-op without a budget, or off the main thread (signals reach only it).
        """
        if (
            not self.budget_s
            or threading.current_thread() is not threading.main_thread()
        ):
            yield
            return
        self._stopping, self._loop = stopping, loop
        previous = signal.signal(signal.SIGALRM, self._tick)
        signal.setitimer(signal.ITIMER_REAL, TICK_S, TICK_S)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            if self.hard_s:
                faulthandler.cancel_dump_traceback_later()
            self._current = None

    def _tick(self, _signum: int, frame: FrameType | None) -> None:
        """SIGALRM: find the message in hand; interrupt it past its budget."""
        now = time.monotonic()
        if self.hard_s and now - self._armed_at >= _REARM_S:
            self._armed_at = now
            faulthandler.dump_traceback_later(self.hard_s, exit=True)
        lines = self._lines
        while frame is not None and frame.f_code not in lines:
            frame = frame.f_back
        if frame is None:  # between batches
            self._current = None
            return
        assert self._loop is not None  # noqa: S101 (set by watching)
        self._loop.heartbeat = now  # handling messages: progress, not a stall
        m = frame.f_locals.get("m")
        if m is not self._current:
            self._current, self._since = m, now
            return
        if frame.f_lineno not in lines[frame.f_code]:
            return
        ran = now - self._since
        if self._stopping():
            raise BatchAbandoned(
                f"shutting down during a message that has run {ran:.1f} s: its "
                "batch is not stored, and is read again"
            )
        if ran >= self.budget_s:
            self.over += 1
            raise OverBudget(ran, self.budget_s)


def hard_limit_s(budget_s: float, batch_timeout_s: float) -> float:
    """The backstop's limit for a budget and a batch wait (0 without a budget)."""
    if not budget_s:
        return 0.0
    return 2 * budget_s + batch_timeout_s + HARD_MARGIN_S
