"""Operating-system facts about the broker process: liveness, its ports, stopping it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from schemas.errors import LocalKafkaError
from service.lifecycle.child_processes import pid_alive

_TCP_TABLES: Final = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
_TCP_LISTEN: Final = "0A"
"""The LISTEN state in /proc/net/tcp (include/net/tcp_states.h: TCP_LISTEN = 10)."""
_KILL_GRACE_S: Final = 10.0
"""How long a SIGKILLed process group may take to vanish before we give up."""


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Returns whether something accepts TCP connections on ``host:port``."""
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((host, port)) == 0


def ensure_port_free(port: int, host: str = "127.0.0.1") -> None:
    """Checks that a server could listen on ``host:port`` now.

    Binds with ``SO_REUSEADDR``, as the JVM's server socket does on Linux, so the
    TIME_WAIT leftovers of a broker stopped a moment ago do not count as taken,
    while any listener on the port (on ``host`` or on every address) does.

    Raises:
        LocalKafkaError: Naming the port and the reason (in use, not permitted).
    """
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise LocalKafkaError(
                f"port {port} on {host} is not free ({reason}): stop what listens "
                "there or pick another --port"
            ) from None


def _listening_inodes(port: int) -> set[str] | None:
    """Returns the socket inodes listening on TCP ``port``; None without procfs."""
    inodes: set[str] = set()
    tables = [table for table in _TCP_TABLES if table.is_file()]
    if not tables:
        return None
    for table in tables:
        for line in table.read_text().splitlines()[1:]:
            # sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            fields = line.split()
            local_port = int(fields[1].rpartition(":")[2], 16)
            if fields[3] == _TCP_LISTEN and local_port == port:
                inodes.add(fields[9])
    return inodes


def owns_listener(pid: int, port: int) -> bool | None:
    """Returns whether process ``pid`` holds a socket listening on TCP ``port``.

    Matches the listening sockets' inodes in /proc/net/tcp{,6} against the
    ``socket:[inode]`` links in /proc/<pid>/fd: the one way to tell our broker
    from another server answering on the same port.

    Returns:
        True or False; None when procfs is missing (not Linux), so it cannot tell.
    """
    inodes = _listening_inodes(port)
    if inodes is None:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        fds = list(fd_dir.iterdir())
    except OSError:  # gone, or not ours to inspect
        return False
    for fd in fds:
        with contextlib.suppress(OSError):  # an fd closed while we look
            if os.readlink(fd) in wanted:
                return True
    return False


def stop_process_group(
    pid: int, timeout: float = 20.0, wait: Callable[[float], object] | None = None
) -> None:
    """SIGTERMs process group ``pid``; SIGKILLs it if still alive after ``timeout``.

    Args:
        pid: Leader of the process group (the broker JVM).
        timeout: Seconds to wait after SIGTERM.
        wait: ``Popen.wait`` when ``pid`` is our child (reaps it).

    Raises:
        LocalKafkaError: The process survived SIGKILL.
    """
    for sig, grace in ((signal.SIGTERM, timeout), (signal.SIGKILL, _KILL_GRACE_S)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, sig)
        if wait is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                wait(grace)
                return
            continue
        deadline = time.monotonic() + grace
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not pid_alive(pid):
            return
    raise LocalKafkaError(f"broker pid {pid} survived SIGKILL")
