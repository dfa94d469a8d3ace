"""A team's own logic: `--logic MODULE:CALLABLE`, loaded once and called as is.

The callable takes one decoded message (the codec's native object: a pydantic model,
a msgspec Struct, a protobuf message...) and returns its result, or None for no
result. The worker calls it directly as the loop's step, with no wrapper, so calling
it costs the same on every codec and its time is the team's own
(`worker_handle_seconds`). An exception it raises is a logic error: retried up to
`max_attempts`, then dead-lettered with its type and message in the headers.

An async handler (`async def`, a `functools.partial` of one, an object whose
`__call__` is `async def`) is told by its definition (`awaits`) and runs on the
worker's event loop (`service.loop.async_path.loop`). A plain callable that returns an
awaitable cannot be told before it is called: the worker calls it through a
`FirstCallProbe` until a call returns, which says which it is (an awaitable is
then run to completion, and the worker moves to the event loop after that batch).

A spec that cannot be imported, names no callable, or names one that cannot be
called with exactly one positional argument is a `ConfigError` (one line; the tools
exit 2 before any Kafka client is made).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final, cast

from schemas.errors import ConfigError
from schemas.user.loader import import_module

BUILTIN_LOGICS: Final = ("aggregate", "noop", "flaky", "fields")
"""The stub logics (`service.logic.builtin`); anything else is a MODULE:CALLABLE."""

UserStep = Callable[[Any], object]
"""A team's handler: one decoded message in, its result (or None) out."""


def is_user_logic(logic: str) -> bool:
    """Whether `logic` names a team's handler rather than a built-in stub."""
    return logic not in BUILTIN_LOGICS


def load_handler(spec: str) -> UserStep:
    """Import `MODULE:CALLABLE` (CALLABLE may be dotted: `Class.method`).

    MODULE is imported from `sys.path`, then from the current directory (a console
    script, unlike `python -m`, does not put it on the path).

    Raises:
        ConfigError: "logic error: SPEC: ..." for a bad spec, a failed import, a
            missing name, or an object that is not callable with one argument.
    """
    module, sep, name = spec.strip().rpartition(":")
    if not sep or not module or not name:
        raise ConfigError(
            f"logic error: {spec!r}: expected aggregate|noop|flaky|fields or "
            "MODULE:CALLABLE"
        )
    obj: object = _import(spec, module)
    for part in name.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"logic error: {spec}: {module!r} has no {name!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ConfigError(
            f"logic error: {spec}: {type(obj).__name__} object is not callable"
        )
    _check_signature(spec, obj)
    if inspect.isasyncgenfunction(_target(obj)):
        raise ConfigError(
            f"logic error: {spec}: an async generator yields many values; a handler "
            "returns one result (async def ... return, not yield)"
        )
    return obj


def awaits(fn: Callable[..., object]) -> bool:
    """Whether `fn`'s definition says a call returns an awaitable: an `async def`
    (through `functools.partial`, `functools.wraps` wrappers and bound methods) or
    an object whose `__call__` is one."""
    target = _target(fn)
    if inspect.iscoroutinefunction(target):
        return True
    if inspect.isroutine(target) or inspect.isclass(target):
        return False
    return inspect.iscoroutinefunction(type(target).__call__)


def _target(fn: Callable[..., object]) -> Callable[..., object]:
    """`fn` without its `functools.partial` and `functools.wraps` layers."""
    while True:
        if isinstance(fn, functools.partial):
            fn = fn.func
            continue
        unwrapped: Callable[..., object] = inspect.unwrap(fn)
        if unwrapped is fn:
            return fn
        fn = unwrapped


class FirstCallProbe:
    """A plain callable that may return an awaitable, until a call says.

    The worker's sync loop calls this in the handler's place. The first call that
    returns decides: a value that is not awaitable calls `on_sync(handler)` (the
    loop then calls the handler directly, from its next batch on: no wrapper is
    left); an awaitable is run to completion here, on a private event loop, and
    calls `on_async()` (the worker ends the sync loop after the batch, its offsets
    stored, and goes on with the event loop, `service.loop.async_path.loop`). Until the
    worker moves, every awaitable is run to completion, one at a time: nothing is
    dropped. A call that raises decides nothing.

    Performance note: one Python call more per message, for the first batch only.
    """

    def __init__(self, handler: UserStep) -> None:
        self.handler = handler
        self.on_sync: Callable[[UserStep], None] | None = None
        self.on_async: Callable[[], None] | None = None
        self.kind: str | None = None
        """None until a call returned; then `sync` or `async`."""
        self._loop: asyncio.AbstractEventLoop | None = None

    def __call__(self, message: Any) -> object:
        out = self.handler(message)
        if not inspect.isawaitable(out):
            if self.kind is None:
                self.kind = "sync"
                if self.on_sync is not None:
                    self.on_sync(self.handler)
            return out
        if self.kind is None:
            self.kind = "async"
            if self.on_async is not None:
                self.on_async()
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(as_coroutine(out))

    def close(self) -> None:
        """Close the private event loop, if one was made."""
        if self._loop is not None:
            self._loop.close()
            self._loop = None


async def _as_coroutine(awaitable: Awaitable[object]) -> object:
    return await awaitable


def as_coroutine(awaitable: Awaitable[object]) -> Coroutine[Any, Any, object]:
    """Any awaitable as a coroutine (`asyncio.run` and tasks take only those)."""
    if inspect.iscoroutine(awaitable):
        return cast(Coroutine[Any, Any, object], awaitable)
    return _as_coroutine(awaitable)


def _check_signature(spec: str, fn: Callable[..., object]) -> None:
    """`fn(message)` must bind: exactly one positional argument, nothing else
    required. A builtin without a signature is taken on trust."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(object())
    except TypeError as exc:
        raise ConfigError(
            f"logic error: {spec}: must take one decoded message, as "
            f"handler(message); its signature is {sig} ({exc})"
        ) from None


def _import(spec: str, module: str) -> object:
    try:
        return import_module(module)
    except ImportError as exc:
        raise ConfigError(
            f"logic error: {spec}: cannot import {module!r}: {exc}"
        ) from None
    except Exception as exc:  # a team's module may raise anything at import time
        raise ConfigError(
            f"logic error: {spec}: importing {module!r} raised "
            f"{type(exc).__name__}: {exc}"
        ) from None
