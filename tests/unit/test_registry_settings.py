"""`[registry]`, REGISTRY_*, --registry-url and --framing: validated at the edge, the
password masked, every refusal one line naming the setting (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from abrunner.cli import main as ab_main
from loadgen.cli import main as loadgen_main
from service.cli import main as worker_main
from service.settings.registry import RegistryConnection
from service.settings.worker import load_settings

URL = "http://127.0.0.1:1/apis/ccompat/v7"


class TestSources:
    """The section comes from TOML, the environment or a flag, in that precedence."""

    def test_toml_then_env_then_flag(self, tmp_path: Path) -> None:
        toml = tmp_path / "c.toml"
        toml.write_text(f'[registry]\nurl = "{URL}"\nusername = "svc"\n')
        s = load_settings(config_file=toml, environ={})
        assert (s.registry.url, s.registry.username) == (URL, "svc")
        env = {"REGISTRY_URL": "http://env:1", "REGISTRY_PASSWORD": "pw"}
        s = load_settings(config_file=toml, environ=env)
        assert s.registry.url == "http://env:1"
        assert s.registry.access().password == "pw"  # noqa: S105 (a test value)
        s = load_settings({"registry": {"url": "http://flag:1"}}, environ=env)
        assert s.registry.url == "http://flag:1"

    def test_a_misspelt_key_names_the_closest(self, tmp_path: Path) -> None:
        toml = tmp_path / "c.toml"
        toml.write_text('[registry]\npasword = "x"\n')
        with pytest.raises(Exception, match=r"did you mean registry\.password"):
            load_settings(config_file=toml, environ={})

    @pytest.mark.parametrize(
        ("strategy", "subject"),
        [("topic", "t-value"), ("record", "ns.Rec"), ("topic_record", "t-ns.Rec")],
    )
    def test_subject_strategies(self, strategy: str, subject: str) -> None:
        registry = RegistryConnection(url=URL, subject_strategy=strategy)
        assert registry.subject("t", "ns.Rec") == subject


class TestWorkerFraming:
    """The worker refuses what it cannot frame before touching Kafka."""

    def _run(self, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
        code = worker_main(["--print-config", *args])
        out = capsys.readouterr()
        return code, out.out + out.err

    def test_the_password_is_masked(
        self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("REGISTRY_PASSWORD", "S3NT1NEL")
        code, out = self._run(
            capsys, "--codec", "avro", "--framing", "confluent", "--registry-url", URL
        )
        assert code == 0 and "S3NT1NEL" not in out
        assert json.loads(out)["registry"]["password"] == "*" * 10  # masked

    @pytest.mark.parametrize("codec", ["msgspec-msgpack", "flatbuffers", "capnp"])
    def test_a_codec_without_a_registry_type(
        self, capsys: pytest.CaptureFixture[str], codec: str
    ) -> None:
        code, out = self._run(
            capsys, "--codec", codec, "--framing", "confluent", "--registry-url", URL
        )
        assert code == 2
        (line,) = out.strip().splitlines()
        assert "codec.framing" in line and "has no schema registry type" in line

    def test_no_registry_url(
        self,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path,
    ) -> None:
        monkeypatch.chdir(tmp_path)  # no .local-kafka/registry.json here
        code, out = self._run(capsys, "--codec", "avro", "--framing", "confluent")
        assert code == 2 and "needs a registry" in out

    def test_a_lookup_budget_past_half_the_poll_interval(
        self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("WORKER_CONSUMER__MAX_POLL_INTERVAL_MS", "5000")
        monkeypatch.setenv("WORKER_PROCESSING__MESSAGE_BUDGET_MS", "1000")  # fits 5 s
        code, out = self._run(
            capsys, "--codec", "avro", "--framing", "confluent", "--registry-url", URL
        )
        assert code == 2 and "more than half of max_poll_interval_ms 5000" in out


@pytest.mark.parametrize("main", [loadgen_main, ab_main])
def test_loadgen_and_ab_refuse_msgpack_framing(
    main: object, capsys: pytest.CaptureFixture[str]
) -> None:
    codec = "--codec" if main is loadgen_main else "--codecs"
    args = ["--print-config", codec, "msgspec-msgpack", "--framing", "confluent"]
    assert main([*args, "--registry-url", URL]) == 2  # type: ignore[operator]
    assert "msgspec-msgpack has no schema registry type" in capsys.readouterr().err


def test_ab_framed_replay_needs_the_recordings_registry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A framed recording's ids are in the registry that wrote it: a registry
    started for the run would dead-letter every value, so codec-ab asks for it."""
    monkeypatch.chdir(tmp_path)  # no registry recorded here
    monkeypatch.delenv("REGISTRY_URL", raising=False)
    recording = tmp_path / "framed.rec"
    recording.write_bytes(b"")
    args = ["--print-config", "--codecs", "avro", "--framing", "confluent"]
    args += ["--replay", str(recording)]
    assert ab_main(args) == 2
    assert "give --registry-url" in capsys.readouterr().err
    assert ab_main([*args, "--registry-url", URL]) == 0
