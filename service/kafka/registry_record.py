"""Where `codec-kafka registry start` records the local schema registry, and how
every tool reads it.

The state file `<data-dir>/registry.json` (the broker's data dir, default
`.local-kafka`) holds one JSON object, `{"pid", "url", "version"}`: the JVM's pid
(also its process group), the Confluent-compatible base URL
(`http://127.0.0.1:PORT/apis/ccompat/v7`) and the Apicurio version. Its name and
keys are a contract, as the broker's `broker.pid` is: add keys, never rename them.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Final, TypedDict

from service.lifecycle.child_processes import pid_alive

REGISTRY_STATE_FILE: Final = "registry.json"
_JVM_MAIN_MARK: Final = b"apicurio-registry-app"
"""Part of the runner jar's name, in the JVM's command line."""


class RegistryState(TypedDict):
    """What ``codec-kafka registry start`` records about the registry it left running."""

    pid: int
    """The registry JVM's pid, also its process group id."""
    url: str
    """Its Confluent-compatible API, ``http://127.0.0.1:PORT/apis/ccompat/v7``."""
    version: str
    """The Apicurio Registry version it runs."""


def read_registry_state(data_dir: Path) -> RegistryState | None:
    """Returns the state in ``data_dir`` if its registry is still running, else None.

    A stale file (dead pid, or a pid recycled by a process other than the registry)
    and an unreadable one both read as None.
    """
    try:
        raw = json.loads((data_dir / REGISTRY_STATE_FILE).read_text())
        state = RegistryState(
            pid=int(raw["pid"]), url=str(raw["url"]), version=str(raw["version"])
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    with contextlib.suppress(OSError):  # no procfs: trust the pid alone
        cmdline = Path(f"/proc/{state['pid']}/cmdline").read_bytes()
        if _JVM_MAIN_MARK not in cmdline:
            return None
    return state if pid_alive(state["pid"]) else None


def write_registry_state(data_dir: Path, state: RegistryState) -> None:
    """Records ``state`` in ``data_dir``'s registry state file."""
    (data_dir / REGISTRY_STATE_FILE).write_text(json.dumps(state) + "\n")


def clear_registry_state(data_dir: Path) -> None:
    """Removes ``data_dir``'s registry state file (a missing one is fine)."""
    (data_dir / REGISTRY_STATE_FILE).unlink(missing_ok=True)
