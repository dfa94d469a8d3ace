"""The load generator's record and replay examples of the README run as written.

The lines are read from README.md at test time and run by bash in a scratch
directory, the venv first on PATH and the session's broker given the way a tool
finds one (`KAFKA_BOOTSTRAP_SERVERS`, as after `make kafka-start` the recorded
address would be). The paced examples before them run for a minute or more each:
`tests/unit/test_readme_examples.py` checks their flags, and that a pattern
reaches its rate.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from tests.unit.test_readme_examples import examples

pytestmark = pytest.mark.slow

ROOT: Final = Path(__file__).resolve().parents[2]
VENV_BIN: Final = Path(sys.executable).parent


def test_record_and_replay_examples_run_as_written(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    lines = [
        line
        for line in examples()
        if line.startswith("codec-loadgen") and re.search(r"traffic\.rec\.gz", line)
    ]
    assert len(lines) == 4, lines
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("KAFKA_", "WORKER_", "LOADGEN_", "AB_"))
    }
    env |= {
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "PATH": f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
    }
    # The traffic `record` reads (the README's first line writes 2.4 M messages).
    setup = "codec-loadgen --topic orders --create-topics --rate 2000 --count 1000"
    script = "\n".join(["set -euo pipefail", setup, *lines])
    bash = shutil.which("bash")
    assert bash is not None, "the README's shell lines need bash"
    done = subprocess.run(
        [bash, "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "traffic.rec.gz").stat().st_size > 0
    assert done.stdout.count("acked") == 4, done.stdout
