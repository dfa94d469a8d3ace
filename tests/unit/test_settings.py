"""The one settings system: one TOML file and one env scheme for every tool."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from abrunner.cli import main as ab_main
from loadgen.cli import main as loadgen_main
from loadgen.config import load_settings as load_loadgen
from schemas.errors import ConfigError
from service.cli import main as worker_main
from service.kafka.connection import MASK, recorded_local_broker
from service.settings.sources import env_name
from service.settings.worker import load_settings as load_worker

SHARED = """
[kafka]
bootstrap_servers = "broker-from-toml:9092"
security_protocol = "SASL_SSL"
sasl_mechanism = "SCRAM-SHA-512"
sasl_username = "svc"
sasl_password = "S3NT1NEL"
extra = { "socket.keepalive.enable" = true }

[worker.consumer]
topic = "orders-w"

[worker.processing]
batch_size = 250

[loadgen]
topic = "orders-l"
rate = 1234.0

[ab]
rate = 999.0
"""

Main = Callable[[list[str]], int]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith(("WORKER_", "LOADGEN_", "KAFKA_", "AB_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no recorded local broker unless a test writes one


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    path = tmp_path / "codec-ab.toml"
    path.write_text(SHARED)
    return path


class TestOneFile:
    """One TOML file holds [kafka] plus each tool's section, and configures each tool."""

    def test_each_tool_reads_kafka_and_its_own_section(self, shared: Path) -> None:
        worker = load_worker(config_file=shared)
        loadgen = load_loadgen(config_file=shared)
        for kafka in (worker.kafka, loadgen.kafka):
            assert kafka.bootstrap_servers == "broker-from-toml:9092"
            assert kafka.sasl_mechanism == "SCRAM-SHA-512"
            assert kafka.extra == {"socket.keepalive.enable": True}
        assert (worker.consumer.topic, worker.processing.batch_size) == (
            "orders-w",
            250,
        )
        assert (loadgen.topic, loadgen.rate) == ("orders-l", 1234.0)

    @pytest.mark.parametrize(
        ("main", "tool"),
        [(worker_main, "worker"), (loadgen_main, "loadgen"), (ab_main, "ab")],
    )
    def test_print_config_shows_the_kafka_section(
        self, main: Main, tool: str, shared: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["--print-config", "--config", str(shared)]) == 0
        out = capsys.readouterr().out
        data = json.loads(out)
        assert data["kafka"]["bootstrap_servers"] == "broker-from-toml:9092"
        assert data["kafka"]["sasl_username"] == "svc"
        assert data["kafka"]["sasl_password"] == MASK
        assert set(data) == {"kafka", tool}
        assert "S3NT1NEL" not in out

    def test_unknown_section_is_an_error(self, tmp_path: Path) -> None:
        path = tmp_path / "bad.toml"
        path.write_text("[workr]\nx = 1\n")
        with pytest.raises(ConfigError, match=r"unknown section \[workr\]"):
            load_worker(config_file=path)

    def test_connection_settings_belong_in_kafka(self, tmp_path: Path) -> None:
        path = tmp_path / "bad.toml"
        path.write_text('[loadgen.kafka]\nbootstrap_servers = "x:1"\n')
        with pytest.raises(ConfigError, match=r"go in \[kafka\]"):
            load_loadgen(config_file=path)

    def test_an_error_names_the_file_and_section(self, tmp_path: Path) -> None:
        path = tmp_path / "bad.toml"
        path.write_text("[worker.processing]\nbatch_size = 0\n")
        with pytest.raises(ConfigError) as info:
            load_worker(config_file=path)
        assert f"worker.processing.batch_size = 0 ({path} [worker])" in str(info.value)


class TestEnvironment:
    """`KAFKA_*` for the connection, `<TOOL>_<PATH>` for the rest, for every tool."""

    def test_names_follow_the_toml_paths(self) -> None:
        assert env_name("worker", ("codec", "name")) == "WORKER_CODEC__NAME"
        assert env_name("loadgen", ("rate",)) == "LOADGEN_RATE"
        assert env_name("ab", ("codecs",)) == "AB_CODECS"
        assert env_name("worker", ("kafka", "bootstrap_servers")) == (
            "KAFKA_BOOTSTRAP_SERVERS"
        )

    def test_kafka_bootstrap_servers_reaches_every_tool(
        self, shared: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "from-env:1")
        assert load_worker(config_file=shared).kafka.bootstrap_servers == "from-env:1"
        assert load_loadgen().kafka.bootstrap_servers == "from-env:1"
        flags = {"kafka": {"bootstrap_servers": "from-flag:2"}}
        assert load_worker(flags).kafka.bootstrap_servers == "from-flag:2"

    def test_unrelated_kafka_variables_are_left_alone(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("KAFKA_HEAP_OPTS", "-Xmx1g")  # Kafka's own scripts
        assert load_worker().kafka.security_protocol == "PLAINTEXT"

    def test_a_misspelt_variable_is_named_with_a_suggestion(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("LOADGEN_RAET", "5")
        with pytest.raises(
            ConfigError,
            match=r"LOADGEN_RAET names no setting \(did you mean LOADGEN_RATE\?\)",
        ):
            load_loadgen()

    def test_a_bad_value_names_the_variable(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        monkeypatch.setenv("WORKER_PROCESSING__BATCH_SIZE", "abc")
        assert worker_main(["--print-config"]) == 2
        err = capsys.readouterr().err
        assert (
            "worker.processing.batch_size = 'abc' (env WORKER_PROCESSING__BATCH_SIZE)"
            in err
        )
        assert "Traceback" not in err

    def test_help_works_whatever_the_environment(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        monkeypatch.setenv("WORKER_CODEC__NAME", "bogus")
        with pytest.raises(SystemExit) as info:
            worker_main(["--help"])
        assert info.value.code == 0


class TestLocalBroker:
    """Without any address given, tools use the broker `codec-kafka start` recorded."""

    def test_a_live_recorded_broker_is_the_default(self, tmp_path: Path) -> None:
        # A stand-in process whose command line names the broker's main class.
        broker = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)", "kafka.Kafka"]
        )
        try:
            cmdline = Path(f"/proc/{broker.pid}/cmdline")
            deadline = time.monotonic() + 10
            while b"kafka.Kafka" not in cmdline.read_bytes():  # until it has exec'd
                assert time.monotonic() < deadline
                time.sleep(0.01)
            record(tmp_path, broker.pid)
            assert recorded_local_broker() == "127.0.0.1:4321"
            assert load_worker().kafka.bootstrap_servers == "127.0.0.1:4321"
            assert load_loadgen().kafka.bootstrap_servers == "127.0.0.1:4321"
        finally:
            broker.kill()
            broker.wait()

    def test_a_pid_that_is_not_a_broker_is_ignored(self, tmp_path: Path) -> None:
        record(tmp_path, os.getpid())
        assert recorded_local_broker() is None

    def test_a_dead_recorded_broker_is_ignored(self, tmp_path: Path) -> None:
        record(tmp_path, 2**22 + 1)  # above Linux's largest pid
        assert load_worker().kafka.bootstrap_servers == "127.0.0.1:9092"


def record(directory: Path, pid: int) -> None:
    """Write a `codec-kafka start` state file naming `pid` in `directory`."""
    state = directory / ".local-kafka" / "broker.pid"
    state.parent.mkdir()
    state.write_text(json.dumps({"pid": pid, "bootstrap": "127.0.0.1:4321"}))
