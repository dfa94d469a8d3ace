"""Waiting on running workers: for a count of messages handled, or sampling them.

Every wait polls the worker's /metrics (a cheap HTTP GET) and `/proc`; none runs
inside the measured process.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from abrunner.lab.processes import WorkerProcess
from abrunner.lab.worker_probe import Snapshot
from schemas.errors import RunnerError


def first_processed(worker: WorkerProcess, timeout: float) -> Snapshot:
    """The first snapshot with a message handled: the drain's start.

    Raises:
        RunnerError: the worker exited, or handled nothing within `timeout` s.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            snap = worker.snapshot()
        except OSError:  # its /metrics is not up yet
            snap = None
        if snap is not None and snap.processed > 0:
            return snap
        time.sleep(0.05)  # 50 ms: the start of a drain of a few seconds
    raise RunnerError(f"the worker processed nothing in {timeout:.0f} s")


def wait_processed(worker: WorkerProcess, total: float, timeout: float) -> Snapshot:
    """The first snapshot with `total` handled, or the last one at `timeout`."""
    deadline = time.monotonic() + timeout
    snap = worker.snapshot()
    while snap.processed < total and time.monotonic() < deadline:
        time.sleep(0.1)
        snap = worker.snapshot()
    return snap


def watch(
    worker: WorkerProcess, running: Callable[[], bool], every: float
) -> tuple[list[int], list[float], list[tuple[float, float]]]:
    """Sample the worker's RSS, lag and (time, messages handled) while `running()`."""
    rss: list[int] = []
    lags: list[float] = []
    points: list[tuple[float, float]] = []
    while running():
        time.sleep(every)
        snap = worker.snapshot()
        rss.append(snap.rss)
        lags.append(snap.lag)
        points.append((snap.at, snap.processed))
    return rss, lags, points
