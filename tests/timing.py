"""Where a test run's time goes: each test's wall and CPU time, each start-up.

A pytest plugin (registered by tests/conftest.py). Each process records, per test,
its wall time (set-up, call and tear-down) and the CPU time it cost: this process's
and that of the children it waited for (the workers, load generators and tools a
test starts), not that of the shared broker. It also times the set-up of every
session, module and class fixture, and of any fixture that takes over a second (the
brokers, the registry, Prometheus, the docs build, Chromium). Under pytest-xdist the
workers hand their records to the controller. At the end of the run pytest prints
the session's wall time, the CPU it used against the machine's, the ten slowest tests
and the slowest start-ups; `--timings-json FILE` writes every record.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Callable, Generator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest

from tests import scheduling

_PROPERTY: Final = "codec_ab_timing"
_OUTPUT: Final = "codec_ab_timing"
SLOWEST: Final = 10
"""Tests listed at the end of a run."""
START_UPS: Final = 12
"""Fixture set-ups listed at the end of a run."""
SLOW_FIXTURE_S: Final = 1.0
"""A function-scoped fixture is recorded when its set-up takes this long."""


def cpu_seconds(*, children: bool = True) -> float:
    """User and system CPU of this process, and of the children it has waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    total = own.ru_utime + own.ru_stime
    if children:
        reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
        total += reaped.ru_utime + reaped.ru_stime
    return total


def machine_busy() -> tuple[float, float]:
    """The machine's busy and total CPU seconds since boot (/proc/stat)."""
    try:
        with open("/proc/stat") as stat:
            fields = [float(x) for x in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return 0.0, 0.0
    tick = float(os.sysconf("SC_CLK_TCK"))
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return (sum(fields) - idle) / tick, sum(fields) / tick


@dataclass
class TestTime:
    """One test: where it ran, when it started, its wall and CPU seconds."""

    nodeid: str
    worker: str
    start: float
    wall_s: float
    cpu_s: float


@dataclass
class StartUp:
    """One fixture's set-up: its name and scope, the test that paid it, seconds."""

    fixture: str
    scope: str
    nodeid: str
    worker: str
    seconds: float


@dataclass
class Totals:
    """What the run's processes reported at their end."""

    cpu_s: float = 0.0
    workers: int = 0
    start_ups: list[StartUp] = field(default_factory=list)


def _worker() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


class Timing:
    """The plugin: one instance per pytest process."""

    def __init__(
        self, config: pytest.Config, *, extra_cpu: Callable[[], float]
    ) -> None:
        self._config = config
        self._extra_cpu = extra_cpu
        self._is_worker = hasattr(config, "workerinput")
        self._begun = time.time(), time.monotonic(), machine_busy()
        self._cpu = cpu_seconds(), cpu_seconds(children=False)
        self._started: dict[str, tuple[float, float, float]] = {}
        self._current = ""
        self.tests: list[TestTime] = []
        self.totals = Totals()

    # Every process: per test, and per fixture set-up.

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, Any, Any]:
        self._current = item.nodeid
        self._started[item.nodeid] = time.time(), time.monotonic(), cpu_seconds()
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        started = self._started.get(item.nodeid)
        if call.when == "teardown" and started is not None:
            begun, mono, cpu = self._started.pop(item.nodeid)
            record = [begun, time.monotonic() - mono, cpu_seconds() - cpu, _worker()]
            report.user_properties.append((_PROPERTY, record))
        return report

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(
        self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
    ) -> Generator[None, Any, Any]:
        started = time.monotonic()
        try:
            return (yield)
        finally:
            took = time.monotonic() - started
            if fixturedef.scope != "function" or took >= SLOW_FIXTURE_S:
                self.totals.start_ups.append(
                    StartUp(
                        fixturedef.argname,
                        fixturedef.scope,
                        self._current,
                        _worker(),
                        round(took, 3),
                    )
                )

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """A worker hands its CPU and start-ups to the controller."""
        if self._is_worker:
            workeroutput: dict[str, Any] = session.config.workeroutput  # type: ignore[attr-defined]
            workeroutput[_OUTPUT] = {
                "cpu_s": cpu_seconds() - self._cpu[0],
                "start_ups": [asdict(s) for s in self.totals.start_ups],
            }

    # The controller (or the only process): gather, then print.

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == _PROPERTY:
                found: list[Any] = list(value)  # type: ignore[call-overload]
                begun, wall, cpu, worker = found
                self.tests.append(
                    TestTime(report.nodeid, str(worker), begun, wall, cpu)
                )

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        found = getattr(node, "workeroutput", {}).get(_OUTPUT)
        if found:
            self.totals.cpu_s += found["cpu_s"]
            self.totals.workers += 1
            self.totals.start_ups += [StartUp(**s) for s in found["start_ups"]]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self._is_worker or not self.tests:
            return
        wall = time.monotonic() - self._begun[1]
        busy, total = machine_busy()
        busy0, total0 = self._begun[2]
        cores = os.cpu_count() or 1
        if self.totals.workers:  # the workers counted their children; the
            # controller's own children are the workers (and the run's services)
            mine = cpu_seconds(children=False) - self._cpu[1]
        else:
            mine = cpu_seconds() - self._cpu[0]
        own = mine + self.totals.cpu_s + self._extra_cpu()
        write = terminalreporter.write_line
        terminalreporter.section("time")
        write(
            f"pytest: {wall:.0f} s wall ({int(wall // 60)} min {int(wall % 60):02d} s), "
            f"{len(self.tests)} tests; CPU {own:.0f} s for the run's processes and "
            f"their children ({own / wall:.2f} cores)"
        )
        if total > total0:
            share = (busy - busy0) / (total - total0)
            write(
                f"machine: {share:.0%} of its {cores} cores busy over the run "
                f"({(busy - busy0) - own:.0f} CPU s not this run's)"
            )
        write(f"slowest {SLOWEST} tests (wall s, CPU s, process):")
        for t in sorted(self.tests, key=lambda t: -t.wall_s)[:SLOWEST]:
            write(f"  {t.wall_s:6.1f} {t.cpu_s:6.1f}  {t.worker:4} {t.nodeid}")
        ups = sorted(self.totals.start_ups, key=lambda s: -s.seconds)[:START_UPS]
        ups = [s for s in ups if s.seconds >= 0.5]
        if ups:
            write("slowest start-ups (fixture set-up s, scope, process, first test):")
            for s in ups:
                write(
                    f"  {s.seconds:6.1f} {s.fixture} ({s.scope}) {s.worker} {s.nodeid}"
                )
        if self._config.getoption("store_durations", False):
            scheduling.store({t.nodeid: t.wall_s for t in self.tests})
            write(f"each unit's seconds: {scheduling.DURATIONS}")
        if path := self._config.getoption("timings_json", None):
            Path(path).write_text(
                json.dumps(
                    {
                        "wall_s": wall,
                        "cpu_s": own,
                        "tests": [asdict(t) for t in self.tests],
                        "start_ups": [asdict(s) for s in self.totals.start_ups],
                    },
                    indent=1,
                )
            )
            write(f"every test's and start-up's times: {path}")


def register(config: pytest.Config, *, extra_cpu: Callable[[], float]) -> None:
    """Registers the plugin; in a single process, records its own start-ups too."""
    plugin = Timing(config, extra_cpu=extra_cpu)
    config.pluginmanager.register(plugin, "codec-ab-timing")
