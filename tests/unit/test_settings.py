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
from localkafka.cli import main as kafka_main
from schemas.errors import ConfigError
from service.cli import main as worker_main
from service.kafka.admin_topics import ensure_topics
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
        assert set(data) - {"registry"} == {"kafka", tool}  # registry: framing tools
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

    def test_a_misspelt_key_is_named_with_a_suggestion(self, tmp_path: Path) -> None:
        """As a misspelt variable is: the closest key of the same table."""
        path = tmp_path / "typo.toml"
        path.write_text(
            '[kafka]\nsasl_pasword = "x"\n[worker.consumer]\ngrup_id = "g"\n'
            "[worker.processing]\nzzz = 1\n"
        )
        with pytest.raises(ConfigError) as info:
            load_worker(config_file=path)
        assert str(info.value).splitlines() == [
            f"config error: unknown setting kafka.sasl_pasword ({path} [kafka]): "
            "did you mean kafka.sasl_password?",
            f"config error: unknown setting worker.consumer.grup_id ({path} [worker]):"
            " did you mean worker.consumer.group_id?",
            f"config error: unknown setting worker.processing.zzz ({path} [worker])",
        ]
        path.write_text("[loadgen]\nraet = 5\n")
        with pytest.raises(
            ConfigError, match=r"raet .*: did you mean loadgen\.rate\?$"
        ):
            load_loadgen(config_file=path)


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


class FakeTopics:
    """A cluster with no topics, for the hint `ensure_topics` prints."""

    bootstrap = "b:9092"

    def partitions(self, name: str, timeout: float = 0) -> int | None:
        return None


class TestHintsRunAsPrinted:
    """A printed fix repeats how the tool was told the cluster (the rest of the
    way, executing such a hint against a secured broker, is
    tests/integration/test_security.py)."""

    def test_the_connection_repeats_file_address_and_flags(
        self, shared: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("KAFKA_SASL_PASSWORD", "S3NT1NEL")
        monkeypatch.setenv("KAFKA_SASL_USERNAME", "from-env")
        flags = {
            "kafka": {
                "security_protocol": "SSL",
                "ssl_ca_location": "/ca dir/ca.pem",
                "ssl_key_location": "/k.pem",
                "extra": {
                    "sasl.oauthbearer.client.secret": "S3",
                    "socket.nagle.disable": "true",
                },
            }
        }
        kafka = load_loadgen(flags, config_file=shared).kafka
        assert kafka.arguments() == [
            *("--config", str(shared.absolute())),
            *("--bootstrap-servers", "broker-from-toml:9092"),
            *("--security-protocol", "SSL", "--ssl-ca-location", "/ca dir/ca.pem"),
            *("-X", "ssl.key.location=/k.pem"),
            *("-X", f"sasl.oauthbearer.client.secret={MASK}"),
            *("-X", "socket.nagle.disable=true"),
        ]

    def test_nothing_given_repeats_nothing(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """No address anywhere: both commands find the same (recorded) broker; a
        file without [kafka] is not repeated; the environment is read by both."""
        assert load_loadgen().kafka.arguments() == []
        own = tmp_path / "own.toml"
        own.write_text("[loadgen]\nrate = 5\n")
        assert load_loadgen(config_file=own).kafka.arguments() == []
        monkeypatch.setenv("KAFKA_SECURITY_PROTOCOL", "SSL")
        assert load_loadgen().kafka.arguments() == []
        monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "env:1")
        assert load_loadgen().kafka.arguments() == ["--bootstrap-servers", "env:1"]

    def test_the_missing_topic_hint_carries_them_quoted(self, shared: Path) -> None:
        args = ["--config", str(shared), "--sasl-username", "a user"]
        with pytest.raises(ConfigError) as info:
            ensure_topics(
                FakeTopics(),  # type: ignore[arg-type]  # only what the check asks
                {"t": "--topic"},
                create=False,
                partitions=3,
                connect=args,
            )
        assert (
            f"`codec-kafka topics create t --partitions 3 --config {shared} "
            "--sasl-username 'a user'`, or start with --create-topics"
        ) in str(info.value)


class TestKafkaTopicsConfig:
    """`codec-kafka topics` takes `--config FILE` as every command does; a topic's
    own settings are `--topic-config`."""

    def test_print_config_reads_the_file_env_and_flags(
        self,
        shared: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        monkeypatch.setenv("KAFKA_SASL_USERNAME", "env-user")
        argv = ["topics", "list", "--config", str(shared), "--print-config"]
        assert kafka_main([*argv, "--sasl-mechanism", "PLAIN"]) == 0
        out = capsys.readouterr().out
        kafka = json.loads(out)["kafka"]
        assert kafka["bootstrap_servers"] == "broker-from-toml:9092"
        assert kafka["security_protocol"] == "SASL_SSL"  # the file
        assert kafka["sasl_username"] == "env-user"  # env over the file
        assert kafka["sasl_mechanism"] == "PLAIN"  # the flag over both
        assert kafka["sasl_password"] == MASK and "S3NT1NEL" not in out

    @pytest.mark.parametrize("action", ["create t", "list", "delete t"])
    def test_every_topics_command_takes_config(
        self, shared: Path, capsys: pytest.CaptureFixture[str], action: str
    ) -> None:
        argv = ["topics", *action.split(), "--config", str(shared), "--print-config"]
        assert kafka_main(argv) == 0
        assert '"sasl_username": "svc"' in capsys.readouterr().out

    def test_a_misspelt_file_key_exits_2_with_a_suggestion(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = tmp_path / "c.toml"
        path.write_text('[kafka]\nsasl_pasword = "x"\n')
        assert kafka_main(["topics", "list", "--config", str(path)]) == 2
        assert capsys.readouterr().err == (
            f"config error: unknown setting kafka.sasl_pasword ({path} [kafka]): "
            "did you mean kafka.sasl_password?\n"
        )

    def test_the_old_topic_setting_spelling_is_refused_naming_the_new(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        argv = ["topics", "create", "t", "--config", "retention.ms=60000"]
        assert kafka_main(argv) == 2
        assert capsys.readouterr().err == (
            "codec-kafka: error: --config takes a TOML file (its [kafka] table); a "
            "topic setting is --topic-config retention.ms=60000\n"
        )

    def test_address_precedence(
        self, shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Flag < env < file as everywhere; then the broker recorded in --data-dir
        (none running: 127.0.0.1:9092)."""
        from localkafka.topics import cluster

        def address(flag: str | None, file: Path | None) -> str:
            flags = {"kafka": {"bootstrap_servers": flag}} if flag else {}
            return cluster(
                flags=flags,
                flag_names={},
                config_file=file,
                data_dir=tmp_path / "none",
                environ=dict(os.environ),
            ).bootstrap_servers

        assert address(None, None) == "127.0.0.1:9092"
        assert address(None, shared) == "broker-from-toml:9092"
        monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "env:1")
        assert address(None, shared) == "env:1"
        assert address("flag:2", shared) == "flag:2"
