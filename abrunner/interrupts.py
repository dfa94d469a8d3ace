"""Ctrl-C and SIGTERM during a run: the first stops the running case, the next exits.

`codec-ab` routes both signals to a `Stop` while it runs: the first raises
KeyboardInterrupt in the main thread, so the runner stops its case (processes
killed, topics deleted) and the report of the cases finished is written, marked
interrupted (exit status `INTERRUPTED`); a second ends the process at once.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Final

INTERRUPTED: Final = 130
"""128 + SIGINT: what a shell reports for a command stopped by Ctrl-C."""


class Stop:
    """A signal handler: the first signal raises KeyboardInterrupt in the main
    thread (the runner stops its case and the report is written), the next one
    ends the process at once; its children die with it (`die_with_parent`)."""

    def __init__(self) -> None:
        self.signals = 0

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.signals += 1
        if self.signals > 1:
            os.write(2, b"codec-ab: interrupted again: exiting now\n")
            os._exit(INTERRUPTED)
        raise KeyboardInterrupt


@contextmanager
def interrupts() -> Iterator[Stop]:
    """Route SIGINT and SIGTERM to a `Stop` for the block (main thread only)."""
    stop = Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {
        sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
