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

What it cannot interrupt: a call into C that holds the GIL and does not check for
signals (a msgspec, upb or fastavro decode, `sum(range(10**12))`, a big-int `pow`, a
C extension's own loop) runs until it returns to the interpreter; the handler runs
then. (`re` checks for signals as it matches: a catastrophic pattern is interrupted
like Python code; so is a `time.sleep` or a blocking socket read.) The decoders'
own work is bounded by the message's size (docs/explanation/codecs.md, "What bounds decode work"), so
this matters for a logic calling such code. For that, a hard backstop (`service.loop.backstop`): if no tick
runs for `hard_s` (twice the budget, plus the batch wait, plus `HARD_MARGIN_S`),
`faulthandler`'s watchdog exits the process with status 1; the ticks' record of the
message in hand lets the restarts find the message and dead-letter it.
"""

from __future__ import annotations

import inspect
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import CodeType, FrameType
from typing import Any, Final, Protocol

from service.loop.backstop import Backstop, budget_poison

TICK_S: Final = 0.1
"""The timer's period: the budget's resolution. A tick costs a frame walk and a read
of the loop frame's locals: 9 us between batches and 38 us with a message in hand,
measured with the machine at load 17 on 2 cores, so 10 a second cost under 0.05 %
of a core."""
HARD_MARGIN_S: Final = 30.0
"""Added to the hard backstop's limit: `consume()` and the flush of writes block in
C for up to the batch wait and a quarter second at a time, and no tick runs then."""
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


Budget = tuple[float, Path | None]
"""Seconds of decode plus logic per message (0: none), and the backstop's record."""


class HotPath(Protocol):
    """What the budget needs of `service.loop.hotpath.MessagePath`."""

    codec_name: str
    run: Any
    timed: Any

    @property
    def hot_code(self) -> tuple[CodeType, ...]:
        """The per-message functions' code."""
        ...


def protected_lines(code: CodeType) -> frozenset[int]:
    """The lines of `code` that call the decode, the logic or a back-off sleep."""
    lines, first = inspect.getsourcelines(code)
    return frozenset(
        first + i for i, line in enumerate(lines) if _CALLS.search(line.split("#")[0])
    )


class MessageBudget:
    """The budget of one worker's hot loop.

    Args:
        path: the loop's per-message code (`MessagePath`): its functions keep the
            message in hand in a local `m`.
        budget: seconds of decode plus logic per message (0 for no budget: no
            timer, no backstop), and the backstop's record (None: none).
        batch_wait_s: the loop's longest wait for a batch (in `consume()`, where
            no tick runs), for the backstop's limit (`hard_limit_s`).
    """

    def __init__(
        self,
        path: HotPath,
        budget: Budget,
        batch_wait_s: float = 0.0,
    ) -> None:
        self._path = path
        self.budget_s, record = budget
        self.hard_s = hard_limit_s(self.budget_s, batch_wait_s)
        """The backstop's limit, 0 for none."""
        self.backstop = Backstop(record, self.hard_s, path.codec_name)
        self._lines: Mapping[CodeType, frozenset[int]] = {
            code: protected_lines(code) for code in path.hot_code
        }
        self._plain: tuple[Any, Any] | None = None
        """The path's own `run` and `timed` while careful ones stand in."""
        self._stopping: Callable[[], bool] = lambda: False
        self._loop: Heartbeat | None = None
        self._current: Any = None
        self._since = 0.0
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
        backstop = self.backstop
        backstop.start()
        if backstop.careful:
            self._go_careful()
        previous = signal.signal(signal.SIGALRM, self._tick)
        signal.setitimer(signal.ITIMER_REAL, TICK_S, TICK_S)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            backstop.stop()
            self._current = None

    def _go_careful(self) -> None:
        """After a backstop exit: the path's loops stand aside (`Backstop`)."""
        path, backstop = self._path, self.backstop
        self._plain = (path.run, path.timed)
        poison = budget_poison(path.codec_name, self.hard_s, OverBudget)
        path.run = backstop.careful_run(path.run, poison)
        path.timed = backstop.careful_timed(*self._plain, poison)

    def _tick(self, _signum: int, frame: FrameType | None) -> None:
        """SIGALRM: find the message in hand; interrupt it past its budget."""
        now = time.monotonic()
        backstop = self.backstop
        backstop.rearm(now)
        if self._plain is not None and not backstop.careful:
            self._path.run, self._path.timed = self._plain
            self._plain = None
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
            if m is not None:
                backstop.note(m)
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
