"""Structured logging: the only `structlog.configure` call of the service."""

from __future__ import annotations

import logging
import sys
from typing import Literal

import orjson
import structlog

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}


def configure_logging(
    level: Literal["debug", "info", "warning", "error"] = "info",
    fmt: Literal["json", "console"] = "json",
    *,
    cache: bool = True,
) -> None:
    """JSON lines (orjson) on stdout, or a console renderer for humans.

    Args:
        level: the minimum level; filtered calls cost a no-op method call.
        fmt: `json` for machines, `console` for a terminal.
        cache: cache bound loggers on first use (tests pass False).
    """
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.format_exc_info,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if fmt == "json":
        processors: list[structlog.typing.Processor] = [
            *shared,
            structlog.processors.JSONRenderer(serializer=orjson.dumps),
        ]
        factory: structlog.typing.WrappedLogger = structlog.BytesLoggerFactory(
            sys.stdout.buffer
        )
    else:
        processors = [*shared, structlog.dev.ConsoleRenderer(colors=False)]
        factory = structlog.PrintLoggerFactory(sys.stdout)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=factory,
        cache_logger_on_first_use=cache,
    )
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
