"""SIGTERM and SIGINT before the worker's own handlers are in place.

Importing the worker (pydantic, the codecs, confluent-kafka) takes about a second,
longer on a busy machine; a SIGTERM in that window would kill it with the
signal's default action (exit status -15). `hold` is installed first, by the
entry point, before those imports: it notes the signal, and the worker stops as
soon as its handlers take over (`received`). Nothing here imports more than the
standard library's `signal`.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from types import FrameType

_received: list[int] = []


def _note(signum: int, _frame: FrameType | None) -> None:
    _received.append(signum)


def hold() -> None:
    """Note SIGTERM and SIGINT until other handlers replace these."""
    signal.signal(signal.SIGTERM, _note)
    signal.signal(signal.SIGINT, _note)


def received() -> bool:
    """Whether a SIGTERM or SIGINT arrived while `hold` was in place."""
    return bool(_received)


def install(stop: Callable[[], None], stopping: Callable[[], bool]) -> None:
    """The worker's handlers: SIGTERM and a first SIGINT call `stop` (finish the
    batch, commit, leave); a second SIGINT exits at once with status 130 and one
    log line, never a `KeyboardInterrupt` traceback. A signal `hold` noted during
    start-up calls `stop` now."""
    import structlog

    log = structlog.get_logger("service.app")

    def graceful(signum: int, _frame: FrameType | None) -> None:
        if signum == signal.SIGINT and stopping():
            log.warning("shutdown_forced", signal="SIGINT")
            sys.stdout.flush()
            os._exit(130)
        log.info("shutdown_requested", signal=signal.Signals(signum).name)
        stop()

    signal.signal(signal.SIGTERM, graceful)
    signal.signal(signal.SIGINT, graceful)
    if received():
        log.info("shutdown_requested", during="start-up")
        stop()
