"""`codec-ab --compare` on synthetic reports: the gate's exit status and its output."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import msgspec
import pytest

from abrunner import cli
from abrunner.lab import runner
from abrunner.plan import Case, Plan, Profile
from abrunner.report import compare
from abrunner.report.tables import read
from abrunner.results import CaseResult, Report
from abrunner.windowed import Paired
from tests.unit.test_ab_report import report, result

CODECS = ("json-stdlib+pydantic", "msgspec-json")
STEADY = [10.0, 10.4, 9.8]
"""CPU us/msg of three repeats: a 2 % spread, as on a quiet machine."""


def run(cpus: dict[str, list[float]], **extra: Any) -> Report:
    """A report whose codecs ran `len(cpus[codec])` repeats at those CPU us/msg."""
    results = [
        result(codec, cpu, repeat=i, **extra)
        for codec, values in cpus.items()
        for i, cpu in enumerate(values)
    ]
    return report(results, repeat=max(map(len, cpus.values())))


def gate(old: Report, new: Report, **kwargs: Any) -> tuple[int, str]:
    out = io.StringIO()
    options: dict[str, Any] = {"max_regression": 0.10, "gated": ("cpu_us_per_msg",)}
    status = compare.gate(old, new, ("OLD", "NEW"), out=out, **{**options, **kwargs})
    return status, out.getvalue()


def scaled(values: list[float], factor: float) -> list[float]:
    return [v * factor for v in values]


OLD = run({CODECS[0]: scaled(STEADY, 3), CODECS[1]: STEADY})


@pytest.fixture(autouse=True)
def _sequential(monkeypatch: pytest.MonkeyPatch) -> None:
    """These runs fake `runner.run_case`: the sequential cases (paired runs are
    `abrunner.lab.paired`, tested in tests/integration/test_ab.py)."""
    monkeypatch.setenv("AB_MODE", "sequential")


class TestGate:
    """A codec slowed beyond the threshold fails the gate; the same figures pass."""

    def test_slowed_codec_fails(self) -> None:
        new = run({CODECS[0]: scaled(STEADY, 3), CODECS[1]: scaled(STEADY, 1.5)})
        status, out = gate(OLD, new)
        assert status == compare.REGRESSED
        line = next(x for x in out.splitlines() if "| msgspec-json | CPU us/msg" in x)
        assert "| 10.0 | 15.0 | +50.0 % |" in line and line.endswith("| REGRESSION |")
        assert out.splitlines()[-1] == (
            "result: REGRESSION: msgspec-json on medium: CPU us/msg +50.0 %; exit 1"
        )

    def test_same_figures_pass(self) -> None:
        new = run({CODECS[0]: scaled(STEADY, 3), CODECS[1]: [9.9, 10.3, 10.0]})
        status, out = gate(OLD, new)
        assert status == compare.PASSED
        assert out.splitlines()[-1] == "result: no regression beyond 10 %; exit 0"
        assert "- (fewer than 3 repeats)" not in out and "note:" not in out

    def test_small_rise_passes(self) -> None:
        new = run({CODECS[0]: scaled(STEADY, 3), CODECS[1]: scaled(STEADY, 1.05)})
        status, out = gate(OLD, new)
        assert status == compare.PASSED and "+5.0 %" in out

    def test_noisy_rise_within_interval_passes(self) -> None:
        # +20 % on the medians, but repeats spread 2x: the interval spans no change
        new = run({CODECS[0]: scaled(STEADY, 3), CODECS[1]: [6.0, 12.0, 24.0]})
        status, out = gate(OLD, new)
        assert status == compare.PASSED
        line = next(x for x in out.splitlines() if "| msgspec-json | CPU us/msg" in x)
        assert "+20.0 %" in line and line.endswith("| ok |")

    def test_threshold_is_a_setting(self) -> None:
        new = run({CODECS[0]: scaled(STEADY, 3), CODECS[1]: scaled(STEADY, 1.5)})
        assert gate(OLD, new, max_regression=0.6)[0] == compare.PASSED

    def test_ungated_figure_is_shown_not_gated(self) -> None:
        new = run({CODECS[1]: STEADY}, e2e_p99_ms=30.0)  # was 11 ms
        status, out = gate(OLD, new)
        assert status == compare.PASSED
        assert "| msgspec-json | p99 ms | 11.0 | 30.0 | +172.7 %" in out
        assert "| not gated |" in out
        assert gate(OLD, new, gated=("e2e_p99_ms",))[0] == compare.REGRESSED

    def test_failed_codec_fails(self) -> None:
        new = run({CODECS[1]: STEADY[:2]})
        failed = CaseResult(codec=CODECS[1], profile="medium", repeat=2, error="boom")
        new = report([*new.results, failed], repeat=3)
        status, out = gate(OLD, new)
        assert status == compare.REGRESSED
        assert "msgspec-json on medium failed: boom" in out.splitlines()[-1]
        assert "in one report only, not compared: json-stdlib+pydantic on medium" in out


class TestFewRepeats:
    """With fewer than 3 repeats on a side the threshold alone decides, and it says so."""

    def test_threshold_alone(self) -> None:
        old = run({CODECS[1]: [10.0]})
        status, out = gate(old, run({CODECS[1]: [11.5]}))
        assert status == compare.REGRESSED
        assert "- (fewer than 3 repeats)" in out
        assert "the gate uses the 10 % threshold alone" in out
        assert gate(old, run({CODECS[1]: [10.5]}))[0] == compare.PASSED

    def test_one_side_short(self) -> None:
        status, out = gate(OLD, run({CODECS[1]: [12.0, 12.4]}))
        assert status == compare.REGRESSED and "threshold alone" in out


class TestNotes:
    """Different run settings are named, so a reader knows the runs differ."""

    def test_plan_differences(self) -> None:
        slowed = msgspec.structs.replace(
            OLD.plan, worker_args=("--work-us", "100"), rate=2_000.0
        )
        new = msgspec.structs.replace(OLD, plan=slowed)
        _, out = gate(OLD, new)
        assert (
            "note: the runs differ in --rate 40,000 -> 2,000; "
            "--worker-arg none -> --work-us 100." in out
        )

    def test_mode_as_run(self) -> None:
        paired = msgspec.structs.replace(
            OLD, paired=Paired(window_s=1.0, bounds=[0.01])
        )
        _, out = gate(OLD, paired)
        assert "--mode sequential -> paired" in out

    def test_schema_and_payload_source(self) -> None:
        theirs = msgspec.structs.replace(
            OLD.plan,
            profiles=(Profile("shop.events:Order"),),
            replay="orders.rec",
        )
        _, out = gate(OLD, msgspec.structs.replace(OLD, plan=theirs))
        assert "--schema medium, large:100000 -> shop.events:Order" in out
        assert "payloads synthetic -> replayed from orders.rec" in out

    def test_nothing_in_common_exits_2(self) -> None:
        other = report([result("protobuf", 5.0, profile="small")], repeat=1)
        status, out = gate(OLD, other)
        assert status == compare.UNREADABLE
        assert out.splitlines()[-1] == (
            "result: nothing to compare: no codec on a profile both reports hold; exit 2"
        )
        assert "no regression" not in out


def written(tmp_path: Path, name: str, rep: Report) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    path = folder / "report.json"
    path.write_bytes(msgspec.json.encode(rep))
    return path


class TestCommandLine:
    """`codec-ab --compare OLD NEW` exits 0, 1, or 2 for a report it cannot read."""

    def test_two_reports(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        old = written(tmp_path, "old", OLD)
        slow = run({CODECS[0]: scaled(STEADY, 3), CODECS[1]: scaled(STEADY, 2)})
        new = written(tmp_path, "new", slow)
        assert cli.main(["--compare", str(old), str(new)]) == 1
        assert (
            cli.main(["--compare", str(old), str(new), "--max-regression", "1.5"]) == 0
        )
        assert cli.main(["--compare", str(old.parent), str(old.parent)]) == 0
        out = capsys.readouterr().out
        assert f"codec-ab compare: OLD {old.parent} (--repeat 3)" in out

    @pytest.mark.parametrize(
        ("content", "reason"),
        [
            (None, "No such file or directory"),
            (b"not json", "not a codec-ab report: JSON is malformed"),
            (b'{"plan": 1}', "not a codec-ab report: Expected `object`"),
        ],
    )
    def test_unreadable(
        self,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        content: bytes | None,
        reason: str,
    ) -> None:
        good = written(tmp_path, "good", OLD)
        bad = tmp_path / "bad.json"
        if content is not None:
            bad.write_bytes(content)
        assert cli.main(["--compare", str(bad), str(good)]) == 2
        assert cli.main(["--compare", str(good), str(bad)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 2 and reason in err
        assert err.startswith(f"codec-ab: --compare: {bad}: ")

    def test_three_reports(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        good = str(written(tmp_path, "good", OLD))
        assert cli.main(["--compare", good, good, good]) == 2
        assert capsys.readouterr().err == (
            "codec-ab: --compare: expected OLD [NEW], got 3 reports\n"
        )


class TestAfterRun:
    """`--compare OLD` with a run: OLD is read first, the new report is gated after."""

    @pytest.fixture
    def fake_run(self, monkeypatch: pytest.MonkeyPatch) -> list[str]:
        ran: list[str] = []

        def run_case(bootstrap: str, case: Case, plan: Plan, note: Any) -> CaseResult:
            ran.append(case.codec)
            cpu = 20.0 if "--work-us" in plan.worker_args else 10.0
            return result(case.codec, cpu + case.repeat * 0.1, repeat=case.repeat)

        monkeypatch.setenv(
            "KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1"
        )  # faked: never used
        monkeypatch.setattr(runner, "run_case", run_case)
        monkeypatch.setattr(cli, "_check_cluster", lambda conf: None)  # faked too
        return ran

    def test_gate_after_run(
        self, fake_run: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        argv = ["--codecs", "msgspec-json", "--repeat", "3", "--no-bench"]
        first, second = str(tmp_path / "a"), str(tmp_path / "b")
        assert cli.main([*argv, "--out", first, "--target-rate", "5000"]) == 0
        assert read(Path(first) / "report.json").target_rate == 5000
        slowed = [*argv, "--worker-arg=--work-us=100", "--compare", first]
        assert cli.main([*slowed, "--out", second]) == 1
        assert cli.main([*argv, "--compare", first, "--out", second]) == 0
        out = capsys.readouterr().out
        assert f"NEW {second}/report.json (--repeat 3)" in out
        assert "cores at 5,000 msg/s" in out and len(fake_run) == 9

    def test_unreadable_old_before_run(
        self, fake_run: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        argv = ["--codecs", "msgspec-json", "--no-bench", "--out", str(tmp_path)]
        assert cli.main([*argv, "--compare", str(tmp_path / "none")]) == 2
        assert fake_run == [] and "No such file" in capsys.readouterr().err
