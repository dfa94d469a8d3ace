"""Integration-test fixtures: topics on the session's broker (`tests/conftest.py`),
and secured brokers. Every test under ``tests/integration`` is marked ``integration``.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException

from localkafka import (
    LocalKafka,
    create_topic,
    delete_topic,
)

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
