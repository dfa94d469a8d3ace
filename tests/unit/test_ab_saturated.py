"""A baseline (or a candidate) that fell behind is still compared on what holds.

`make ab` at its default 40,000 msg/s saw json-stdlib+pydantic fall behind (38.1 us
a message, 1.52 cores needed), and every line of the answer read "no comparison":
CPU per message, cores at the rate, RSS and rejections stay true for a saturated
worker; only its latency (the backlog's wait) does not.
"""

from __future__ import annotations

from typing import Any

from abrunner.report import answer, decisions, tables as abreport
from abrunner.results import CaseResult, Report

from .test_ab_report import report, result

BASE = "json-stdlib+pydantic"


def _saturated(repeat: int = 1, **base: Any) -> list[CaseResult]:
    slow: dict[str, Any] = dict(lag_end=312_622.0, throughput=26_243.0, cpu_pct=97.0)
    slow.update(rss_steady_mb=167.0, e2e_p99_ms=9_000.0, **base)
    return [
        *(result(BASE, 38.1, repeat=i, kept_up=False, **slow) for i in range(repeat)),
        *(
            result("msgspec-msgpack", 7.5 + i / 10, repeat=i, rss_steady_mb=65.0)
            for i in range(repeat)
        ),
    ]


def _decided(results: list[CaseResult], repeat: int = 1) -> Report:
    r = report(results, repeat=repeat)
    decisions.decide(r, 40_000)
    return r


def test_a_saturated_baseline_still_gets_an_answer_per_codec() -> None:
    r = _decided(_saturated())
    line = answer.sentence(r, "medium", "msgspec-msgpack")
    assert "no comparison" not in line
    assert "7.5 us of CPU per message against 38.1 (0.20x)" in line
    assert "0.30 of a core at 40,000 msg/s against 1.52" in line
    assert "RSS 65 MB against 167 (0.39x)" in line
    assert "it rejected none of this traffic" in line
    assert "latency not compared: the baseline fell behind" in line
    assert "p99 latency" not in line


def test_the_answer_says_the_baseline_cannot_carry_the_rate_and_what_it_needs() -> None:
    said = "\n".join(answer.section(_decided(_saturated())))
    first = next(x for x in said.splitlines() if x.startswith("- **"))
    assert first.startswith(f"- **{BASE}** (the baseline) did not keep up with 40,000")
    assert "it handled 26,243 msg/s with 97 % of a core (lag 312,622" in first
    assert "the rate needs 1.52 cores" in first
    assert "2 worker processes or more" in first


def test_a_baseline_that_needs_under_a_core_is_said_to_have_lacked_it_here() -> None:
    r = _decided(_saturated(cpu_us_per_msg=20.0, cpu_pct=70.0))
    first = next(x for x in answer.section(r) if x.startswith(f"- **{BASE}"))
    assert "needs 0.80 of a core, and it got 70 % of one here" in first


def test_the_short_table_leaves_out_only_the_saturated_latency_and_says_why() -> None:
    r = _decided(_saturated())
    [(_, headers, body)] = answer.short_tables(r)
    cells = {row[0]: dict(zip(headers, row, strict=True)) for row in body}
    base = cells[f"{BASE} (baseline)"]
    assert base["p99 ms"] == "- (fell behind)"
    assert base["CPU us/msg"] == "38.1" and base["RSS MB"] == "167"
    assert cells["msgspec-msgpack"]["p99 ms"] == "11.0"
    said = "\n".join(answer.section(r))
    assert f"Latency is left out for `{BASE}`" in said
    assert "the time messages waited in its backlog" in said


def test_latency_ratios_to_a_saturated_baseline_get_no_verdict_cpu_does() -> None:
    r = _decided(_saturated(repeat=3), repeat=3)
    by = {x.figure: x for x in r.ratios if x.codec == "msgspec-msgpack"}
    assert by["cpu_us_per_msg"].verdict == "better"
    assert by["rss_steady_mb"].verdict == "better"
    p99 = by["e2e_p99_ms"]
    assert p99.verdict is None and p99.low is None
    assert p99.why is not None and f"{BASE} fell behind" in p99.why
    md = abreport.markdown(r)
    assert "(0.0012x)" not in md  # no p99 ratio in the full table either


def test_a_candidate_that_fell_behind_is_compared_on_cpu_and_says_so() -> None:
    results = [
        result(BASE, 20.0),
        result("protobuf", 30.0, kept_up=False, lag_end=9e4, cpu_pct=99.0),
    ]
    line = answer.sentence(_decided(results), "medium", "protobuf")
    assert "it did not keep up with 40,000 msg/s here" in line
    assert "30.0 us of CPU per message against 20.0 (1.50x)" in line
    assert "latency not compared: it fell behind" in line


def test_a_failed_baseline_still_has_nothing_to_compare() -> None:
    results = [
        CaseResult(codec=BASE, profile="medium", repeat=0, error="RunnerError: x"),
        result("protobuf", 9.0),
    ]
    line = answer.sentence(_decided(results), "medium", "protobuf")
    assert "no comparison, the baseline failed" in line
