"""Process helpers every tool shares: children that die with their parent, liveness,
free ports."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
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


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct TCP ports free on `host` now (bound together, then released).

    Another process may take one before the caller binds it: callers that start a
    server on it must check that the server, not a stranger, answers there.
    """
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind((host, 0))
        return [int(sock.getsockname()[1]) for sock in socks]


def free_port(host: str = "127.0.0.1") -> int:
    """One TCP port free on `host` now (see `free_ports`)."""
    return free_ports(1, host)[0]


def pid_alive(pid: int) -> bool:
    """Returns whether ``pid`` is a live process (zombies count as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:  # no procfs: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def run_within(fn: Callable[[], object], timeout_s: float, name: str) -> bool:
    """Run `fn` on a daemon thread; False if it had not returned after `timeout_s`
    (it is left running: a daemon thread does not keep the process alive)."""
    thread = threading.Thread(target=fn, name=name, daemon=True)
    thread.start()
    thread.join(timeout_s)
    return not thread.is_alive()
