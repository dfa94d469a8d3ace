"""Integration-test fixtures: one real Kafka broker for the whole test session.

The broker is, in order of preference: the cluster named by the
``KAFKA_BOOTSTRAP_SERVERS`` env var; an ``apache/kafka`` container (same
version as ``deploy/local-kafka/pom.xml``) when a Docker engine answers and
testcontainers is installed; else a ``LocalKafka`` JVM started for the session.
Every test under ``tests/integration`` is marked ``integration``.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException

from localkafka import (
    LocalKafka,
    broker_properties,
    create_topic,
    delete_topic,
    kafka_version,
    new_cluster_id,
    wait_until_ready,
)
from service.lifecycle.child_processes import free_port

_HERE = Path(__file__).resolve().parent

TopicFactory = Callable[..., str]


def pytest_configure(config: pytest.Config) -> None:
    """Registers the ``integration`` marker (harmless if pyproject has it too)."""
    config.addinivalue_line("markers", "integration: talks to a real Kafka broker")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks every test collected under tests/integration as ``integration``."""
    for item in items:
        if _HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.integration)


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


@pytest.fixture
def topic_factory(kafka_bootstrap: str) -> Iterator[TopicFactory]:
    """Creates uniquely named topics; deletes them at teardown.

    Call it as ``topic_factory(partitions=1, *, prefix="it", config=None)``; it
    returns the topic name once every partition has a leader.
    """
    created: list[str] = []

    def make(
        partitions: int = 1, *, prefix: str = "it", config: dict[str, str] | None = None
    ) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        create_topic(kafka_bootstrap, name, partitions, config=config)
        created.append(name)
        return name

    yield make
    for name in created:
        with contextlib.suppress(KafkaException, TimeoutError):
            delete_topic(kafka_bootstrap, name, timeout=15)


def _secured(
    mode: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalKafka]:
    data_dir = tmp_path_factory.mktemp(f"kafka-{mode}")
    with LocalKafka(data_dir, heap="384m", security=mode) as kafka:
        yield kafka


@pytest.fixture(scope="session")
def sasl_ssl_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    """A local broker whose client listener is SASL_SSL (SCRAM-SHA-512, a throw-away
    CA), started on first use, once per session; `.client_file` is its client.toml."""
    yield from _secured("sasl_ssl", tmp_path_factory)


@pytest.fixture(scope="session")
def mtls_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    """A local broker whose client listener asks for client certificates (mutual
    TLS), started on first use, once per session."""
    yield from _secured("mtls", tmp_path_factory)
