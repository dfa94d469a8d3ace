"""The README's quick start runs exactly as written, as a newcomer would run it.

The fenced block between `<!-- quickstart -->` and `<!-- /quickstart -->` in README.md
is read at test time (never copied here) and run by bash with `set -euo pipefail` from
the repository root, the venv first on PATH, and no broker address or tool setting in
the environment: a newcomer's shell after `make setup` has none. The block starts and
stops the local broker itself, in `.local-kafka/` where every tool given no address
finds it: so the block runs in a copy of the repository made of links to its files
and folders but for its own `.local-kafka/` (the tests beside it run their tools from
the repository itself, where no broker is recorded). It serves the worker's metrics
on a fixed port, so the test skips where that is already in use: that is a
developer's machine, not CI's.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from localkafka.process import port_open
from service.kafka.broker_record import DEFAULT_DATA_DIR, read_state

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900), pytest.mark.own_broker]

ROOT: Final = Path(__file__).resolve().parents[2]
README: Final = ROOT / "README.md"
TIMEOUT_S: Final = 600
"""The block's budget: broker start ~5 s, 8 s of worker, an A/B of two codecs."""
TOOL_ENV_PREFIXES: Final = ("KAFKA_", "WORKER_", "LOADGEN_", "AB_", "BENCH_")
"""Settings every command reads from the environment; a newcomer has none set."""
MAKE_ENV: Final = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")
"""Set when the suite runs under `make test`; a newcomer's shell has no outer make."""


def quickstart() -> str:
    """The shell lines of the README's quick-start block."""
    text = README.read_text()
    section = re.search(r"<!-- quickstart -->(.*?)<!-- /quickstart -->", text, re.S)
    assert section, "README.md has no <!-- quickstart --> ... <!-- /quickstart -->"
    (block,) = re.findall(r"^```(?:sh|bash)\n(.*?)^```$", section.group(1), re.S | re.M)
    return str(block)


def flag(block: str, name: str) -> str:
    """The value the block gives `--name` (the first time it appears)."""
    match = re.search(rf"--{name}[ =](\S+)", block)
    assert match, f"the quick start has no --{name}"
    return match.group(1)


def linked_copy(at: Path) -> Path:
    """The repository at `at`: a link to each of its files and folders but
    `.local-kafka/`, which the quick start makes there for itself."""
    at.mkdir()
    for entry in ROOT.iterdir():
        if entry.name != DEFAULT_DATA_DIR:
            (at / entry.name).symlink_to(entry)
    return at


def brokers(data_dir: Path) -> list[int]:
    """Pids of broker JVMs running on the data dir `data_dir`."""
    config = str(data_dir / "server.properties").encode()
    found = []
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if b"kafka.Kafka" in argv and config in argv:
                found.append(int(proc.name))
    return found


def program(name: str) -> str:
    """The full path of a program the quick start needs (`make`, `bash`)."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: the quick start needs it")
    return path


def newcomer_env() -> dict[str, str]:
    """This environment as a newcomer's shell would have it, the venv first on PATH."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(TOOL_ENV_PREFIXES) and k not in MAKE_ENV
    }
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the quick start runs: the repository, linked (`linked_copy`)."""
    return linked_copy(tmp_path_factory.mktemp("quickstart") / "repo")


@pytest.fixture(scope="module")
def run(
    root: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[subprocess.CompletedProcess[str]]:
    """The quick start's bash run, to completion; whatever it left running is stopped."""
    block = quickstart()
    port = int(flag(block, "metrics-port"))
    if port_open(port):
        pytest.skip(f"port {port} is in use: the quick start's worker serves it")
    done = subprocess.run([program("make"), "-q", "setup"], cwd=ROOT, check=False)
    if done.returncode != 0:
        pytest.skip("`make setup` is not current: the quick start assumes it was run")
    # Files, not pipes: a background job left behind by a failing line would hold a
    # pipe open and stall the read until the timeout.
    out = tmp_path_factory.mktemp("quickstart")
    with open(out / "stdout", "w") as stdout, open(out / "stderr", "w") as stderr:
        bash = subprocess.Popen(
            [program("bash"), "-c", f"set -euo pipefail\n{block}"],
            cwd=root,
            env=newcomer_env(),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,  # the background worker joins its process group
        )
    try:
        code = bash.wait(TIMEOUT_S)
        texts = [
            (out / name).read_text(errors="replace") for name in ("stdout", "stderr")
        ]
        yield subprocess.CompletedProcess(bash.args, code, *texts)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(bash.pid, signal.SIGKILL)
        bash.wait()
        if brokers(root / DEFAULT_DATA_DIR):
            subprocess.run(
                [ROOT / ".venv" / "bin" / "codec-kafka", "stop"], cwd=root, check=False
            )


class TestQuickstart:
    """The README's quick start succeeds and shows what the README promises."""

    def test_runs_to_the_end(self, run: subprocess.CompletedProcess[str]) -> None:
        """Every line succeeds under `set -euo pipefail` (the last one stops Kafka)."""
        assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"

    def test_worker_counts_the_loaded_messages(
        self, run: subprocess.CompletedProcess[str]
    ) -> None:
        """The curl line shows the worker's ok count: messages handled, none broken."""
        block = quickstart()
        codec, count = flag(block, "codec"), int(flag(block, "count"))
        lines = re.findall(r"^worker_messages_total\{(.*)\} (\S+)$", run.stdout, re.M)
        assert lines, run.stdout + run.stderr
        counts = {
            labels: float(value)
            for labels, value in lines
            if f'codec="{codec}"' in labels
        }
        ok = sum(v for labels, v in counts.items() if 'outcome="ok"' in labels)
        assert 0 < ok <= count, counts
        assert sum(counts.values()) == ok, counts

    def test_ab_prints_a_table_row_per_codec(
        self, run: subprocess.CompletedProcess[str]
    ) -> None:
        """codec-ab prints its table: a `codec` column and a row for each codec."""
        codecs = flag(quickstart(), "codecs").split(",")
        # A Markdown table or a terminal one (its rules are box-drawing characters).
        rows = re.findall(r"^\s*[|│┃](.*)$", run.stdout, re.M)
        first = [re.split(r"[|│┃]", row)[0].strip() for row in rows]
        assert "codec" in first, run.stdout
        for codec in codecs:
            assert any(cell.split(" ")[0] == codec for cell in first), run.stdout

    def test_leaves_no_broker_running(
        self, run: subprocess.CompletedProcess[str], root: Path
    ) -> None:
        """`make kafka-stop` stopped the broker that `make kafka-start` started."""
        assert run.returncode == 0, run.stderr
        assert brokers(root / DEFAULT_DATA_DIR) == []
        assert read_state(root / DEFAULT_DATA_DIR) is None
