"""The fast set under pytest: each scenario the catalog marks fast, short variants."""

from __future__ import annotations

import pytest

from tests.faults.catalog import Entry, select
from tests.faults.harness import Env
from tests.faults.runner import run_entry

FAST = select(fast=True)


@pytest.mark.parametrize("entry", FAST, ids=[e.id.replace(" ", "-") for e in FAST])
def test_scenario(fault_env: Env, entry: Entry) -> None:
    """The scenario passes every check; SKIPPED ones skip with their reason."""
    outcome = run_entry(entry, fault_env)
    if outcome.status == "SKIPPED":
        pytest.skip("; ".join(outcome.notes))
    details = "\n".join([*outcome.failures, *outcome.notes])
    assert outcome.status == "PASSED", f"{entry.id} FAILED:\n{details}"
