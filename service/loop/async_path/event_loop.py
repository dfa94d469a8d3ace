"""The async path's event loop, and the CPU an awaited handler spends in its own steps.

`new_event_loop` makes uvloop's loop where uvloop is installed (a dependency of the
worker), else asyncio's own. Measured with `make bench-async BENCH_ARGS=--loops`
(the worker's async loop draining the same in-memory messages through the same
1 ms handler on each loop, alternating; docs/benchmarks.md, "Async handlers"),
uvloop's took less CPU per message and ran faster on every codec tried, so it is
the one the worker uses.

`CpuTimed` awaits a handler's awaitable step by step and adds up the thread's CPU
time inside those steps only: the handler's own CPU, without the time it spent
waiting for its awaits (the wall time less this is what it waited). Two
`thread_time_ns` readings a step, ~1 us on this machine, so the async loop times one
message in 32, as the sync loop times its decodes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Generator
from time import thread_time_ns
from typing import Any


def new_event_loop(kind: str = "uvloop") -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's (`kind="uvloop"`, if installed) or asyncio's."""
    if kind == "uvloop":
        try:
            import uvloop
        except ImportError:  # pragma: no cover - uvloop is a dependency
            return asyncio.new_event_loop()
        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


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
