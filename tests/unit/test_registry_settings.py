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
        monkeypatch.setenv("WORKER_PROCESSING__REVOKE_GRACE_S", "1")  # fits 5 s too
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


class TestCredentialsInTheUrl:
    """`https://KEY:SECRET@host` is taken apart: used, and never shown."""

    SECRET = "S3NT1NEL-in-url"  # noqa: S105 (a test value, searched for)

    def _print(
        self, capsys: pytest.CaptureFixture[str], url: str, *more: str
    ) -> tuple[int, str]:
        args = ["--print-config", "--codec", "avro", "--framing", "confluent"]
        code = worker_main([*args, "--registry-url", url, *more])
        out = capsys.readouterr()
        return code, out.out + out.err

    def test_they_become_the_login_and_leave_the_url(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        url = f"https://team%40key:{self.SECRET}@sr.example:8443/ccompat"
        code, out = self._print(capsys, url)
        assert code == 0 and self.SECRET not in out
        shown = json.loads(out)["registry"]
        assert shown["url"] == "https://sr.example:8443/ccompat"
        assert shown["username"] == "team@key"
        assert shown["password"] == "*" * 10
        s = load_settings({"registry": {"url": url}}, environ={})
        access = s.registry.access()
        assert (access.username, access.password) == ("team@key", self.SECRET)
        assert self.SECRET not in repr(access) + str(s.masked())

    def test_given_twice_they_are_refused(
        self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("REGISTRY_PASSWORD", "other")
        code, out = self._print(capsys, f"https://k:{self.SECRET}@sr.example/x")
        assert code == 2 and self.SECRET not in out
        (line,) = out.strip().splitlines()
        assert "give them one way" in line

    @pytest.mark.parametrize(
        ("url", "why"),
        [
            ("ftp://sr.example/x", "not an http:// or https:// URL"),
            ("sr.example:8081", "not an http:// or https:// URL"),
            (f"https://k:{SECRET}@sr.example:port/x", "its port"),
        ],
    )
    def test_a_malformed_url_is_a_config_error(
        self, capsys: pytest.CaptureFixture[str], url: str, why: str
    ) -> None:
        code, out = self._print(capsys, url)
        assert code == 2 and self.SECRET not in out
        (line,) = out.strip().splitlines()
        assert "registry.url" in line and why in line

    def test_a_ca_file_for_an_http_url(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        code, out = self._print(
            capsys, "http://sr.example/x", "--registry-ca-file", str(tmp_path)
        )
        assert code == 2 and "registry.ca_file is set but registry.url" in out

    def test_the_environment_hands_the_section_on(self) -> None:
        url = f"https://k:{self.SECRET}@sr.example/x"
        s = load_settings({"registry": {"url": url, "timeout_s": 1.5}}, environ={})
        env = s.registry.environment()
        assert env["REGISTRY_PASSWORD"] == self.SECRET
        assert self.SECRET not in env["REGISTRY_URL"]
        assert load_settings(environ=env).registry == s.registry
