"""Fixtures every test folder shares: the session's Kafka broker, and the CPU lock.

The broker is, in order of preference: the cluster named by the
``KAFKA_BOOTSTRAP_SERVERS`` env var; an ``apache/kafka`` container (same
version as ``deploy/local-kafka/pom.xml``) when a Docker engine answers and
testcontainers is installed; else a ``LocalKafka`` JVM started for the session.
Integration tests and the fault suite's fast set use the same one; under
pytest-xdist (`make test`) each worker process starts its own.

`make test` runs the suite in two processes (pytest-xdist). A test marked
``exclusive`` compares CPU or throughput figures that another test running beside
it would move (a staging verdict, the `--compare` gate), so it takes the CPU lock
alone: it starts once the tests in the other processes have finished, and none
starts beside it until it ends. Every other test takes the lock shared. The lock
covers a test's whole protocol, so a module fixture set up in its first test (the
staging window) is covered too.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from localkafka import (
    LocalKafka,
    broker_properties,
    kafka_version,
    new_cluster_id,
    wait_until_ready,
)
from service.lifecycle.child_processes import free_port


def pytest_configure(config: pytest.Config) -> None:
    """Registers the ``exclusive`` marker and opens this process's CPU lock."""
    config.addinivalue_line(
        "markers",
        "exclusive: measures CPU or throughput: runs with no other test beside it "
        "under pytest-xdist",
    )
    if run := os.environ.get("PYTEST_XDIST_TESTRUNUID"):  # an xdist worker
        path = Path(tempfile.gettempdir()) / f"codec-ab-tests-{run}.lock"
        config.stash[_LOCK] = CpuLock(path)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Removes the lock's files (every worker opened them at its start)."""
    if (lock := config.stash.get(_LOCK, None)) is not None:
        lock.remove()


class CpuLock:
    """A readers-writer lock across the xdist workers (flock on two files).

    Shared holders run side by side; an exclusive holder runs alone. The gate keeps
    new shared holders out while an exclusive one waits, so it is not starved by
    the stream of short tests in the other processes.
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

    def remove(self) -> None:
        """Closes and unlinks the lock's files."""
        for path in self._paths:
            with contextlib.suppress(OSError):
                path.unlink()
        self._main.close()
        self._gate.close()


_LOCK = pytest.StashKey[CpuLock]()


def _exclusive(item: pytest.Item | None) -> bool:
    return item is not None and item.get_closest_marker("exclusive") is not None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Puts the exclusive tests first (in their order): started at once, they wait
    for no long test of another process, and the rest then run side by side."""
    items.sort(key=lambda item: not _exclusive(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """Runs each test (setup, call, teardown) under the CPU lock, when there is one.

    A shared hold ends with its test, so an exclusive test waits for one test of
    each other process at most. An exclusive hold lasts while this process's next
    test is exclusive too: a module of them (the staging window, then the tests
    reading it) runs as one block, not interleaved with the other processes'
    tests, each of which it would wait for.
    """
    lock = item.config.stash.get(_LOCK, None)
    if lock is None:  # one process: nothing runs beside any test
        return (yield)
    exclusive = _exclusive(item)
    if lock.held is not None and lock.held != exclusive:
        lock.release()
    if lock.held is None:
        lock.acquire(exclusive=exclusive)
    try:
        return (yield)
    finally:
        if not (exclusive and _exclusive(nextitem)):
            lock.release()


_ONE_TEST_A_UNIT = (
    "tests/faults/test_fast_set.py",
    "tests/integration/test_user_schema.py",
)
"""Modules whose tests `make test`'s processes take one by one: each runs for 10 s to
3 min and shares nothing with its neighbours. Every other module is taken whole, so
its module, class and session fixtures (the staging window, the secured brokers,
`codec-kafka start`, Prometheus, the `--compare` reference run) start once."""

_ONE_UNIT = {
    "tests/integration/test_registry_framing.py": "schema-registry",
    "tests/integration/test_registry_header.py": "schema-registry",
    "tests/integration/test_registry_interop.py": "schema-registry",
    "tests/integration/test_registry_loadgen.py": "schema-registry",
    "tests/integration/test_registry_secured.py": "schema-registry",
    "tests/integration/test_registry_team.py": "schema-registry",
}
"""Modules taken together as one unit: the session's schema registry (a JVM, about
10 s to start) then starts in one process, not in each."""


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadscope` as `make test` runs it: a module is a unit, but for the
    modules of `_ONE_TEST_A_UNIT`, whose tests are units of their own, and those of
    `_ONE_UNIT`, taken together."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            if module in _ONE_UNIT:
                return _ONE_UNIT[module]
            return nodeid if module in _ONE_TEST_A_UNIT else module

    return ModuleScheduling(config, log)


def _docker_answers() -> bool:
    """Returns whether a Docker engine answers within a few seconds."""
    if cli := shutil.which("docker"):
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            done = subprocess.run([cli, "info"], capture_output=True, timeout=5)
            return done.returncode == 0
        return False
    if not (os.environ.get("DOCKER_HOST") or Path("/var/run/docker.sock").exists()):
        return False
    try:  # no CLI: ask the engine through the docker SDK (testcontainers' client)
        importlib.import_module("docker").from_env(timeout=5).ping()
    except Exception:  # any failure means: no usable engine
        return False
    return True


def _container_kafka() -> Iterator[str] | None:
    """Returns a generator running an apache/kafka container, or None.

    None when testcontainers is not installed. The generator yields the
    container's bootstrap address and stops the container when closed.
    """
    try:
        from testcontainers.core.container import DockerContainer
    except ImportError:
        return None

    def run() -> Iterator[str]:
        port = free_port()  # host port == container port: advertised before start
        container: Any = DockerContainer(f"apache/kafka:{kafka_version()}")
        try:
            host = str(container.get_container_host_ip())
        except Exception:  # needs a running container in some setups
            host = "localhost"
        props = broker_properties(port, 9093, Path("/tmp/kraft-logs"))  # noqa: S108
        props["listeners"] = f"PLAINTEXT://0.0.0.0:{port},CONTROLLER://localhost:9093"
        props["advertised.listeners"] = f"PLAINTEXT://{host}:{port}"
        props["controller.quorum.voters"] = "1@localhost:9093"
        for key, value in props.items():
            container.with_env("KAFKA_" + key.upper().replace(".", "_"), value)
        container.with_env("CLUSTER_ID", new_cluster_id())
        container.with_bind_ports(port, port)
        container.start()
        try:
            wait_until_ready(f"{host}:{port}", timeout=120)
            yield f"{host}:{port}"
        finally:
            container.stop()

    return run()


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """Bootstrap address of the session's Kafka broker (see the module docstring)."""
    if external := os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        yield external
        return
    if _docker_answers() and (container := _container_kafka()) is not None:
        yield from container
        return
    with LocalKafka() as kafka:
        yield kafka.bootstrap_servers


@pytest.fixture(scope="session")
def registry_url() -> Iterator[str]:
    """The session's Confluent-compatible schema registry: ``REGISTRY_URL`` if set
    (bring your own), else a local Apicurio Registry started for the session (only
    the tests that ask for it pay its start, about 10 s)."""
    if external := os.environ.get("REGISTRY_URL"):
        yield external
        return
    from localkafka.registry import LocalRegistry

    with LocalRegistry() as registry:
        yield registry.url
