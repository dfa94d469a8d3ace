"""Where `codec-kafka start` records the local broker, and how every tool reads it.

The state file `<data-dir>/broker.pid` (default data dir `.local-kafka`) holds one JSON
object, `{"pid", "bootstrap", "version", "security", "client_config"}` (the last
two since the local broker could be secured; a file without them is plaintext). `codec-kafka` writes it; the other tools
read it to find the broker when no address is given. Its name and keys are a
contract: add keys if needed, never rename these.
"""

from __future__ import annotations

import contextlib
import json
import tomllib
from pathlib import Path
from typing import Any, Final, NotRequired, TypedDict

from service.lifecycle.child_processes import pid_alive

STATE_FILE: Final = "broker.pid"
DEFAULT_DATA_DIR: Final = ".local-kafka"


class BrokerState(TypedDict):
    """What ``codec-kafka start`` records about the broker it left running."""

    pid: int
    """The broker JVM's pid, also its process group id."""
    bootstrap: str
    """Its ``127.0.0.1:PORT`` bootstrap address."""
    version: str
    """The Kafka version it runs."""
    security: NotRequired[str]
    """Its client listener's mode: plaintext (the default), ssl, sasl_plaintext,
    sasl_ssl or mtls."""
    client_config: NotRequired[str]
    """A secured listener's `<data-dir>/client.toml`: the `[kafka]` settings of a
    client (mode 0600)."""


def read_state(data_dir: Path) -> BrokerState | None:
    """Returns the state in ``data_dir`` if its broker is still running, else None.

    A stale file (dead pid, or a pid recycled by a process other than a Kafka
    broker) and an unreadable one both read as None.
    """
    try:
        raw = json.loads((data_dir / STATE_FILE).read_text())
        state = BrokerState(
            pid=int(raw["pid"]),
            bootstrap=str(raw["bootstrap"]),
            version=str(raw.get("version", "")),
        )
        if raw.get("security") is not None:
            state["security"] = str(raw["security"])
        if raw.get("client_config") is not None:
            state["client_config"] = str(raw["client_config"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    with contextlib.suppress(OSError):  # no procfs: trust the pid alone
        cmdline = Path(f"/proc/{state['pid']}/cmdline").read_bytes()
        if b"kafka.Kafka" not in cmdline:
            return None
    return state if pid_alive(state["pid"]) else None


def recorded_client_settings(data_dir: Path) -> dict[str, Any]:
    """The `[kafka]` table of the running local broker's `client.toml`, if it is
    secured (empty for a plaintext one, none running, or an unreadable file)."""
    state = read_state(data_dir)
    if state is None or "client_config" not in state:
        return {}
    try:
        table = tomllib.loads(Path(state["client_config"]).read_text()).get("kafka")
    except (OSError, ValueError):
        return {}
    return dict(table) if isinstance(table, dict) else {}
