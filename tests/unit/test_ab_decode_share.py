"""The A/B report's decode share: the decode's part of the worker's CPU per message,
and the note that says so when it is small for every codec."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import msgspec
import pytest

from abrunner.lab.case_figures import figures
from abrunner.plan import Case, Profile
from abrunner.report import decisions, decode_share, tables as abreport, terminal
from abrunner.results import CaseResult, Report
from abrunner.staging import cli as staging_cli
from tests.unit.test_ab_measure import snapshot
from tests.unit.test_ab_report import md_table, report, result
from tests.unit.test_ab_staging import (
    A,
    B,
    Fake,
    prometheus,  # noqa: F401 (a fixture)
    run,
    side,
)

HEADER = "decode % of CPU"
BASE = "json-stdlib+pydantic"


def low(repeat: int = 0, base_cpu: float = 32.0) -> list[CaseResult]:
    """A paced run where decoding is a small share: 2,000 msg/s, fixed cost ~30 us."""
    return [
        result(BASE, base_cpu, repeat=repeat, decode_us=6.4),  # 20 %
        result("msgspec-msgpack", 31.0, repeat=repeat, decode_us=1.55),  # 5 %
        result("protobuf", 31.5, repeat=repeat, decode_us=3.15),  # 10 %
    ]


def at(rate: float, written: Report, **plan: object) -> Report:
    """`written` with its plan's rate (and any other plan field) replaced."""
    written.plan = msgspec.structs.replace(written.plan, rate=rate, **plan)
    return written


def high() -> list[CaseResult]:
    """A run where the baseline's decode is most of its CPU (40,000 msg/s)."""
    return [
        result(BASE, 26.0, decode_us=22.1),  # 85 %
        result("msgspec-msgpack", 7.0, decode_us=2.38),  # 34 %
    ]


class TestShare:
    """decode us per message over CPU us per message, or nothing."""

    def test_from_given_figures(self) -> None:
        assert decode_share.share(4.0, 16.0) == 0.25
        assert decode_share.share(0.0, 16.0) == 0.0

    @pytest.mark.parametrize(
        ("decode", "cpu"),
        [(None, 16.0), (4.0, None), (4.0, 0.0), (4.0, -1.0), (math.inf, 16.0)],
    )
    def test_missing_is_none(self, decode: float | None, cpu: float | None) -> None:
        assert decode_share.share(decode, cpu) is None

    def test_per_repeat_then_median_failed_left_out(self) -> None:
        runs = [
            result("protobuf", 10.0, repeat=0, decode_us=1.0),  # 10 %
            result("protobuf", 20.0, repeat=1, decode_us=6.0),  # 30 %
            result("protobuf", 10.0, repeat=2, decode_us=2.0),  # 20 %
            CaseResult(codec="protobuf", profile="medium", repeat=3, error="boom"),
        ]
        spread = decode_share.spread(runs)[decode_share.SHARE]
        assert (spread.median, spread.min, spread.max) == pytest.approx((0.2, 0.1, 0.3))
        assert decode_share.spread(runs[3:]) == {}

    def test_from_a_measured_case_uses_the_mean(self) -> None:
        """The worker's histogram gives sum and count: the share uses their mean."""
        window = [2e-6] * 70 + [30e-6] * 30
        s0 = snapshot(100.0, 1000, [])
        s2 = snapshot(112.0, 21_000, window)
        measured = figures(Case("c", Profile("small"), 0), s0, s2, s2, [], [])
        row = abreport.aggregate([measured])["small"]["c"]
        mean_us = 1e6 * sum(window) / len(window)
        cpu_us = 1e6 * (11.2 - 10.0) / 20_000
        assert row.median(decode_share.SHARE) == pytest.approx(mean_us / cpu_us)
        assert (measured.decode_p50_us or 0) < mean_us  # the median would read low


class TestTable:
    """The column sits after CPU us/msg; missing data reads "-"."""

    def test_cells(self) -> None:
        failed = CaseResult(
            codec="orjson+pydantic", profile="medium", repeat=0, error="x"
        )
        silent = result("msgspec-json", 9.0, decode_us=None)
        idle = result("protobuf", 0.0, decode_us=1.0)
        rows = abreport.aggregate([*high(), failed, silent, idle])["medium"]
        headers, body = abreport.table(rows, BASE, False, False)
        assert headers.index(HEADER) == headers.index("CPU us/msg") + 1
        cells = {line[0].split()[0]: line[headers.index(HEADER)] for line in body}
        assert cells == {
            "msgspec-msgpack": "34%",
            BASE: "85%",
            "orjson+pydantic": "-",  # failed
            "msgspec-json": "-",  # no decode samples
            "protobuf": "-",  # no CPU measured
        }

    def test_spread_over_repeats(self) -> None:
        runs = [*low(0), *low(1, base_cpu=21.33)]  # baseline 20 % then 30 %
        md = abreport.markdown(report(runs, repeat=2))
        assert md_table(md)[f"{BASE} (baseline)"][HEADER] == "25% [20%-30%]"

    def test_never_above_100_percent_and_says_why(self) -> None:
        # avro read 105 %: wall-time decodes over a CPU us/msg they are part of.
        over = [result("avro", 10.0, decode_us=10.5), result("protobuf", 20.0)]
        rows = abreport.aggregate(over)["medium"]
        headers, body = abreport.table(rows, "protobuf", False, False)
        cells = {line[0].split()[0]: line[headers.index(HEADER)] for line in body}
        assert cells == {"avro": decode_share.OVER, "protobuf": "50%"}
        runs = [  # one repeat over 100 %: its median would hide a wrong figure
            result("avro", 10.0, decode_us=9.0),
            result("avro", 10.0, repeat=1, decode_us=10.6),
            result("protobuf", 20.0),
        ]
        md = abreport.markdown(report(runs, repeat=2))
        assert md_table(md)["avro"][HEADER] == decode_share.OVER
        assert md_table(md)["protobuf"][HEADER] == "50%"

    def test_no_figure_no_column(self) -> None:
        rows = abreport.aggregate([result("protobuf", 9.0, decode_us=None)])["medium"]
        headers, _ = abreport.table(rows, "protobuf", False, False)
        assert HEADER not in headers


class TestNote:
    """At a low share report.md and the terminal say what the CPU is made of."""

    def test_present_at_low_share(self) -> None:
        md = abreport.markdown(at(2_000, report(low())))
        assert "**Decoding is a small share of the CPU at 2,000 msg/s**" in md
        assert f"`{BASE}` 20 %, `msgspec-msgpack` 5 %, `protobuf` 10 %" in md
        assert "under 25 % of CPU us/msg for every codec measured" in md
        assert "mostly the consumer's fixed cost" in md and "librdkafka" in md
        assert "decoding is not your cost at this rate" in md
        assert "run at that rate" in md
        assert "The verdict" not in md  # no intervals with 2 repeats
        out = io.StringIO()
        terminal.print_tables(at(2_000, report(low())), out)
        assert "Decoding is a small share of the CPU" in out.getvalue()

    def test_absent_at_high_share(self) -> None:
        assert "small share" not in abreport.markdown(report(high()))
        out = io.StringIO()
        terminal.print_tables(report(high()), out)
        assert "small share" not in out.getvalue()

    def test_every_codec_must_be_low(self) -> None:
        one_high = [*low()[:2], result("protobuf", 10.0, decode_us=3.0)]  # 30 %
        assert "small share" not in abreport.markdown(report(one_high))

    def test_failed_codec_is_not_counted(self) -> None:
        failed = CaseResult(codec="protobuf", profile="medium", repeat=0, error="x")
        md = abreport.markdown(report([*low()[:2], failed]))
        assert f"`{BASE}` 20 %, `msgspec-msgpack` 5 %)" in md

    def test_names_the_no_difference_verdict(self) -> None:
        # CPU within a few % either way over 3 repeats: no detectable difference.
        runs = [*low(0, 32.0), *low(1, 30.0), *low(2, 31.5)]
        written = at(2_000, report(runs, repeat=3))
        decisions.decide(written, 2_000)
        cpu = {
            r.codec: r.verdict for r in written.ratios if r.figure == "cpu_us_per_msg"
        }
        assert set(cpu.values()) == {"no detectable difference"}
        text = decode_share.note(written) or ""
        assert (
            f'"no detectable difference" in CPU us/msg from `{BASE}` for '
            "`msgspec-msgpack` on `medium`, `protobuf` on `medium`"
        ) in text
        assert "decoding is not your cost" in text

    def test_not_in_max_mode(self) -> None:
        assert decode_share.note(at(2_000, report(low()), max_mode=True)) is None


def test_report_json_has_the_field(tmp_path: Path) -> None:
    written = report(low())
    abreport.write(written, tmp_path)
    data = json.loads((tmp_path / "report.json").read_text())
    figure = data["summary"]["medium"]["msgspec-msgpack"]["figures"]["decode_share"]
    assert figure["median"] == pytest.approx(0.05)
    back: Report = abreport.read(tmp_path / "report.json")
    assert back == written


def test_staging_rows_have_the_share(
    prometheus: tuple[str, list[Fake]],  # noqa: F811 (the fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`codec-ab staging`: Prometheus' decode sum over count, over CPU per message."""
    monkeypatch.setattr(staging_cli, "charts", lambda report, out: [])
    url, holder = prometheus
    # The fake times every decode at 20 us; CPU about 80 and 160 us/msg (5 % noise).
    sides = {A: side("msgspec-json", 80, 16, 1), B: side("json+pydantic", 160, 16, 2)}
    holder.append(Fake(sides, 16))
    status, _out, err, written = run(url, tmp_path, 16)
    assert status == 0, err
    rows = written["summary"]["medium"]
    a = rows["A: msgspec-json"]["figures"]["decode_share"]["median"]
    b = rows["B: json+pydantic"]["figures"]["decode_share"]["median"]
    assert a == pytest.approx(0.25, rel=0.06) and b == pytest.approx(0.125, rel=0.06)
    md = (tmp_path / "staging" / "report.md").read_text()
    table = md_table(next(part for part in md.split("## ") if HEADER in part))
    assert table["A: msgspec-json (baseline)"][HEADER].startswith("2")
