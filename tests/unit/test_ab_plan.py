"""The A/B plan from the command line: validation, profiles, worker arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from abrunner.cli import _FLAGS, build_parser, main, plan_from_settings
from abrunner.config import TOOL, AbSettings
from abrunner.plan import Plan, Profile
from schemas.errors import ConfigError
from service.settings.cli_flags import load_from_args


def plan(*argv: str, environ: dict[str, str] | None = None) -> Plan:
    args = build_parser().parse_args(list(argv))
    return plan_from_settings(
        load_from_args(AbSettings, TOOL, args, _FLAGS, environ=environ or {})
    )


class TestFlags:
    """Bad flags exit 2 before any broker is started."""

    @pytest.mark.parametrize(
        ("argv", "needle"),
        [
            (["--codecs", "auto"], "not a wire codec"),
            (["--codecs", "protobuf", "--baseline", "json+pydantic"], "--baseline"),
            (["--profile", "huge"], "huge"),
            (["--rate", "0"], "--rate must be positive"),
            (["--large-bytes", "10k"], "ab.large_bytes.0 = '10k' (flag --large-bytes)"),
            (["--repeat", "0"], "ab.repeat = 0 (flag --repeat)"),
        ],
    )
    def test_exit_2(
        self,
        argv: list[str],
        needle: str,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        assert main([*argv, "--out", str(tmp_path)]) == 2
        assert needle in capsys.readouterr().err


class TestProfile:
    """Profiles are small, medium, large or large:BYTES."""

    def test_parse(self) -> None:
        assert Profile.parse("large:5000").label == "large:5000"
        assert Profile.parse("medium") == Profile("medium")
        with pytest.raises(ConfigError, match="small:5"):
            Profile.parse("small:5")
        with pytest.raises(ConfigError, match="large:x"):
            Profile.parse("large:x")


class TestPlan:
    """Flags become one typed plan."""

    def test_defaults(self) -> None:
        p = plan()
        assert p.baseline == "json-stdlib+pydantic" and len(p.codecs) == 6
        assert p.profiles == (Profile("medium"),)
        assert (p.rate, p.duration, p.warmup, p.repeat) == (40_000, 30, 5, 1)
        assert p.verify and not p.max_mode and p.out_dir == Path("ab-results")

    def test_baseline_is_the_first_codec_unless_the_legacy_path_is_listed(
        self,
    ) -> None:
        assert plan("--codecs", "msgspec-json,protobuf").baseline == "msgspec-json"
        listed = plan("--codecs", "protobuf,json-stdlib+pydantic")
        assert listed.baseline == "json-stdlib+pydantic"

    def test_environment_and_toml(self, tmp_path: Path) -> None:
        toml = tmp_path / "ab.toml"
        toml.write_text('[ab]\ncodecs = ["protobuf", "msgspec-json"]\nrate = 500.0\n')
        p = plan("--config", str(toml), environ={"AB_DURATION": "7"})
        assert (p.codecs, p.rate, p.duration) == (("protobuf", "msgspec-json"), 500, 7)
        assert plan(environ={"AB_CODECS": "protobuf,msgspec-msgpack"}).codecs == (
            "protobuf",
            "msgspec-msgpack",
        )

    def test_sizes_replace_large(self) -> None:
        p = plan("--profiles", "small,large", "--large-bytes", "10000,100000")
        assert [x.label for x in p.profiles] == ["small", "large:10000", "large:100000"]

    def test_worker_args(self) -> None:
        p = plan("--worker-arg=--batch-size=1000", "--worker-arg=--work-us=5")
        assert p.worker_args == ("--batch-size", "1000", "--work-us", "5")

    def test_max_mode_needs_no_rate(self) -> None:
        assert plan("--max", "--rate", "0", "--no-verify").max_mode
        with pytest.raises(ConfigError, match="--warmup"):
            plan("--max", "--warmup", "0")
