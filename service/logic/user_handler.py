"""A team's own logic: `--logic MODULE:CALLABLE`, loaded once and called as is.

The callable takes one decoded message (the codec's native object: a pydantic model,
a msgspec Struct, a protobuf message...) and returns its result, or None for no
result. The worker calls it directly as the loop's step, with no wrapper, so calling
it costs the same on every codec and its time is the team's own
(`worker_handle_seconds`). An exception it raises is a logic error: retried up to
`max_attempts`, then dead-lettered with its type and message in the headers.

A spec that cannot be imported, names no callable, or names one that cannot be
called with exactly one positional argument is a `ConfigError` (one line; the tools
exit 2 before any Kafka client is made).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Final

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
    return obj


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
