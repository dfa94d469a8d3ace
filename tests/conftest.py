"""Fixtures every test folder shares: the run's Kafka broker and schema registry,
the CPU lock, and the timing of each test and start-up (`tests/timing.py`).

The broker is, in order of preference: the cluster named by the
``KAFKA_BOOTSTRAP_SERVERS`` env var; an ``apache/kafka`` container (same
version as ``deploy/local-kafka/pom.xml``) when a Docker engine answers and
testcontainers is installed; else a ``LocalKafka`` JVM. The registry is
``REGISTRY_URL``, else a local Apicurio Registry. Each starts once per run, on first
use: under pytest-xdist (`make test`) the controller starts it for every worker
process (`tests/shared_services.py`), so each test works on topics, groups and
subjects of its own. A test that needs a broker of its own (one it stops, restarts
or secures, or the quick start's) starts it and says so with the ``own_broker``
marker (given by the secured brokers' fixtures too): ``-m "not own_broker"`` leaves
those out.

`make test` runs the suite in three processes (pytest-xdist): `tests/scheduling.py`
says which tests each takes, in what order, and which run alone (``exclusive``, the
CPU lock). `tests/timing.py` prints where the run's time went.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Final

import pytest

from localkafka import (
    LocalKafka,
    broker_properties,
    kafka_version,
    new_cluster_id,
    wait_until_ready,
)
from service.lifecycle.child_processes import free_port
from tests import scheduling, shared_services, timing
from tests.scheduling import CpuLock

OWN_BROKER_FIXTURES: Final = ("sasl_ssl_kafka", "mtls_kafka", "cli_broker")
"""Fixtures that start a broker of their own (the secured ones, test_localkafka's
`codec-kafka start`): their tests are ``own_broker``."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--timings-json",
        metavar="FILE",
        help="write every test's wall and CPU seconds and every start-up's to FILE",
    )
    parser.addoption(
        "--store-durations",
        action="store_true",
        help="rewrite tests/durations.json, the order make test's processes take "
        "the units of work in (tests/scheduling.py), from this run",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Registers the markers, the timing plugin, and opens this process's CPU lock."""
    config.addinivalue_line(
        "markers",
        "exclusive: measures CPU or throughput: runs with no other test beside it "
        "under pytest-xdist",
    )
    config.addinivalue_line(
        "markers",
        "own_broker: starts a Kafka broker of its own (secured, stopped or restarted, "
        "the quick start's) instead of using the run's shared one",
    )
    timing.register(config, extra_cpu=lambda: _services_cpu(config))
    if run := os.environ.get("PYTEST_XDIST_TESTRUNUID"):  # an xdist worker
        path = Path(tempfile.gettempdir()) / f"codec-ab-tests-{run}.lock"
        config.stash[_LOCK] = CpuLock(path)


def pytest_configure_node(node: Any) -> None:
    """The xdist controller hands each worker the folder of the run's services."""
    config: pytest.Config = node.config
    host = config.stash.get(_HOST, None)
    if host is None:
        host = config.stash[_HOST] = shared_services.Host(
            {"kafka": _start_kafka, "registry": _start_registry}
        )
    node.workerinput[shared_services.KEY] = str(host.root)


def _services_cpu(config: pytest.Config) -> float:
    host = config.stash.get(_HOST, None)
    return host.cpu_seconds() if host is not None else 0.0


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stops the run's services; removes the lock's files (every worker opened
    them at its start)."""
    if (host := config.stash.get(_HOST, None)) is not None:
        host.close()
    if (lock := config.stash.get(_LOCK, None)) is not None:
        lock.remove()


_LOCK = pytest.StashKey[CpuLock]()
_HOST = pytest.StashKey[shared_services.Host]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks the tests of the secured brokers ``own_broker``; orders the tests
    for `make test`'s processes (`tests/scheduling.py`)."""
    for item in items:
        if set(OWN_BROKER_FIXTURES) & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.own_broker)
    scheduling.order(items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """Runs each test (setup, call, teardown) under the CPU lock, when there is one
    (`tests/scheduling.py`)."""
    lock = item.config.stash.get(_LOCK, None)
    if lock is None:  # one process: nothing runs beside any test
        return (yield)
    release = lock.hold_for(item, nextitem)
    try:
        return (yield)
    finally:
        if release:
            lock.release()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadscope` as `make test` runs it (`tests/scheduling.py`)."""
    if config.getvalue("dist") != "loadscope":
        return None
    return scheduling.make_scheduler(config, log)


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


@contextmanager
def _kafka_container() -> Iterator[str]:
    """An apache/kafka container's bootstrap address, stopped on exit."""
    from testcontainers.core.container import DockerContainer

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


def _start_kafka(stack: ExitStack) -> tuple[str, int | None]:
    """Starts the run's broker in `stack`: a container if Docker answers and
    testcontainers is installed, else a local JVM. Its address and pid."""
    if _docker_answers() and importlib.util.find_spec("testcontainers") is not None:
        return stack.enter_context(_kafka_container()), None
    kafka = stack.enter_context(LocalKafka())
    return kafka.bootstrap_servers, kafka.pid


def _start_registry(stack: ExitStack) -> tuple[str, int | None]:
    """Starts the run's schema registry in `stack`: its URL and pid."""
    from localkafka.registry import LocalRegistry

    registry = stack.enter_context(LocalRegistry())
    return registry.url, registry.pid


def _service(request: pytest.FixtureRequest, name: str, env: str) -> Iterator[str]:
    """`env`'s value if set, else the run's shared service, else one started here."""
    if external := os.environ.get(env):
        yield external
        return
    if (root := shared_services.folder(request.config)) is not None:
        yield shared_services.ask(root, name)
        return
    start = _start_kafka if name == "kafka" else _start_registry
    with ExitStack() as stack:
        yield start(stack)[0]


@pytest.fixture(scope="session")
def kafka_bootstrap(request: pytest.FixtureRequest) -> Iterator[str]:
    """Bootstrap address of the run's Kafka broker (see the module docstring)."""
    yield from _service(request, "kafka", "KAFKA_BOOTSTRAP_SERVERS")


@pytest.fixture(scope="session")
def registry_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """The run's Confluent-compatible schema registry: ``REGISTRY_URL`` if set
    (bring your own), else a local Apicurio Registry started once for the run
    (only the tests that ask for it pay its start, about 10 s)."""
    yield from _service(request, "registry", "REGISTRY_URL")
