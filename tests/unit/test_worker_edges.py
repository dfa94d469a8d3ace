"""Edges of the worker's command line that must end in one line, never a traceback:
settings librdkafka would refuse, an unreadable --config, signals at any moment.

Each runs `python -m service` against an address where nothing listens: every
refusal must come before anything is contacted (exit status 2 and one line), and
a signal while it waits must end it cleanly.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOWHERE = "127.0.0.1:1"
"""A bootstrap address where nothing listens: contacting it cannot succeed."""


def _worker(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "service", "--bootstrap-servers", NOWHERE, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


def _refused(*args: str, env: dict[str, str] | None = None) -> str:
    proc = _worker("--metrics-port", "0", *args, env=env)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, (out, err)
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("config error:"), err
    assert "kafka_unreachable" not in out  # refused before contacting anything
    return lines[0]


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--delivery-timeout-s", "inf"),
        ("--delivery-timeout-s", "nan"),
        ("--delivery-timeout-s", "1e12"),
        ("--session-timeout-ms", "3600001"),
        ("--summary-interval-s", "inf"),
        ("--batch-timeout-ms", "inf"),
    ],
)
def test_out_of_librdkafka_range(flag: str, value: str) -> None:
    line = _refused(flag, value)
    assert f"(flag {flag})" in line


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("WORKER_CONSUMER__MAX_POLL_INTERVAL_MS", "86400001"),
        ("WORKER_CONSUMER__FETCH_MAX_BYTES", "2147483136"),
        ("WORKER_CONSUMER__QUEUED_MAX_MESSAGES_KBYTES", "2097152"),
    ],
)
def test_out_of_librdkafka_range_env(variable: str, value: str) -> None:
    line = _refused(env={variable: value})
    assert value in line and variable in line


def test_session_above_max_poll_interval() -> None:
    line = _refused(
        "--session-timeout-ms",
        "600000",
        env={"WORKER_CONSUMER__MAX_POLL_INTERVAL_MS": "300000"},
    )
    assert "max.poll.interval.ms" in line


def test_config_that_fails_to_read() -> None:
    line = _refused("--config", "/proc/self/mem")  # a file whose read fails (EIO)
    assert "/proc/self/mem" in line and "cannot read" in line


def test_unreadable_config(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    config = tmp_path / "worker.toml"
    config.write_text("[worker.consumer]\ntopic = 'x'\n")
    config.chmod(0)
    line = _refused("--config", str(config))
    assert str(config) in line and "Permission denied" in line


def test_entry_point_holds_signals_first() -> None:
    """`codec-worker` and `python -m service` start in `service.console`, which holds
    SIGTERM/SIGINT before importing the worker (checked by what it imports)."""
    probe = (
        "import sys, signal; import service.console; "
        "heavy = [m for m in ('pydantic', 'confluent_kafka', 'service.cli') if m in sys.modules]; "
        "print(heavy)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert done.stdout.strip() == "[]"
