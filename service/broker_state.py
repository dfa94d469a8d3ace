"""Where `codec-kafka start` records the local broker, and how every tool reads it.

The state file `<data-dir>/broker.pid` (default data dir `.local-kafka`) holds one JSON
object, `{"pid", "bootstrap", "version"}`. `codec-kafka` writes it; the other tools
read it to find the broker when no address is given. Its name and keys are a
contract: add keys if needed, never rename these.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Final, TypedDict

from service.children import pid_alive

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
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    with contextlib.suppress(OSError):  # no procfs: trust the pid alone
        cmdline = Path(f"/proc/{state['pid']}/cmdline").read_bytes()
        if b"kafka.Kafka" not in cmdline:
            return None
    return state if pid_alive(state["pid"]) else None
