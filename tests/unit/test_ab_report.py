"""The A/B report from synthetic results: ordering, ratios, status, spread, files."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import msgspec
import pytest

from abrunner import report as abreport
from abrunner.plan import Plan, Profile
from abrunner.results import FIGURES, CaseResult, Report

SAMPLE = Path(__file__).resolve().parents[2] / "docs" / "sample-report"


def result(
    codec: str,
    cpu: float,
    *,
    repeat: int = 0,
    kept_up: bool = True,
    profile: str = "medium",
    **extra: Any,
) -> CaseResult:
    figures: dict[str, Any] = {
        **dict(throughput=40_000.0, cpu_pct=cpu * 4, cpu_us_per_msg=cpu),
        **dict(decode_us=cpu / 2, e2e_p50_ms=3.0, e2e_p99_ms=11.0, e2e_p999_ms=20.0),
        **dict(rss_peak_mb=90.0, rss_steady_mb=80.0, wire_bytes=900.0, lag_end=0.0),
        **dict(lost=0, seq_missing=0, dead_lettered=0, kept_up=kept_up),
    }
    return CaseResult(
        codec=codec, profile=profile, repeat=repeat, **{**figures, **extra}
    )


RESULTS = [
    result(
        "json-stdlib+pydantic", 25.0, kept_up=False, lag_end=250_000.0, cpu_pct=99.0
    ),
    result("msgspec-msgpack", 8.0, wire_bytes=800.0),
    result("msgspec-msgpack", 9.0, repeat=1, wire_bytes=800.0),
    result("protobuf", 10.0, wire_bytes=500.0),
]


def report(results: list[CaseResult] = RESULTS) -> Report:
    plan = Plan(
        codecs=("json-stdlib+pydantic", "msgspec-msgpack", "protobuf"),
        profiles=(Profile("medium"), Profile("large", 100_000)),
        rate=40_000,
        duration=30,
        warmup=5,
        repeat=2,
        max_mode=False,
        max_messages=200_000,
        partitions=4,
        baseline="json-stdlib+pydantic",
        out="ab-results",
    )
    return Report(
        plan=plan,
        environment=abreport.environment("4.1.2"),
        results=results,
        summary=abreport.aggregate(results),
    )


class TestTable:
    """Rows are sorted by CPU per message with ratios to the baseline."""

    def test_order_ratio_status_spread(self) -> None:
        rows = abreport.aggregate(RESULTS)["medium"]
        headers, body = abreport.table(rows, "json-stdlib+pydantic", False, True)
        assert [cells[0] for cells in body] == [
            "msgspec-msgpack",
            "protobuf",
            "json-stdlib+pydantic (baseline)",
        ]
        cpu = headers.index("CPU us/msg")
        assert body[0][cpu] == "8.5 (0.34x) [8.0-9.0]"
        assert body[1][headers.index("wire B/msg")] == "500 (0.56x)"
        assert body[0][1] == "ok"
        assert body[2][1] == "FELL BEHIND (lag 250,000, CPU 99%)"

    def test_lost_and_failed_are_shown(self) -> None:
        failed = CaseResult(
            codec="orjson+pydantic", profile="medium", repeat=0, error="boom"
        )
        rows = abreport.aggregate([result("protobuf", 5.0, lost=3), failed])["medium"]
        _, body = abreport.table(rows, "protobuf", False, False)
        status = {cells[0].split()[0]: cells[1] for cells in body}
        assert status["protobuf"] == "LOST 3"
        assert status["orjson+pydantic"].startswith("FAILED: boom")

    def test_backlog_is_not_loss(self) -> None:
        backlog = result(
            "json-stdlib+pydantic", 30.0, kept_up=False, lost=None, not_drained=5000
        )
        rows = abreport.aggregate([backlog])["medium"]
        _, [cells] = abreport.table(rows, "json-stdlib+pydantic", False, False)
        assert cells[1] == "FELL BEHIND, not drained (5,000 queued)"
        assert cells[-2] == "0"  # lost

    def test_latency_above_the_top_bucket(self) -> None:
        slow = result("protobuf", 5.0, e2e_p99_ms=math.inf)
        rows = abreport.aggregate([slow])["medium"]
        headers, [cells] = abreport.table(rows, "protobuf", False, False)
        assert cells[headers.index("p99 ms")] == "> top bucket"


class TestAggregate:
    """A row keeps every measured figure's median and spread, and sums the status."""

    def test_figures_are_case_fields(self) -> None:
        fields = {f.name for f in msgspec.structs.fields(CaseResult)}
        assert set(FIGURES) <= fields
        assert not {"codec", "profile", "repeat", "error"} & set(FIGURES)

    def test_row(self) -> None:
        runs = [*RESULTS[1:3], result("msgspec-msgpack", 7.0, repeat=2, lost=2)]
        row = abreport.aggregate(runs)["medium"]["msgspec-msgpack"]
        assert (row.runs, row.lost, row.kept_up, row.errors) == (3, 2, True, [])
        spread = row.figures["cpu_us_per_msg"]
        assert (spread.median, spread.min, spread.max) == (8.0, 7.0, 9.0)
        assert "max_rate" not in row.figures  # never measured in rate mode

    def test_all_failed(self) -> None:
        failed = CaseResult(codec="protobuf", profile="small", repeat=0, error="x")
        row = abreport.aggregate([failed])["small"]["protobuf"]
        assert (row.kept_up, row.errors, row.figures) == (False, ["x"], {})


class TestFiles:
    """report.md, report.json (read back as a Report) and valid PNG charts."""

    def test_write(self, tmp_path: Path) -> None:
        large = [
            result(
                r.codec,
                (r.cpu_us_per_msg or 0) * 3,
                repeat=r.repeat,
                profile="large:100000",
                wire_bytes=(r.wire_bytes or 0) * 90,
            )
            for r in RESULTS
        ]
        written = report([*RESULTS, *large])
        paths = abreport.write(written, tmp_path)
        names = {p.name for p in paths}
        assert {
            *("report.md", "report.json", "cpu_per_message.png", "p99_latency.png"),
            *("rss.png", "wire_size.png", "throughput_vs_size.png"),
        } <= names
        for path in paths:
            if path.suffix == ".png":
                assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        md = (tmp_path / "report.md").read_text()
        assert "## Profile `large:100000`" in md and "librdkafka" in md
        assert abreport.read(tmp_path / "report.json") == written


class TestRedraw:
    """`python -m abrunner.report DIR` redraws report.md from report.json."""

    def test_sample_report(self, tmp_path: Path) -> None:
        shutil.copy(SAMPLE / "report.json", tmp_path)
        assert abreport.main([str(tmp_path)]) == 0
        assert (tmp_path / "report.md").read_text() == (
            SAMPLE / "report.md"
        ).read_text()

    def test_help(self, capsys: pytest.CaptureFixture[str]) -> None:
        with pytest.raises(SystemExit) as exit_:
            abreport.main(["--help"])
        assert exit_.value.code == 0
        assert "usage: python -m abrunner.report" in capsys.readouterr().out

    def test_missing_report(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert abreport.main([str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "report.json: No such file" in err

    def test_not_a_report(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        (tmp_path / "report.json").write_text('{"plan": 1}')
        assert abreport.main([str(tmp_path)]) == 2
        assert "$.plan" in capsys.readouterr().err
