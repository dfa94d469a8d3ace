"""Worker settings: precedence, validation messages, secrets, refused librdkafka keys."""

from __future__ import annotations

import json
import logging
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from schemas.errors import ConfigError
from service.cli import main
from service.kafka.connection import MASK
from service.settings.worker import Settings, load_settings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith(("WORKER_", "KAFKA_")):
            monkeypatch.delenv(name)


class TestPrecedence:
    """defaults < TOML < environment < flags."""

    def test_each_layer_overrides_the_one_below(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        toml = tmp_path / "w.toml"
        toml.write_text(
            "[worker.processing]\nbatch_size = 7\nwork_us = 3\n"
            '[worker.codec]\nschema = "large"\n'
        )
        assert load_settings().processing.batch_size == 500
        assert load_settings(config_file=toml).processing.batch_size == 7
        monkeypatch.setenv("WORKER_PROCESSING__BATCH_SIZE", "9")
        settings = load_settings(config_file=toml)
        assert settings.processing.batch_size == 9
        assert settings.processing.work_us == 3
        assert settings.codec.schema_ == "large"
        flags = {"processing": {"batch_size": 11}}
        assert load_settings(flags, config_file=toml).processing.batch_size == 11

    def test_extra_librdkafka_settings_from_env_json(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("KAFKA_EXTRA", '{"fetch.wait.max.ms": 50}')
        conf = load_settings().consumer_config()
        assert conf["fetch.wait.max.ms"] == 50
        assert conf["enable.auto.offset.store"] is False


class TestNewSettings:
    """Topic creation and the worker index are settings like any other."""

    def test_flags_env_and_defaults(self, monkeypatch: pytest.MonkeyPatch) -> None:
        s = load_settings()
        assert (s.topics.create, s.topics.partitions, s.processing.index) == (
            False,
            4,
            0,
        )
        monkeypatch.setenv("WORKER_TOPICS__PARTITIONS", "6")
        monkeypatch.setenv("WORKER_PROCESSING__INDEX", "3")
        s = load_settings({"topics": {"create": True}})
        assert (s.topics.create, s.topics.partitions, s.processing.index) == (
            True,
            6,
            3,
        )

    def test_topic_roles_follow_the_policy_and_output(self) -> None:
        s = load_settings({"consumer": {"topic": "t"}})
        assert s.topic_roles() == {
            "t": "input, --topic",
            "t.dlq": "dead letters, --dlq-topic",
        }
        s = load_settings(
            {
                "consumer": {"topic": "t"},
                "processing": {"on_decode_error": "fail", "output_topic": "o"},
            }
        )
        assert s.topic_roles() == {"t": "input, --topic", "o": "output, --output-topic"}


class TestErrors:
    """A bad value names the field, the value and what is allowed."""

    @pytest.mark.parametrize(
        ("overrides", "needle"),
        [
            (
                {"codec": {"name": "jsonn"}},
                "worker.codec.name = 'jsonn' (flag codec/name): "
                "Input should be 'json+pydantic'",
            ),
            ({"codec": {"schema": "huge"}}, "worker.codec.schema = 'huge'"),
            (
                {"processing": {"batch_size": 0}},
                "worker.processing.batch_size = 0 (flag processing/batch_size): "
                "Input should be greater than or equal to 1",
            ),
            ({"consumer": {"grup_id": "x"}}, "unknown setting worker.consumer.grup_id"),
            (
                {"consumer": {"auto_offset_reset": "smallest"}},
                "'earliest', 'latest' or 'error'",
            ),
        ],
    )
    def test_message(self, overrides: dict[str, object], needle: str) -> None:
        with pytest.raises(ConfigError, match="config error") as info:
            load_settings(overrides)
        assert needle in str(info.value)

    @pytest.mark.parametrize(
        "key",
        [
            "plugin.library.paths",
            "sasl.kerberos.kinit.cmd",
            "ssl.engine.location",
            "enable.auto.offset.store",
            "enable.auto.commit",
        ],
    )
    def test_refused_librdkafka_keys(self, key: str) -> None:
        with pytest.raises(ConfigError, match=f"'{key}' is refused"):
            load_settings({"kafka": {"extra": {key: "x"}}})

    def test_unknown_env_section(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("WORKER_PROCESING__BATCH_SIZE", "3")
        with pytest.raises(
            ConfigError, match="WORKER_PROCESING__BATCH_SIZE names no setting"
        ):
            load_settings()

    def test_missing_config_file(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match="no such file"):
            load_settings(config_file=tmp_path / "nope.toml")

    def test_toml_syntax_error(self, tmp_path: Path) -> None:
        bad = tmp_path / "bad.toml"
        bad.write_text("[processing\n")
        with pytest.raises(ConfigError, match=r"bad\.toml"):
            load_settings(config_file=bad)


class TestSecrets:
    """Secrets never appear in masked output or error messages."""

    SENTINEL = "S3NT1NEL-pw"

    def test_masked_everywhere(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("KAFKA_SASL_PASSWORD", self.SENTINEL)
        extra = {
            "sasl.oauthbearer.client.secret": self.SENTINEL,
            "ssl.key.password": self.SENTINEL,
        }
        settings = load_settings({"kafka": {"extra": extra}})
        assert self.SENTINEL not in json.dumps(settings.masked())
        assert self.SENTINEL not in str(settings) + repr(settings)
        assert self.SENTINEL not in json.dumps(settings.consumer_config())
        assert settings.consumer_config()["sasl.password"] == MASK
        plain = settings.consumer_config(plaintext_secrets=True)
        assert plain["sasl.password"] == plain["ssl.key.password"] == self.SENTINEL

    def test_not_in_validation_errors(self) -> None:
        with pytest.raises(ConfigError) as info:
            load_settings(
                {
                    "kafka": {
                        "extra": {
                            "ssl.key.password": self.SENTINEL,
                            "plugin.library.paths": "x",
                        }
                    }
                }
            )
        assert self.SENTINEL not in str(info.value)


class TestCli:
    """The command line: help, codec list, exit status 2 before Kafka."""

    def test_help_states_defaults_and_env(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with pytest.raises(SystemExit) as info:
            main(["--help"])
        assert info.value.code == 0
        out = " ".join(capsys.readouterr().out.split())
        assert "default: 500; env WORKER_PROCESSING__BATCH_SIZE" in out
        assert "default: json+pydantic; env WORKER_CODEC__NAME" in out

    def test_list_codecs(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["--list-codecs"]) == 0
        out = capsys.readouterr().out
        for name in ("json+pydantic", "msgspec-msgpack", "protobuf", "auto"):
            assert name in out

    def test_bad_config_exits_2_without_kafka(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        # An unroutable bootstrap address: reaching Kafka would hang, not exit 2.
        code = main(["--bootstrap-servers", "192.0.2.1:9", "--codec", "msgpack"])
        assert code == 2
        assert "worker.codec.name = 'msgpack' (flag --codec)" in capsys.readouterr().err

    def test_bad_extra_flag(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["-X", "novalue"]) == 2
        assert "expected KEY=VALUE" in capsys.readouterr().err

    def test_print_config_masks(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["--print-config", "-X", "ssl.key.password=S3NT1NEL"]) == 0
        out, err = capsys.readouterr()
        assert "S3NT1NEL" not in out + err
        assert json.loads(out)["kafka"]["extra"]["ssl.key.password"] == MASK
        assert "puts a secret on the command line" in err

    def test_new_flags_reach_the_settings(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        argv = ["--print-config", "--create-topics", "--partitions", "2"]
        assert main([*argv, "--worker-index", "1"]) == 0
        worker = json.loads(capsys.readouterr().out)["worker"]
        assert worker["topics"] == {"create": True, "partitions": 2}
        assert worker["processing"]["index"] == 1

    def test_reliability_flags_reach_the_settings(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        argv = ["--print-config", "--max-attempts", "5", "--retry-backoff-ms", "10"]
        argv += ["--delivery-timeout-s", "7", "--session-timeout-ms", "6000"]
        argv += ["--group-instance-id", "w", "--logic", "flaky"]
        assert main(argv) == 0
        worker = json.loads(capsys.readouterr().out)["worker"]
        p, c = worker["processing"], worker["consumer"]
        assert (p["max_attempts"], p["retry_backoff_ms"]) == (5, 10.0)
        assert (p["delivery_timeout_s"], p["logic"]) == (7.0, "flaky")
        assert (c["session_timeout_ms"], c["group_instance_id"]) == (6000, "w")

    @pytest.mark.parametrize(("index", "expected"), [(0, "w"), (3, "w-3")])
    def test_static_membership_is_unique_per_child(
        self, index: int, expected: str
    ) -> None:
        settings = Settings.model_validate(
            {"consumer": {"group_instance_id": "w"}, "processing": {"index": index}}
        )
        assert settings.consumer_config()["group.instance.id"] == expected
        assert "group.instance.id" not in Settings().consumer_config()


@pytest.fixture
def process_state() -> Iterator[None]:
    """`main()` sets logging and signal handlers for the process: restore them."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    structlog.reset_defaults()
    root.handlers, root.level = saved
    for signum, handler in handlers.items():
        signal.signal(signum, handler)


@pytest.mark.usefixtures("process_state")
class TestStartupErrors:
    """Errors at the edge: one line naming the thing and the fix, exit status 2."""

    def test_metrics_port_in_use(self, capsys: pytest.CaptureFixture[str]) -> None:
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            port = busy.getsockname()[1]
            # An unroutable broker: reaching Kafka would hang, not exit 2.
            argv = ["--bootstrap-servers", "192.0.2.1:9", "--metrics-port", str(port)]
            assert main(argv) == 2
        out, err = capsys.readouterr()
        assert err.splitlines() == [
            f"config error: cannot serve metrics on 127.0.0.1:{port}: the port is in "
            "use (another worker or load generator?): choose a free port, or 0 for "
            "any free one (--metrics-host/--metrics-port)"
        ]
        assert out == ""

    def test_a_value_librdkafka_refuses_exits_2_naming_it(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        # An unroutable broker: reaching Kafka would hang, not exit 2.
        argv = ["--bootstrap-servers", "192.0.2.1:9", "--metrics-port", "0"]
        assert main([*argv, "-X", "session.timeout.ms=x"]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert "property \"session.timeout.ms\": 'x'" in err


class TestSupervisor:
    """`--processes N` starts N children, each with its own index and port."""

    def test_each_child_gets_its_index(self, monkeypatch: pytest.MonkeyPatch) -> None:
        commands: list[list[str]] = []

        class Child:
            def __init__(self, cmd: list[str], **_kw: Any) -> None:
                commands.append(cmd)

            def poll(self) -> int:
                return 0

        monkeypatch.setattr(subprocess, "Popen", Child)
        monkeypatch.setattr(signal, "signal", lambda *_args: None)
        assert main(["--processes", "3", "--metrics-port", "9300"]) == 0

        def last(cmd: list[str], flag: str) -> str:  # argparse: the last one wins
            return cmd[len(cmd) - cmd[::-1].index(flag)]

        given = [
            (last(c, "--worker-index"), last(c, "--metrics-port")) for c in commands
        ]
        assert given == [("0", "9300"), ("1", "9301"), ("2", "9302")]
