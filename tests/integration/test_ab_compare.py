"""`codec-ab --compare` on real runs: a deliberately slowed worker fails the gate."""

from __future__ import annotations

from pathlib import Path

import pytest

from abrunner.cli import main
from abrunner.report.decisions import CORES
from abrunner.report.tables import read

MAX_REGRESSION = "0.5"
"""`--work-us=100` adds 100 us of busy CPU to a message that costs tens of us at
this rate, so the slowed figure is 2x-5x the plain one; 50 % keeps that far above
the gate and the plain repeat (±10-15 % on a shared 2-core machine) far below."""


def run_ab(bootstrap: str, out: Path, *extra: str) -> int:
    """One short real A/B of msgspec-json: 3 repeats of 3 s at 2,000 msg/s."""
    return main(
        [
            *("--bootstrap-servers", bootstrap, "--codecs", "msgspec-json"),
            *("--rate", "2000", "--duration", "3", "--warmup", "1", "--repeat", "3"),
            *("--partitions", "2", "--no-bench", "--max-regression", MAX_REGRESSION),
            *("--out", str(out), *extra),
        ]
    )


@pytest.fixture(scope="class")
def plain(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference run's directory: msgspec-json as it is."""
    out = tmp_path_factory.mktemp("plain")
    assert run_ab(kafka_bootstrap, out) == 0, read(out / "report.json").results
    return out


class TestCompareGate:
    """Compared with a plain run, a slowed worker exits 1 and a plain repeat exits 0."""

    @pytest.mark.slow
    def test_plain_report(self, plain: Path) -> None:
        report = read(plain / "report.json")
        assert report.target_rate == 2000 and len(report.results) == 3
        row = report.summary["medium"]["msgspec-json"]
        cpu, cores = row.median("cpu_us_per_msg"), row.median(CORES)
        assert cpu is not None and cores == pytest.approx(cpu * 2000 / 1e6)

    @pytest.mark.slow
    def test_slowed_codec_fails(
        self,
        kafka_bootstrap: str,
        plain: Path,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        capsys.readouterr()
        slowed = tmp_path / "slowed"
        code = run_ab(
            kafka_bootstrap,
            slowed,
            *("--worker-arg=--work-us=100", "--compare", str(plain)),
        )
        out = capsys.readouterr().out
        assert code == 1, out
        gated = next(
            x for x in out.splitlines() if "| msgspec-json | CPU us/msg |" in x
        )
        assert gated.endswith("| REGRESSION |") and "fewer than 3" not in gated
        assert "--worker-arg none -> --work-us 100" in out
        assert "result: REGRESSION: msgspec-json on medium: CPU us/msg +" in out
        # The two reports on their own, no run: the same verdict.
        assert main(["--compare", str(plain), str(slowed)]) == 1

    @pytest.mark.slow
    def test_plain_repeat_passes(
        self,
        kafka_bootstrap: str,
        plain: Path,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        capsys.readouterr()
        code = run_ab(kafka_bootstrap, tmp_path / "again", "--compare", str(plain))
        out = capsys.readouterr().out
        assert code == 0, out
        assert "result: no regression beyond 50 %; exit 0" in out
        assert "- (fewer than 3 repeats)" not in out and "note: fewer" not in out
