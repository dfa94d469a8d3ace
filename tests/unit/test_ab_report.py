"""The A/B report from synthetic results: ordering, ratios, status, spread, files."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import msgspec
import pytest

from abrunner.plan import Plan, Profile
from abrunner.report import tables as abreport
from abrunner.results import FIGURES, IN_PROCESS_FIGURES, CaseResult, InProcess, Report

SAMPLE = Path(__file__).resolve().parents[2] / "docs" / "sample-report"
OLD_REPORT = Path(__file__).resolve().parents[1] / "fixtures" / "old-report"
"""A report.json written before the GC and in-process (codec-bench) columns."""


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


def report(
    results: list[CaseResult] = RESULTS,
    *,
    repeat: int = 2,
    in_process: list[InProcess] | None = None,
    interrupted: bool = False,
) -> Report:
    plan = Plan(
        codecs=("json-stdlib+pydantic", "msgspec-msgpack", "protobuf"),
        profiles=(Profile("medium"), Profile("large", 100_000)),
        rate=40_000,
        duration=30,
        warmup=5,
        repeat=repeat,
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
        summary=abreport.aggregate(results, in_process or []),
        interrupted=interrupted,
        in_process=in_process or [],
    )


def md_table(text: str) -> dict[str, dict[str, str]]:
    """The first table of the full figures in `text` (or of `text` when it has no
    such section): codec -> header -> cell."""
    text = text.split("## Full figures", 1)[-1]
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    headers = [h.strip() for h in rows[0].strip("|").split("|")]
    cells = [[c.strip() for c in r.strip("|").split("|")] for r in rows[2:]]
    return {c[0]: dict(zip(headers, c, strict=True)) for c in cells}


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


BENCH = [
    InProcess(
        codec="msgspec-msgpack", profile="medium", decode_us=1.0, decode_read_us=2.0
    ),
    InProcess(codec="protobuf", profile="medium", decode_us=4.0, decode_read_us=6.0),
    InProcess(codec="protobuf", profile="small", decode_us=9.0, decode_read_us=9.0),
]
RUNS = [
    result("msgspec-msgpack", 8.0, decode_p50_us=2.0, gc_ms_per_s=1.5),
    result("protobuf", 9.0, decode_p50_us=4.4, gc_per_1k_msgs=0.25),
]


class TestNewFigures:
    """GC, the Kafka path's decode median and the in-process figures reach the table."""

    def test_columns_and_ratio(self) -> None:
        rows = abreport.aggregate(RUNS, BENCH)["medium"]
        headers, body = abreport.table(rows, "protobuf", False, False)
        cells = {
            line[0].split()[0]: dict(zip(headers, line, strict=True)) for line in body
        }
        msgpack, proto = cells["msgspec-msgpack"], cells["protobuf"]
        assert headers.index("decode us") + 1 == headers.index("decode us in-process")
        assert (msgpack["decode us"], msgpack["decode us in-process"]) == (
            "2.00",
            "1.00",
        )
        assert msgpack["Kafka/in-process"] == f"{2.0 / 1.0:.2f}x"
        assert proto["Kafka/in-process"] == f"{4.4 / 4.0:.2f}x"
        assert proto["decode+read us in-process"] == "6.00"
        assert (msgpack["GC ms/s"], proto["GC ms/s"]) == ("1.5", "-")
        assert proto["GC per 1k msgs"] == "0.25"
        assert set(IN_PROCESS_FIGURES) <= rows["protobuf"].figures.keys()

    def test_read_all_and_read_k_columns(self) -> None:
        """Lazy formats: +all (like with like) and +3 fields beside decode."""
        lazy = InProcess(
            codec="protobuf",
            profile="medium",
            decode_us=1.0,
            decode_read_us=3.0,
            read_all_us=7.5,
            read_k_us=2.25,
        )
        rows = abreport.aggregate(RUNS[1:], [lazy])["medium"]
        headers, [line] = abreport.table(rows, "protobuf", False, False)
        cells = dict(zip(headers, line, strict=True))
        assert (cells["+all us in-process"], cells["+3 fields us in-process"]) == (
            "7.50",
            "2.25",
        )
        md = abreport.markdown(report(RUNS[1:], in_process=[lazy]))
        assert "compares like with like" in md

    def test_older_in_process_figures_leave_the_columns_out(self) -> None:
        rows = abreport.aggregate(RUNS, BENCH)["medium"]
        headers, _ = abreport.table(rows, "protobuf", False, False)
        assert "+all us in-process" not in headers

    def test_unmeasured_columns_are_left_out(self) -> None:
        rows = abreport.aggregate(RESULTS)["medium"]
        headers, _ = abreport.table(rows, "json-stdlib+pydantic", False, False)
        assert "CPU us/msg" in headers
        assert not {"GC ms/s", "decode us", "Kafka/in-process"} & set(headers)

    def test_decode_note_only_past_25_percent(self) -> None:
        md = abreport.markdown(report(RUNS, in_process=BENCH))
        note = md.split("## Decode: Kafka path vs in-process", 1)[1]
        assert "`msgspec-msgpack` on `medium` (2.00x)" in note
        assert "`protobuf`" not in note.split("\n\n")[1]  # 1.10x: within 25 %
        assert "Both are CPU time" in note and "cache" in note
        close = [result("protobuf", 9.0, decode_p50_us=4.4)]
        assert "## Decode" not in abreport.markdown(report(close, in_process=BENCH))

    def test_json_round_trip(self, tmp_path: Path) -> None:
        written = report(RUNS, in_process=BENCH, interrupted=True)
        abreport.write(written, tmp_path)
        back = abreport.read(tmp_path / "report.json")
        assert back == written and back.interrupted and back.in_process == BENCH


class TestWarnings:
    """report.md opens with the interruption and warns about a single run per case."""

    def test_single_run(self) -> None:
        assert "`--repeat 3` or more" in abreport.markdown(report(repeat=1))
        assert "`--repeat 3`" not in abreport.markdown(report(repeat=2))

    def test_interrupted(self) -> None:
        lines = abreport.markdown(report(interrupted=True)).splitlines()
        # 2 profiles x 2 repeats x 3 codecs = 12 cases planned, 4 finished.
        assert lines[2].startswith("**Interrupted**") and "4 of 12 cases" in lines[2]
        assert "Interrupted" not in abreport.markdown(report())

    def test_nothing_finished(self, tmp_path: Path) -> None:
        paths = abreport.write(report([], interrupted=True), tmp_path)
        assert [p.name for p in paths] == ["report.md", "report.json"]
        assert "0 of 12 cases" in (tmp_path / "report.md").read_text()


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
    """`python -m abrunner.report.tables DIR` redraws report.md from report.json."""

    def test_sample_report(self, tmp_path: Path) -> None:
        shutil.copy(SAMPLE / "report.json", tmp_path)
        assert abreport.main([str(tmp_path)]) == 0
        redrawn = md_table((tmp_path / "report.md").read_text())
        committed = md_table((SAMPLE / "report.md").read_text())
        assert set(redrawn) == set(committed)
        for codec, cells in redrawn.items():
            shared = cells.keys() & committed[codec].keys()
            assert {"status", "CPU us/msg", "p99 ms"} <= shared
            assert {h: cells[h] for h in shared} == {
                h: committed[codec][h] for h in shared
            }

    def test_old_report_has_no_new_columns(self, tmp_path: Path) -> None:
        old = abreport.read(OLD_REPORT / "report.json")
        assert not old.interrupted and old.in_process == []
        shutil.copy(OLD_REPORT / "report.json", tmp_path)
        assert abreport.main([str(tmp_path)]) == 0
        headers = next(iter(md_table((tmp_path / "report.md").read_text()).values()))
        assert not {"GC ms/s", "decode us", "decode us in-process"} & set(headers)

    def test_help(self, capsys: pytest.CaptureFixture[str]) -> None:
        with pytest.raises(SystemExit) as exit_:
            abreport.main(["--help"])
        assert exit_.value.code == 0
        assert "usage: python -m abrunner.report.tables" in capsys.readouterr().out

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
