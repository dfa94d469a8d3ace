"""How `make test`'s processes share the work: units, their order, the CPU lock.

`make test` runs pytest-xdist with `--dist loadscope`: a module is a unit of work
(its module, class and session fixtures start once), but for the modules whose
tests are units of their own (`ONE_TEST_A_UNIT`) and those taken together
(`ONE_UNIT`). Units go out in collection order, which `order` sets: the exclusive
tests first, then the light ones, then the rest; in each group the longest unit
first (`durations.json`, what each unit took in a recent run: a long unit started
last would run on alone while the other processes wait at the end).

A test marked ``exclusive`` compares CPU figures that a test beside it could move
(the staging verdicts and their lab agreement): it takes the CPU lock alone. Every
other test takes it shared, but for the light tests, which take no lock: one
process each, no broker, no network (`LIGHT`), they leave the exclusive test its
brokers, its processes and a core's worth of CPU, and cost a CPU-per-message
figure nothing (the staging module passes on a machine loaded to 15 by other
work). So while the staging window runs, the other processes run the unit tests,
which `order` hands out right after it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
from collections import Counter
from pathlib import Path
from typing import IO, Any, Final

import pytest

LIGHT: Final = ("tests/unit/", "tests/deploy/")
"""Folders of light tests: one process each, no broker, no network."""

ONE_TEST_A_UNIT: Final = (
    "tests/faults/test_fast_set.py",
    "tests/integration/test_user_schema.py",
)
"""Modules whose tests `make test`'s processes take one by one: each runs for 10 s to
1 min and shares nothing with its neighbours. Every other module is taken whole, so
its module, class and session fixtures (the staging window, the secured brokers,
`codec-kafka start`, Prometheus, the `--compare` reference run) start once."""

ONE_UNIT: Final = {
    "tests/integration/test_registry_framing.py": "schema-registry",
    "tests/integration/test_registry_header.py": "schema-registry",
    "tests/integration/test_registry_interop.py": "schema-registry",
    "tests/integration/test_registry_loadgen.py": "schema-registry",
    "tests/integration/test_registry_secured.py": "schema-registry",
    "tests/integration/test_registry_team.py": "schema-registry",
    "tests/integration/test_security.py": "secured-brokers",
    "tests/integration/test_security_listeners.py": "secured-brokers",
}
"""Modules taken together as one unit: the schema-registry ones register schemas
under subjects named after record types (RecordNameStrategy), which they would share
with each other's on the run's one registry if they ran side by side; the secured
brokers' (SASL_SSL, mutual TLS) start once, in the process that takes the unit."""

DURATIONS: Final = Path(__file__).with_name("durations.json")
"""Seconds each unit of more than `RECORDED_S` took in a recent `make test` run
(`pytest ... --store-durations` rewrites it): only the order of the units uses it."""
RECORDED_S: Final = 5.0
UNKNOWN_S_PER_TEST: Final = 3.0
"""A unit not in `DURATIONS` (new, or shorter than `RECORDED_S`) counts this much
per test."""


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to (the module docstring)."""
    module = nodeid.split("::", 1)[0]
    if module in ONE_UNIT:
        return ONE_UNIT[module]
    return nodeid if module in ONE_TEST_A_UNIT else module


def store(walls: dict[str, float]) -> None:
    """Writes `DURATIONS` from each test's wall seconds (node id -> seconds)."""
    units: dict[str, float] = {}
    for nodeid, seconds in walls.items():
        units[unit_of(nodeid)] = units.get(unit_of(nodeid), 0.0) + seconds
    kept = {u: round(s) for u, s in sorted(units.items()) if s >= RECORDED_S}
    DURATIONS.write_text(json.dumps(kept, indent=1) + "\n")


def recorded() -> dict[str, float]:
    """`DURATIONS`, or nothing if it is missing or unreadable."""
    try:
        found: dict[str, float] = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}
    return found


def is_exclusive(item: pytest.Item | None) -> bool:
    """Whether `item` is marked ``exclusive``."""
    return item is not None and item.get_closest_marker("exclusive") is not None


def is_light(item: pytest.Item) -> bool:
    """Whether `item` is a light test (`LIGHT`)."""
    return item.nodeid.startswith(LIGHT) and not is_exclusive(item)


def order(items: list[pytest.Item]) -> None:
    """Exclusive tests first (started at once, they wait for no long test of another
    process), then the light ones (which the other processes run beside them), then
    the rest; in each group the longest unit first, a unit's tests in their order."""
    seconds = recorded()
    counts = Counter(unit_of(item.nodeid) for item in items)

    def key(item: pytest.Item) -> tuple[int, float, str]:
        group = 0 if is_exclusive(item) else 1 if is_light(item) else 2
        unit = unit_of(item.nodeid)
        return group, -seconds.get(unit, UNKNOWN_S_PER_TEST * counts[unit]), unit

    items.sort(key=key)


class CpuLock:
    """A readers-writer lock across the xdist workers (flock on two files).

    Shared holders run side by side; an exclusive holder runs alone (light tests
    take no lock). The gate keeps new shared holders out while an exclusive one
    waits, so it is not starved by the stream of short tests in the other processes.
    """

    def __init__(self, path: Path) -> None:
        self._paths = (path, path.with_suffix(".gate"))
        self._main: IO[str] = path.open("a")
        self._gate: IO[str] = self._paths[1].open("a")
        self.held: bool | None = None
        """None when not held, else whether it is held exclusively."""

    def acquire(self, *, exclusive: bool) -> None:
        """Waits for the lock: alone when `exclusive`, else shared."""
        fcntl.flock(self._gate, fcntl.LOCK_EX)
        try:
            if exclusive:
                fcntl.flock(self._main, fcntl.LOCK_EX)
        finally:
            fcntl.flock(self._gate, fcntl.LOCK_UN)
        if not exclusive:
            fcntl.flock(self._main, fcntl.LOCK_SH)
        self.held = exclusive

    def release(self) -> None:
        """Lets the lock go."""
        fcntl.flock(self._main, fcntl.LOCK_UN)
        self.held = None

    def hold_for(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool:
        """Takes what `item` needs (nothing for a light test); returns whether to
        let it go after `item`. An exclusive hold lasts while the next test is
        exclusive too: a module of them (the staging window, then the tests
        reading it) runs as one block, not interleaved with the other processes'
        tests, each of which it would wait for."""
        if is_light(item):
            if self.held is not None:
                self.release()
            return False
        exclusive = is_exclusive(item)
        if self.held is not None and self.held != exclusive:
            self.release()
        if self.held is None:
            self.acquire(exclusive=exclusive)
        return not (exclusive and is_exclusive(nextitem))

    def remove(self) -> None:
        """Closes and unlinks the lock's files."""
        for path in self._paths:
            with contextlib.suppress(OSError):
                path.unlink()
        self._main.close()
        self._gate.close()


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadscope` as `make test` runs it (the module docstring), units in
    collection order (xdist would put the units of most tests first)."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def __init__(self, config: pytest.Config, log: Any) -> None:
            super().__init__(config, log)
            config.option.loadscopereorder = False

        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return ModuleScheduling(config, log)
