"""Writing the state file through which other commands find the CLI's broker.

The format and the reader live in `service.kafka.broker_record`, which every tool uses.
"""

from __future__ import annotations

import json
from pathlib import Path

from service.kafka.broker_record import (
    DEFAULT_DATA_DIR,
    STATE_FILE,
    BrokerState,
    read_state,
)

__all__ = [
    "DEFAULT_DATA_DIR",
    "STATE_FILE",
    "BrokerState",
    "clear_state",
    "read_state",
    "write_state",
]


def write_state(data_dir: Path, state: BrokerState) -> None:
    """Records ``state`` in ``data_dir``'s state file."""
    (data_dir / STATE_FILE).write_text(json.dumps(state) + "\n")


def clear_state(data_dir: Path) -> None:
    """Removes ``data_dir``'s state file (a missing one is fine)."""
    (data_dir / STATE_FILE).unlink(missing_ok=True)
