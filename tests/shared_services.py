"""Services one pytest run starts once: under pytest-xdist, for all its processes.

The xdist controller (the process that starts the workers and prints the results)
hands each worker a folder. A worker that needs a service (the Kafka broker, the
schema registry) asks for it by creating `<name>.want` there, then waits for
`<name>.json` (its address) or `<name>.error`. The controller starts each service
the first time it is asked, on a thread of its own that lives until the run ends:
a service started that way dies with the controller (`die_with_parent` signals a
child when the thread that started it ends) and is stopped when the run is over,
whichever worker asked first and whenever the workers end. A run that asks for
nothing starts nothing.

Without xdist the fixtures start their services themselves, as before.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pytest

KEY: Final = "codec_ab_services"
"""The workerinput key that holds the folder."""
POLL_S: Final = 0.05
START_TIMEOUT_S: Final = 300.0
"""How long a worker waits for a service: a broker starts in 5-15 s, a registry in
10-20 s; a machine loaded to 30 takes several times that."""

Starter = Callable[[contextlib.ExitStack], tuple[str, int | None]]
"""Starts a service inside the stack (which stops it); returns its address and the
pid of its process (None when it is not a local process, e.g. a container)."""


class Host:
    """The controller's side: starts each service on its first request."""

    def __init__(self, starters: dict[str, Starter]) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="codec-ab-services-"))
        self._starters = starters
        self._stop = threading.Event()
        self._threads: dict[str, threading.Thread] = {}
        self.pids: dict[str, int] = {}
        self._watcher = threading.Thread(
            target=self._watch, name="codec-ab-services", daemon=True
        )
        self._watcher.start()

    def _watch(self) -> None:
        while not self._stop.wait(POLL_S):
            for name in self._starters:
                if name not in self._threads and (self.root / f"{name}.want").exists():
                    thread = threading.Thread(
                        target=self._serve, args=(name,), name=name, daemon=True
                    )
                    self._threads[name] = thread
                    thread.start()

    def _serve(self, name: str) -> None:
        """Starts `name`, publishes its address, keeps it until the run ends."""
        with contextlib.ExitStack() as stack:
            started = time.monotonic()
            try:
                address, pid = self._starters[name](stack)
            except Exception as exc:  # the workers that asked report it
                _publish(self.root / f"{name}.error", {"error": f"{exc}"})
                return
            if pid is not None:
                self.pids[name] = pid
            took = time.monotonic() - started
            _publish(self.root / f"{name}.json", {"address": address, "seconds": took})
            self._stop.wait()

    def cpu_seconds(self) -> float:
        """CPU seconds the services' processes used so far (/proc)."""
        return sum(_process_cpu(pid) for pid in self.pids.values())

    def close(self) -> None:
        """Stops every service started (each thread closes its stack)."""
        self._stop.set()
        self._watcher.join(5)
        for thread in self._threads.values():
            thread.join(60)
        shutil.rmtree(self.root, ignore_errors=True)


def _publish(path: Path, body: dict[str, Any]) -> None:
    """Writes `path` whole or not at all (a reader never sees half of it)."""
    part = path.with_suffix(".part")
    part.write_text(json.dumps(body))
    part.replace(path)


def _process_cpu(pid: int) -> float:
    """User and system CPU seconds of `pid` and of its waited-for children."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    ticks = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return ticks / float(os.sysconf("SC_CLK_TCK"))


def folder(config: pytest.Config) -> Path | None:
    """The controller's folder, in a worker of a run that shares its services."""
    workerinput: dict[str, Any] = getattr(config, "workerinput", {})
    found = workerinput.get(KEY)
    return Path(found) if found else None


def ask(root: Path, name: str, timeout: float = START_TIMEOUT_S) -> str:
    """A worker's request: the address of the run's `name` service, started on
    first request.

    Raises:
        pytest.fail.Exception: the service failed to start, or took `timeout` s.
    """
    (root / f"{name}.want").touch()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (done := root / f"{name}.json").exists():
            return str(json.loads(done.read_text())["address"])
        if (failed := root / f"{name}.error").exists():
            pytest.fail(
                f"the run's {name} failed to start: {json.loads(failed.read_text())}"
            )
        time.sleep(POLL_S)
    pytest.fail(f"the run's {name} did not start within {timeout:.0f} s")
