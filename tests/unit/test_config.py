"""Worker settings: precedence, validation messages, secrets, refused librdkafka keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.cli import main
from service.config import load_settings
from service.connection import MASK
from service.errors import ConfigError


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
