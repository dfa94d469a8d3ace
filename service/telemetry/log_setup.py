"""Structured logging: the only `structlog.configure` call, and Kafka's lines in it.

Every line carries the process id and, for the worker, its index among
`--processes` (`pid`, `worker`). librdkafka's own log lines and the clients' error
callbacks go through structlog too, so `--log-level` governs them and a broker that
cannot be reached yields one clear line and a reminder every `REMIND_S` seconds,
not ~20 raw lines a second.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any, Final, Literal, TextIO

import orjson
import structlog
from confluent_kafka import KafkaError

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}

REMIND_S: Final = 30.0
"""At most one line per kind of Kafka trouble every 30 s: librdkafka retries a
refused connection ~20 times a second, and each retry is an error callback and a
log line; a person needs the first one and then a sign that it goes on."""

_CONNECTIVITY: Final = frozenset({"_TRANSPORT", "_RESOLVE", "_ALL_BROKERS_DOWN"})
"""Error codes that mean a broker could not be reached."""

_KAFKA_LOGGER: Final = "librdkafka"


def configure_logging(
    level: Literal["debug", "info", "warning", "error"] = "info",
    fmt: Literal["json", "console"] = "json",
    *,
    cache: bool = True,
    stream: TextIO | None = None,
    fields: Mapping[str, Any] | None = None,
) -> None:
    """JSON lines (orjson), or a console renderer for humans; stdout by default.

    Args:
        level: the minimum level; filtered calls cost a no-op method call.
        fmt: `json` for machines, `console` for a terminal.
        cache: cache bound loggers on first use (tests pass False).
        stream: where lines go (the load generator keeps stdout for its summary).
        fields: added to every line, after `pid` (the worker adds its index).
    """
    out = sys.stdout if stream is None else stream
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.format_exc_info,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _Fields({"pid": os.getpid(), **(fields or {})}),
    ]
    if fmt == "json":
        processors: list[structlog.typing.Processor] = [
            *shared,
            structlog.processors.JSONRenderer(serializer=orjson.dumps),
        ]
        factory: structlog.typing.WrappedLogger = structlog.BytesLoggerFactory(
            out.buffer
        )
    else:
        processors = [*shared, structlog.dev.ConsoleRenderer(colors=False)]
        factory = structlog.PrintLoggerFactory(out)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=factory,
        cache_logger_on_first_use=cache,
    )
    # Other libraries' warnings become lines like ours.
    root = logging.getLogger()
    root.handlers = [h for h in root.handlers if not isinstance(h, _ToStructlog)]
    root.addHandler(_ToStructlog())
    root.setLevel(logging.WARNING)


class _Fields:
    """A processor adding fixed fields to every line (explicit keys win)."""

    def __init__(self, fields: Mapping[str, Any]) -> None:
        self._fields = dict(fields)

    def __call__(
        self, _logger: Any, _method: str, event: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        for key, value in self._fields.items():
            event.setdefault(key, value)
        return event


class RateLimiter:
    """At most one line per key every `every_s` seconds; the rest are counted.

    Args:
        every_s: the shortest gap between two lines of one key.
        clock: monotonic seconds (tests pass a fake).
    """

    def __init__(
        self, every_s: float = REMIND_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._every, self._clock = every_s, clock
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self._lock = threading.Lock()  # librdkafka calls back on any polling thread

    def allow(self, key: str) -> int | None:
        """None to drop this line; else how many of `key` were dropped since the last."""
        now = self._clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self._every:
                self._suppressed[key] = self._suppressed.get(key, 0) + 1
                return None
            self._last[key] = now
            return self._suppressed.pop(key, 0)


class _ToStructlog(logging.Handler):
    """Forwards stdlib log records (other libraries') to structlog."""

    def emit(self, record: logging.LogRecord) -> None:
        # structlog knows the five standard levels only: a custom one goes below.
        level = max(
            (n for n in (10, 20, 30, 40, 50) if n <= record.levelno), default=10
        )
        structlog.get_logger(record.name).log(
            level, record.getMessage(), logger=record.name
        )


class _LibrdkafkaHandler(logging.Handler):
    """librdkafka's log lines (confluent-kafka's `logger` setting) into structlog.

    Every error librdkafka logs also reaches the client's `error_cb`, which
    `KafkaErrors` reports (once, clearly); so a librdkafka ERR line is detail and is
    logged at info, its warnings (mostly configuration) at warning, its debug lines
    (`-X debug=...`) at debug and never rate-limited: whoever asked wants them all.
    """

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.limiter = RateLimiter()

    def emit(self, record: logging.LogRecord) -> None:
        # confluent-kafka logs ("%s [%s] %s", facility, client name, message).
        args = record.args if isinstance(record.args, tuple) else ()
        if len(args) == 3:
            facility, client, text = (str(a) for a in args)
        else:
            facility, client, text = "", "", record.getMessage()
        text = text.split("]: ", 1)[-1] if text.startswith("[thrd:") else text
        level = (
            logging.DEBUG
            if record.levelno <= logging.DEBUG
            else logging.WARNING
            if record.levelno == logging.WARNING
            else logging.INFO
        )
        fields: dict[str, Any] = {"facility": facility, "client": client}
        if level > logging.DEBUG:
            others = self.limiter.allow(facility)
            if others is None:
                return
            fields["others_since_last"] = others
        structlog.get_logger(_KAFKA_LOGGER).log(
            level, "librdkafka", **fields, message=text
        )


def cannot_reach(bootstrap: str, reason: str) -> str:
    """The one line for a cluster that does not answer: where, why, what to check."""
    return (
        f"cannot reach Kafka at {bootstrap}: {reason} (check --bootstrap-servers or "
        "KAFKA_BOOTSTRAP_SERVERS, and that the brokers run and accept this client)"
    )


def kafka_logger() -> logging.Logger:
    """The `logger` setting for every confluent-kafka client: lines into structlog.

    confluent-kafka hands the lines over inside `poll()`/`consume()`/`flush()`, on
    the thread that calls them, so nothing is logged from librdkafka's own threads.
    """
    logger = logging.getLogger(_KAFKA_LOGGER)
    if not any(isinstance(h, _LibrdkafkaHandler) for h in logger.handlers):
        logger.addHandler(_LibrdkafkaHandler())
        logger.setLevel(logging.DEBUG)  # structlog filters by --log-level
        logger.propagate = False
    return logger


class KafkaErrors:
    """A client's `error_cb` for people: rate-limited lines, "cannot reach Kafka".

    When every broker is down (`_ALL_BROKERS_DOWN`), one error line says so with the
    last connection error behind it, and while connection errors go on a reminder
    follows every `REMIND_S` seconds. Other errors are logged as
    `kafka_client_error`, at most once per code every `REMIND_S` seconds, with the
    number of others since.

    Args:
        bootstrap: the cluster's address, named in the lines.
        limiter: the rate limiter (tests pass one with a fake clock).
    """

    def __init__(self, bootstrap: str, limiter: RateLimiter | None = None) -> None:
        self.bootstrap = bootstrap
        self.last: str | None = None
        """The text of the last connection error."""
        self.down = False
        self._limiter = limiter or RateLimiter()
        self._log = structlog.get_logger(__name__)

    def __call__(self, err: KafkaError) -> None:
        """Report one client error (the `error_cb`)."""
        code = err.name()
        if code in _CONNECTIVITY:
            if code != "_ALL_BROKERS_DOWN":
                self.last = err.str()
            self.down = self.down or code == "_ALL_BROKERS_DOWN"
            if self.down:
                self.unreachable(self.last or err.str())
                return
        others = self._limiter.allow(code)
        if others is None:
            return
        # One broker of several failing is routine (restarts): info, not a warning.
        level = "info" if code in _CONNECTIVITY else "warning"
        level = "error" if err.fatal() else level
        self._log.log(
            _LEVELS[level],
            "kafka_client_error",
            code=code,
            error=err.str(),
            others_since_last=others,
        )

    def commit_failed(self, code: str, partitions: list[int]) -> None:
        """A failed offset commit (the consumer's `on_commit`): `commit_failed`,
        at most once per code every `REMIND_S` seconds."""
        others = self._limiter.allow("commit:" + code)
        if others is not None:
            self._log.warning(
                "commit_failed",
                code=code,
                partitions=partitions,
                others_since_last=others,
            )

    def unreachable(self, reason: str) -> None:
        """Say that no broker can be reached, and why (rate-limited)."""
        self.down = True
        others = self._limiter.allow("unreachable")
        if others is not None:
            self._log.error(
                "kafka_unreachable",
                error=cannot_reach(self.bootstrap, reason),
                retrying=True,
                others_since_last=others,
            )

    def reachable(self) -> None:
        """A broker answered: say so if it had been unreachable."""
        if self.down:
            self._log.info("kafka_reachable", bootstrap=self.bootstrap)
        self.down = False
