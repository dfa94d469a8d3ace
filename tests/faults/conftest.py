"""pytest for the fault suite's fast set: the `faults` marker and its environment on
the session's broker (`tests/conftest.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.harness import Env

_HERE = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    """Registers the `faults` marker (harmless if pyproject declares it too)."""
    config.addinivalue_line(
        "markers", "faults: a fault scenario against the real worker and broker"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks every test collected under tests/faults as `faults`, and as
    `integration` and `slow` too: each runs the worker on a real broker for
    10-60 s (`pytest -m "not faults"` leaves them out)."""
    for item in items:
        if _HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.faults)
            item.add_marker(pytest.mark.integration)
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def fault_env(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Env:
    """The fast set's environment: the session's broker and a folder for logs."""
    return Env(kafka_bootstrap, tmp_path_factory.mktemp("faults"), fast=True)
