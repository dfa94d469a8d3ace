"""Child processes that do not outlive their parent (worker sets, A/B runs, brokers)."""

from __future__ import annotations

import ctypes
import signal
import sys
from collections.abc import Callable
from typing import Final

_PR_SET_PDEATHSIG: Final = 1


def die_with_parent(signum: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A `preexec_fn` that makes the kernel send `signum` to the child when its
    parent dies (Linux `PR_SET_PDEATHSIG`); None elsewhere.

    `prctl` is looked up here, before the fork, so the child runs no import.
    """
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    return lambda: prctl(_PR_SET_PDEATHSIG, int(signum))
