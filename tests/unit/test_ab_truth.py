"""The report says what is true: verdicts read from the printed digits, ratio
definitions named, a caveat on a baseline that fell behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from abrunner.report import decisions, notes, stats, tables as abreport
from abrunner.report.charts import drawable, tick_label
from abrunner.results import CaseResult, Ratio
from tests.unit.test_ab_report import report, result


@pytest.mark.parametrize(
    ("low", "high", "printed", "verdict"),
    [
        (0.9561, 0.9984, "0.956x to 0.998x", "better"),
        (0.9561, 1.0012, "0.96x to 1.00x", "no detectable difference"),
        (0.9561, 0.99996, "0.9561x to 1.0000x", "no detectable difference"),
        (1.0004, 1.2, "1.0004x to 1.2000x", "worse"),
        (0.5, 0.7, "0.50x to 0.70x", "better"),
    ],
)
def test_a_verdict_is_readable_from_the_printed_interval(
    low: float, high: float, printed: str, verdict: str
) -> None:
    interval = stats.Interval((low + high) / 2, low, high)
    assert stats.verdict(interval, stats.digits(interval)) == verdict
    r = report(
        [result("json-stdlib+pydantic", 20.0), result("protobuf", 10.0)], repeat=3
    )
    r.ratios = [
        Ratio(
            profile="medium",
            codec="protobuf",
            figure="cpu_us_per_msg",
            pairs=3,
            ratio=interval.ratio,
            low=low,
            high=high,
            verdict=verdict,
        )
    ]
    assert f"| {printed} | {verdict} |" in (decisions.section(r) or "")


def test_both_ratio_definitions_are_named() -> None:
    r = report([result("json-stdlib+pydantic", 20.0), result("protobuf", 10.0)])
    md = abreport.markdown(r)
    assert "ratios in parentheses: the codec's median over the baseline's median" in md


def test_a_baseline_that_fell_behind_gets_a_caveat() -> None:
    behind = result("json-stdlib+pydantic", 25.0, kept_up=False, lag_end=9e4)
    r = report([behind, result("protobuf", 10.0)], repeat=1)
    caveat = notes.baseline_behind(r)
    assert caveat is not None
    assert "the baseline `json-stdlib+pydantic` did not keep up" in caveat
    assert caveat in abreport.markdown(r)
    kept = report([result("json-stdlib+pydantic", 25.0), result("protobuf", 10.0)])
    assert notes.baseline_behind(kept) is None


def test_an_all_failed_run_draws_no_chart(tmp_path: Path) -> None:
    failed = [
        CaseResult(codec=c, profile="medium", repeat=0, error="RunnerError: x")
        for c in ("json-stdlib+pydantic", "protobuf")
    ]
    paths = abreport.write(report(failed, repeat=1), tmp_path)
    assert not list(tmp_path.glob("*.png"))
    assert len(paths) == 2
    assert "## Charts" not in (tmp_path / "report.md").read_text()


def test_failed_and_fell_behind_codecs_are_marked_on_the_charts() -> None:
    behind = result("json-stdlib+pydantic", 25.0, kept_up=False, lag_end=9e4)
    failed = CaseResult(codec="protobuf", profile="medium", repeat=0, error="x")
    r = report([behind, failed, result("msgspec-msgpack", 8.0)], repeat=1)
    summary = r.summary
    assert tick_label(summary, "json-stdlib+pydantic") == (
        "json-stdlib+pydantic\n(FELL BEHIND)"
    )
    assert tick_label(summary, "protobuf") == "protobuf\n(FAILED)"
    assert tick_label(summary, "msgspec-msgpack") == "msgspec-msgpack"
    assert [name for name, _, _ in drawable(summary)] == [
        "cpu_per_message.png",
        "p99_latency.png",
        "rss.png",
        "wire_size.png",
    ]
