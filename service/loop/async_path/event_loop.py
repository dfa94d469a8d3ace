"""The async path's event loop, and the CPU an awaited handler spends in its own steps.

`new_event_loop` makes uvloop's loop where uvloop is installed (a dependency of the
worker), else asyncio's own. Measured with `make bench-async BENCH_ARGS=--loops`
(the worker's async loop draining the same in-memory messages through the same
1 ms handler on each loop, alternating; docs/benchmarks.md, "Async handlers"),
uvloop's took less CPU per message and ran faster on every codec tried, so it is
the one the worker uses.

`Slices` runs that loop between the worker's consumer calls, one slice at a time:
every consumer call is made with the event loop stopped, so a rebalance callback
(run inside `consume()`) can run the loop itself, to let a revoked partition's
handlers finish. Each slice also measures how late the loop came back to the
worker: a handler that holds the loop without awaiting (CPU work or a blocking call
inside `async def`) shows there, as `worker_event_loop_lag_seconds` and a
rate-limited `event_loop_blocked` line; the message budget, which cancels a
handler where it awaits, cannot cut it.

`on_own_thread` runs the async path on a thread of its own, not the main one: on
the main thread uvloop sets up and tears down its signal handling at every
`run_forever` (a socket pair, the wakeup fd), 15-20 us a slice on this machine
against 2-3 us off it; asyncio's loop costs 4-5 us either way (best of 10 x 5,000
`call_soon(stop); run_forever()`, docs/benchmarks.md). The main thread waits for it
and runs the signal handlers meanwhile, which only ask the loop to stop.

`CpuTimed` awaits a handler's awaitable step by step and adds up the thread's CPU
time inside those steps only: the handler's own CPU, without the time it spent
waiting for its awaits (the wall time less this is what it waited). Two
`thread_time_ns` readings a step, ~1 us on this machine, so the async loop times one
message in 128, as the sync loop times its decodes.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import threading
import time
from collections.abc import Awaitable, Callable, Generator
from time import thread_time_ns
from typing import Any, Final

import structlog

from service.telemetry.log_setup import RateLimiter

log = structlog.get_logger(__name__)

BLOCKED_S: Final = 0.25
"""A slice that comes back this late was held by a handler that did not await:
reported (`event_loop_blocked`). Ten times what dispatching a 500-message batch
whose handlers each run 50 us before their first await costs."""


def new_event_loop(kind: str = "uvloop") -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's (`kind="uvloop"`, if installed) or asyncio's."""
    if kind == "uvloop":
        try:
            import uvloop
        except ImportError:  # pragma: no cover - uvloop is a dependency
            return asyncio.new_event_loop()
        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def on_own_thread(run: Callable[[], None], abandon: Callable[[], None]) -> None:
    """Call `run()` on a new thread (the caller's context variables, the log's bound
    fields among them, go along), wait for it, and raise what it raised. Signal
    handlers run in the waiting thread meanwhile; one that raises there calls
    `abandon()` (which must make `run` return soon), waits for `run` to end, and
    its exception goes on.
    """
    failed: list[BaseException] = []
    done = threading.Event()

    def call() -> None:
        try:
            run()
        except BaseException as exc:  # handed to the waiting thread
            failed.append(exc)
        finally:
            done.set()

    context = contextvars.copy_context()
    threading.Thread(target=context.run, args=(call,), name="async-loop").start()
    try:
        done.wait()
    except BaseException:
        abandon()
        done.wait()
        raise
    if failed:
        raise failed[0]


class Slices:
    """Runs the event loop for slices of time; measures how late each comes back.

    Args:
        loop: the event loop (not running between slices).
        budget_s: the message budget (0: none), for the report.
        in_flight: how many messages are in flight (for the report).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        budget_s: float,
        in_flight: Callable[[], int],
    ) -> None:
        self.loop = loop
        self._budget_s = budget_s
        self._in_flight = in_flight
        self._wakeable = False
        self._woken = math.inf
        """When `wake` ended the slice (inf: not yet)."""
        self._limiter = RateLimiter()
        self.lags: list[float] = []
        """Each slice's lateness in seconds since they were last observed."""

    def run(self, timeout: float) -> None:
        """Run the loop until `timeout` (0: one pass over what is ready) or `wake`."""
        loop, clock = self.loop, time.monotonic
        self._wakeable = True
        start, self._woken = clock(), math.inf
        timer = loop.call_later(timeout, self.wake) if timeout else None
        if timer is None:
            loop.call_soon(self.wake)
        loop.run_forever()
        if timer is not None:
            timer.cancel()
        self._wakeable = False
        lag = clock() - min(start + timeout, self._woken)
        self.lags.append(lag if lag > 0 else 0.0)
        if lag >= BLOCKED_S:
            self._blocked(lag)

    def wake(self) -> None:
        """End the current slice after the loop's current pass (outside a slice:
        nothing)."""
        if self._wakeable:
            self._wakeable = False
            self._woken = time.monotonic()
            self.loop.stop()

    def _blocked(self, lag: float) -> None:
        others = self._limiter.allow("event_loop_blocked")
        if others is None:
            return
        budget = f"{self._budget_s:g} s" if self._budget_s else "none"
        log.warning(
            "event_loop_blocked",
            blocked_s=round(lag, 3),
            in_flight=self._in_flight(),
            others_since_last=others,
            why="a handler ran without awaiting (CPU work or a blocking call "
            "inside async def): every message in flight waited, and the message "
            f"budget ({budget}) cannot cut a handler there; run blocking work in a "
            "thread (asyncio.to_thread)",
        )


class CpuTimed:
    """`await CpuTimed(awaitable)`: the awaitable's result; `cpu_ns` is then the
    thread CPU time spent inside its steps (every `send` and `throw`)."""

    __slots__ = ("_awaitable", "cpu_ns")

    def __init__(self, awaitable: Awaitable[Any]) -> None:
        self._awaitable = awaitable
        self.cpu_ns = 0

    def __await__(self) -> Generator[Any, Any, Any]:
        steps = self._awaitable.__await__()
        clock = thread_time_ns
        value: Any = None
        error: BaseException | None = None
        while True:
            t0 = clock()
            try:
                yielded = steps.send(value) if error is None else steps.throw(error)
            except StopIteration as stop:
                self.cpu_ns += clock() - t0
                return stop.value
            except BaseException:
                self.cpu_ns += clock() - t0
                raise
            self.cpu_ns += clock() - t0
            value, error = None, None
            try:
                value = yield yielded
            except BaseException as exc:  # a cancellation: into the handler's step
                error = exc
