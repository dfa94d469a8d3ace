"""Loadgen settings and CLI: precedence, errors naming the field, exit status 2."""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from loadgen.cli import build_parser, main
from loadgen.config import LoadgenSettings, load_settings
from schemas.errors import ConfigError
from service.kafka.connection import MASK
from service.telemetry.log_setup import cannot_reach

UNREACHABLE = "127.0.0.1:1"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("LOADGEN_", "KAFKA_")):
            monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """`main()` configures logging for the process: give the next test it back.

    librdkafka's lines are rate-limited process-wide: each test starts afresh.
    """
    logging.getLogger("librdkafka").handlers.clear()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    yield
    structlog.reset_defaults()
    root.handlers, root.level = saved


class TestPrecedence:
    """defaults < TOML < LOADGEN_* environment < flags."""

    def test_each_layer_overrides_the_one_below(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        toml = tmp_path / "lg.toml"
        toml.write_text(
            '[loadgen]\nrate = 7.0\ncodec = "protobuf"\ntopic = "from-toml"\n'
        )
        assert load_settings().rate == 1000
        assert load_settings(config_file=toml).rate == 7
        monkeypatch.setenv("LOADGEN_RATE", "9")
        monkeypatch.setenv("LOADGEN_PROFILE", "large")
        s = load_settings(config_file=toml)
        assert (s.rate, s.codec, s.profile, s.topic) == (
            9,
            "protobuf",
            "large",
            "from-toml",
        )
        assert load_settings({"rate": 11}, config_file=toml).rate == 11

    def test_env_only_run_like_compose(self, monkeypatch: pytest.MonkeyPatch) -> None:
        env = {
            "KAFKA_BOOTSTRAP_SERVERS": "kafka:19092",
            "LOADGEN_TOPIC": "ab-a",
            "LOADGEN_CODEC": "json+pydantic",
            "LOADGEN_PROFILE": "medium",
            "LOADGEN_RATE": "40000",
            "LOADGEN_DURATION": "3600",
            "LOADGEN_METRICS_HOST": "0.0.0.0",  # noqa: S104  # what compose sets
            "LOADGEN_METRICS_PORT": "9200",
            "LOADGEN_PROCESSES": "2",
            "LOADGEN_SEED": "5",
            "LOADGEN_RUN_ID": "abc",
            "LOADGEN_LARGE_BYTES": "20000",
            "LOADGEN_PATTERN": "ramp",
            "LOADGEN_COUNT": "10",
            "KAFKA_EXTRA": '{"batch.num.messages": 500}',
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        s = load_settings()
        assert s.kafka.bootstrap_servers == "kafka:19092"
        assert (s.rate, s.duration, s.metrics_port, s.processes) == (
            40000,
            3600,
            9200,
            2,
        )
        assert (s.run_id, s.large_bytes, s.pattern, s.count) == (
            "abc",
            20000,
            "ramp",
            10,
        )
        assert s.producer_config()["batch.num.messages"] == 500

    def test_run_id_is_random_by_default(self) -> None:
        assert load_settings().run_id != load_settings().run_id

    def test_topic_creation_settings(self, monkeypatch: pytest.MonkeyPatch) -> None:
        assert (load_settings().create_topics, load_settings().partitions) == (False, 4)
        monkeypatch.setenv("LOADGEN_CREATE_TOPICS", "true")
        monkeypatch.setenv("LOADGEN_PARTITIONS", "3")
        s = load_settings()
        assert (s.create_topics, s.partitions) == (True, 3)

    def test_producer_is_idempotent_by_default(self) -> None:
        conf = load_settings().producer_config()
        assert conf["enable.idempotence"] is True
        assert conf["acks"] == "all"


class TestErrors:
    """Every error names the field, its flag and variable, the value and the rule."""

    @pytest.mark.parametrize(
        ("overrides", "expected"),
        [
            (
                {"codec": "auto"},
                "loadgen.codec = 'auto' (flag codec): 'auto' is not",
            ),
            (
                {"codec": "xml"},
                "loadgen.codec = 'xml' (flag codec): not a wire codec; choose json+pydantic",
            ),
            ({"rate": -1}, "loadgen.rate = -1"),
            ({"profile": "huge"}, "loadgen.profile = 'huge'"),
            ({"pattern": "sine"}, "loadgen.pattern = 'sine'"),
            ({"processes": 0}, "loadgen.processes = 0"),
            ({"acks": "1"}, "idempotence = true needs acks = 'all'"),
            ({"pattern": "ramp"}, "pattern 'ramp' needs ramp_s or duration"),
            ({"rate": 0, "pattern": "step"}, "pattern 'step' needs a rate > 0"),
            ({"speed": 2.0}, "speed and transcode apply to a replay only"),
            ({"grup": 1}, "unknown setting loadgen.grup"),
        ],
    )
    def test_messages(self, overrides: dict[str, object], expected: str) -> None:
        with pytest.raises(ConfigError) as info:
            load_settings(overrides)
        assert expected in str(info.value)
        assert "or 'auto'" not in str(info.value)  # never offered, then refused

    @pytest.mark.parametrize(
        "key",
        ["plugin.library.paths", "sasl.kerberos.kinit.cmd", "ssl.engine.location"],
    )
    def test_dangerous_librdkafka_keys_are_refused(self, key: str) -> None:
        with pytest.raises(ConfigError, match="is refused"):
            load_settings({"kafka": {"extra": {key: "x"}}})

    def test_typed_keys_are_not_overridden_through_extra(self) -> None:
        with pytest.raises(ConfigError, match=r"set loadgen\.linger_ms"):
            load_settings({"kafka": {"extra": {"linger.ms": "3"}}})

    def test_replay_speed_excludes_rate(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match="either speed"):
            load_settings({"replay": tmp_path / "r", "speed": 2, "rate": 5})

    def test_stray_environment_variable(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("LOADGEN_RAET", "5")
        with pytest.raises(ConfigError, match="LOADGEN_RAET names no setting"):
            load_settings()

    def test_unknown_toml_key(self, tmp_path: Path) -> None:
        toml = tmp_path / "lg.toml"
        toml.write_text("[loadgen]\nraet = 5\n")
        with pytest.raises(ConfigError, match=r"unknown setting loadgen\.raet \("):
            load_settings(config_file=toml)

    def test_password_is_never_shown(self) -> None:
        with pytest.raises(ConfigError) as info:
            load_settings({"kafka": {"sasl_password": 12}})
        assert "12" not in str(info.value)


class TestCli:
    """`codec-loadgen` exits 2 on bad input before touching Kafka."""

    @pytest.mark.parametrize(
        "argv",
        [
            ["--codec", "auto"],
            ["--rate", "-5"],
            ["-X", "plugin.library.paths=/tmp/x.so"],
            ["-X", "novalue"],
            ["--config", "/nonexistent.toml"],
            ["record", "--max", "0"],
        ],
    )
    def test_bad_config_exits_2_quickly(
        self, argv: list[str], capsys: pytest.CaptureFixture[str]
    ) -> None:
        start = time.monotonic()
        assert main(argv) == 2
        assert time.monotonic() - start < 5
        err = capsys.readouterr().err
        assert "config error" in err

    def test_help_states_every_default_and_variable(self) -> None:
        text = " ".join(build_parser().format_help().split())
        hidden = {"record_out", "record_max", "record_timeout_s", "record_start"}
        hidden |= {"kafka", "registry"}  # shared sections: KAFKA_*, REGISTRY_*
        for name, info in LoadgenSettings.model_fields.items():
            field = info.alias or name
            if field not in hidden:
                assert f"env LOADGEN_{field.upper()})" in text, field
        assert "(default: 1000.0; env LOADGEN_RATE)" in text
        assert "env KAFKA_BOOTSTRAP_SERVERS)" in text
        assert "env REGISTRY_URL)" in text
        assert "KAFKA_EXTRA" in text
        assert "(default: table; env LOADGEN_OUTPUT)" in text

    def test_print_config_masks_the_password(
        self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("KAFKA_SASL_PASSWORD", "hunter2")
        assert main(["--print-config", "--rate", "5", "--json"]) == 0
        out = capsys.readouterr().out
        data = json.loads(out)
        assert data["loadgen"]["rate"] == 5
        assert data["loadgen"]["output"] == "json"
        assert data["kafka"]["sasl_password"] == MASK
        assert "hunter2" not in out

    def test_missing_topic_exits_2(
        self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from loadgen import generator

        def no_topic(s: LoadgenSettings) -> int:
            raise ConfigError("config error: topic (--topic, LOADGEN_TOPIC) = 'x'")

        monkeypatch.setattr(generator, "topic_partitions", no_topic)
        assert main(["--topic", "x", "--progress", "never"]) == 2
        assert "LOADGEN_TOPIC" in capsys.readouterr().err

    def test_unreachable_kafka_exits_1(
        self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from loadgen import generator

        monkeypatch.setattr(generator, "METADATA_TIMEOUT_S", 1.0)
        assert main(["--bootstrap-servers", UNREACHABLE, "--count", "1"]) == 1
        assert "cannot reach Kafka" in capsys.readouterr().err

    @pytest.mark.parametrize("level", ["warning", "info", "error"])
    def test_unreachable_kafka_on_record_is_one_line_and_exit_1(
        self,
        level: str,
        tmp_path: Path,
        capfd: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        from loadgen import recording

        monkeypatch.setattr(recording, "METADATA_TIMEOUT_S", 1.0)
        argv = ["record", "--bootstrap-servers", UNREACHABLE, "--topic", "t"]
        argv += ["--out", str(tmp_path / "r.rec"), "--log-level", level]
        assert main(argv) == 1
        lines = capfd.readouterr().err.splitlines()
        # librdkafka says how long the refused connect took: 0 ms, or more on a
        # busy machine; the rest of the line is fixed.
        errors = [
            re.sub(r"after \d+ms", "after 0ms", ln) for ln in lines if "error:" in ln
        ]
        refused = (
            f"{UNREACHABLE}/bootstrap: Connect to ipv4#{UNREACHABLE} failed: "
            "Connection refused (after 0ms in state CONNECT)"
        )
        assert errors == [f"codec-loadgen: error: {cannot_reach(UNREACHABLE, refused)}"]
        # librdkafka's own lines: none raw; at info, its retries as one line.
        assert len(lines) == (2 if level == "info" else 1)
        assert not (tmp_path / "r.rec").exists()

    def test_metrics_port_in_use_exits_2_before_kafka(
        self, capfd: pytest.CaptureFixture[str]
    ) -> None:
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            port = busy.getsockname()[1]
            argv = ["--bootstrap-servers", UNREACHABLE, "--metrics-port", str(port)]
            assert main([*argv, "--progress", "never"]) == 2
        assert capfd.readouterr().err.splitlines() == [
            f"config error: cannot serve metrics on 127.0.0.1:{port}: the port is in "
            "use (another worker or load generator?): choose a free port, or 0 for "
            "any free one (--metrics-host/--metrics-port)"
        ]
