"""report.md answers first: a sentence per candidate, the short table, the CPU split."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from abrunner.report import answer, decisions, tables as abreport
from abrunner.report.charts import SPLIT_CHART, split
from abrunner.results import CaseResult, Ratio, Report

from .test_ab_report import report, result

BASE = "json-stdlib+pydantic"


def _decided(results: list[CaseResult], repeat: int = 1) -> Report:
    r = report(results, repeat=repeat)
    decisions.decide(r, 40_000)
    return r


def test_the_answer_comes_before_the_full_figures_and_the_definitions_last() -> None:
    md = abreport.markdown(
        _decided([result(BASE, 20.0), result("msgspec-msgpack", 8.0)])
    )
    answer_at, full_at = md.index("## The answer"), md.index("## Full figures")
    definitions_at = md.index("## Definitions")
    assert answer_at < full_at < definitions_at < md.index("## Environment")
    assert md.index("- `decode % of CPU`") > definitions_at  # the legend, at the end


def test_each_candidate_gets_one_sentence_with_cpu_cores_p99_rss_and_wire() -> None:
    r = _decided(
        [
            result(BASE, 20.0, e2e_p99_ms=40.0, rss_steady_mb=100.0),
            result("msgspec-msgpack", 8.0, wire_bytes=700.0, e2e_p99_ms=10.0),
        ]
    )
    lines = [x for x in abreport.markdown(r).splitlines() if x.startswith("- **")]
    assert len(lines) == 1
    line = lines[0]
    assert line.startswith(f"- **msgspec-msgpack** instead of `{BASE}`")
    assert "8.0 us of CPU per message against 20.0 (0.40x)" in line
    assert "0.32 of a core at 40,000 msg/s against 0.80" in line
    assert "p99 latency 10.0 ms against 40.0 (0.25x)" in line
    assert "RSS 80 MB against 100 (0.80x)" in line
    assert "700 bytes a message on the wire against 900 (0.78x)" in line
    assert "it rejected none of this traffic" in line


def test_with_repeats_the_sentence_carries_the_interval_and_verdict() -> None:
    runs = [
        *(result(BASE, 20.0 + i, repeat=i) for i in range(3)),
        *(result("protobuf", 10.0 + i / 10, repeat=i) for i in range(3)),
    ]
    r = _decided(runs, repeat=3)
    line = answer.sentence(r, "medium", "protobuf")
    cpu = next(x for x in r.ratios if x.figure == "cpu_us_per_msg")
    assert cpu.verdict == "better"
    assert "95 % interval" in line and ": better)" in line
    assert "One run per codec" not in abreport.markdown(r)


def test_a_single_run_says_the_ratios_have_no_interval() -> None:
    md = abreport.markdown(_decided([result(BASE, 20.0), result("protobuf", 9.0)]))
    assert "One run per codec (`--repeat 1`): these ratios have no interval" in md


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ({"lost": 12}, "LOST 12 messages"),
        ({"dead_lettered": 40, "processed": 40}, "dead-lettered every"),
        ({"kept_up": False, "lag_end": 9e4}, "did not keep up"),
    ],
)
def test_a_row_not_to_compare_says_why_instead_of_ratios(
    extra: dict[str, Any], said: str
) -> None:
    r = _decided([result(BASE, 20.0), result("protobuf", 9.0, **extra)])
    line = answer.sentence(r, "medium", "protobuf")
    assert said in line and "of CPU per message" not in line


def test_rejections_of_this_traffic_are_counted_in_the_sentence() -> None:
    r = _decided(
        [
            result(BASE, 20.0, processed=1000.0),
            result("msgspec-json", 9.0, dead_lettered=30, processed=1000.0),
        ]
    )
    assert "it REJECTED 30 messages of this traffic (3.0%" in answer.sentence(
        r, "medium", "msgspec-json"
    )


def test_checks_a_codec_skips_are_named_in_its_sentence() -> None:
    r = _decided([result(BASE, 20.0), result("msgspec-json", 9.0)])
    r.plan = msgspec.structs.replace(
        r.plan,
        skipped=(
            "Shipment.tracking: msgspec-json, protobuf skip the validator upper()",
            "Shipment.tags: protobuf skips the uniqueness of a set",
        ),
    )
    line = answer.sentence(r, "medium", "msgspec-json")
    assert "it skips 1 of the model's checks: Shipment.tracking" in line
    assert "Shipment.tags" not in line


def test_the_short_table_lists_cheapest_first_with_the_deciding_columns() -> None:
    r = _decided([result(BASE, 20.0), result("protobuf", 9.0)])
    [(_, headers, body)] = answer.short_tables(r)
    assert headers[:3] == ["codec", "status", "CPU us/msg"]
    assert [row[0] for row in body] == ["protobuf", f"{BASE} (baseline)"]


def test_the_cpu_split_is_the_decode_share_of_cpu_capped_at_all_of_it() -> None:
    r = _decided([result(BASE, 20.0), result("protobuf", 10.0, decode_us=4.0)])
    row = r.summary["medium"]["protobuf"]
    assert split(row) == pytest.approx((4.0, 6.0))
    over = _decided([result(BASE, 20.0), result("protobuf", 10.0, decode_us=14.0)])
    assert split(over.summary["medium"]["protobuf"]) == pytest.approx((10.0, 0.0))
    assert f"]({SPLIT_CHART})" in abreport.markdown(r)


def test_the_short_table_never_shows_a_decode_share_above_all_of_the_cpu() -> None:
    r = _decided([result(BASE, 20.0), result("protobuf", 10.0, decode_us=48.6)])
    [(_, headers, body)] = answer.short_tables(r)
    cell = dict(zip(headers, body[0], strict=True))["decode % of CPU"]
    assert cell.startswith("100% (486% measured")


def test_a_ratio_without_an_interval_says_why_in_the_sentence() -> None:
    r = _decided([result(BASE, 20.0), result("protobuf", 10.0)])
    r.ratios = [
        Ratio(
            profile="medium",
            codec="protobuf",
            figure="e2e_p99_ms",
            pairs=2,
            ratio=0.5,
            why="too few windows (2 of 9)",
        )
    ]
    line = answer.sentence(r, "medium", "protobuf")
    assert "(0.50x; no verdict: too few windows (2 of 9))" in line


def test_a_teams_handler_verdict_is_in_the_codecs_sentence() -> None:
    r = _decided([result(BASE, 20.0), result("msgspec-json", 9.0)])
    r.plan = msgspec.structs.replace(
        r.plan,
        logic_verdicts=(
            ("msgspec-json", "fails on 17 of 50: AttributeError model_dump"),
            (BASE, "works"),
        ),
    )
    line = answer.sentence(r, "medium", "msgspec-json")
    assert "your handler on its objects: fails on 17 of 50" in line


def test_a_replay_the_codec_could_not_wholly_carry_is_said_in_its_sentence() -> None:
    """The sentence said "rejected none of this traffic" (all carried) beside the
    rejections' "could not carry 300 of the 2,000 recorded messages"."""
    naive = {"bookedAt: a datetime without a timezone (avro holds instants)": 300}
    r = _decided(
        [
            result(BASE, 20.0, recorded=2000, processed=2000),
            result("avro", 9.0, recorded=2000, processed=2000, not_carried=naive),
        ]
    )
    line = answer.sentence(r, "medium", "avro")
    assert (
        "it rejected none of the traffic it was sent, and could not carry 300 of "
        "the 2,000 recorded messages (15.0%, not sent in its case: see the "
        "rejection reasons)"
    ) in line


def test_the_handler_verdict_is_in_every_sentence_the_baseline_and_failed_rows_too() -> (
    None
):
    dead: dict[str, Any] = {"dead_lettered": 40, "processed": 40}
    r = _decided([result(BASE, 20.0), result("protobuf", 9.0, **dead)])
    verdicts = (
        (BASE, "works (50 messages)"),
        ("protobuf", "fails: AttributeError: model_dump (touched `model_dump`)"),
    )
    r = msgspec.structs.replace(
        r, plan=msgspec.structs.replace(r.plan, logic_verdicts=verdicts)
    )
    line = answer.sentence(r, "medium", "protobuf")
    assert "dead-lettered every" in line
    assert "Your handler on its objects: fails: AttributeError: model_dump" in line
    section = "\n".join(answer.section(r))
    assert f"- **{BASE}** (the baseline): your handler on its objects: works" in section
