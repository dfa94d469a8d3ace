"""pytest for the fault suite's fast set: the `faults` marker and the shared broker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.harness import Env
from tests.faults.runner import shared_broker

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
def fault_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """The fast set's environment: the shared broker and a folder for logs."""
    with shared_broker() as bootstrap:
        yield Env(bootstrap, tmp_path_factory.mktemp("faults"), fast=True)
