"""The A/B statistics: t quantiles, ratio intervals, verdicts, cores and baseline ratios."""

from __future__ import annotations

import math
from typing import Any

import pytest

from abrunner.report import decisions, stats
from abrunner.report.tables import markdown, tables
from abrunner.results import CaseResult
from tests.unit.test_ab_report import report, result

BASE = "json-stdlib+pydantic"


def logs(*values: float) -> list[float]:
    """Figures whose logarithms are `values`: the intervals' arithmetic is on logs."""
    return [math.exp(v) for v in values]


class TestTQuantile:
    """The two-sided 95 % t quantile matches the published table."""

    @pytest.mark.parametrize(
        ("df", "expected"),
        [
            (1, 12.7062),
            (2, 4.3027),
            (3, 3.1824),
            (4, 2.7764),
            (10, 2.2281),
            (30, 2.0423),
        ],
    )
    def test_table(self, df: int, expected: float) -> None:
        assert stats.t_quantile(df) == pytest.approx(expected, abs=1e-4)

    def test_other_level(self) -> None:
        assert stats.t_quantile(5, 0.90) == pytest.approx(2.0150, abs=1e-4)

    def test_many_df_near_normal(self) -> None:
        assert stats.t_quantile(1000) == pytest.approx(1.9623, abs=1e-4)

    @pytest.mark.parametrize(("df", "level"), [(0, 0.95), (3, 1.0), (3, 0.0)])
    def test_rejected(self, df: int, level: float) -> None:
        with pytest.raises(ValueError, match="t quantile"):
            stats.t_quantile(df, level)


class TestPairedRatio:
    """Paired repeats: the geometric mean ratio with a t interval on the log ratios."""

    def test_spanning_one(self) -> None:
        # log ratios 0, 0.1, 0.2: mean 0.1, sd 0.1, half 4.3027 * 0.1 / sqrt(3)
        interval = stats.paired_ratio([1.0, 1.0, 1.0], logs(0.0, 0.1, 0.2))
        assert interval == pytest.approx((1.10517, 0.86207, 1.41682), rel=1e-4)
        assert interval is not None
        assert stats.verdict(interval) == "no detectable difference"

    def test_worse(self) -> None:
        interval = stats.paired_ratio([1.0, 1.0, 1.0], logs(0.5, 0.6, 0.7))
        assert interval == pytest.approx((1.82212, 1.42132, 2.33594), rel=1e-4)
        assert interval is not None and stats.verdict(interval) == "worse"

    def test_better_and_scale_free(self) -> None:
        base = [10.0, 20.0, 40.0]  # a drifting machine: pairing removes the drift
        interval = stats.paired_ratio(base, [v * 0.5 for v in base])
        assert interval == pytest.approx((0.5, 0.5, 0.5))
        assert interval is not None and stats.verdict(interval) == "better"

    def test_too_few_pairs(self) -> None:
        assert stats.paired_ratio([1.0, 2.0], [1.0, 2.0]) is None

    def test_unequal_lengths(self) -> None:
        with pytest.raises(ValueError, match="3 vs 2"):
            stats.paired_ratio([1.0, 1.0, 1.0], [1.0, 1.0])


class TestUnpairedRatio:
    """Independent runs: the ratio of geometric means with a Welch t interval."""

    def test_known_interval(self) -> None:
        # equal variances 0.01 and n = 3: Welch df = 4, t = 2.7764, se = 0.08165
        interval = stats.unpaired_ratio(logs(0.0, 0.1, 0.2), logs(0.3, 0.4, 0.5))
        assert interval == pytest.approx((1.34986, 1.07606, 1.69333), rel=1e-4)
        assert interval is not None and stats.verdict(interval) == "worse"

    def test_df_rounded_down(self) -> None:
        # variances 0.01 and 0.2/3, n = 3 and 4: Welch df = 4.08, taken as 4
        old, new = logs(0.0, 0.1, 0.2), logs(0.0, 0.2, 0.4, 0.6)
        interval = stats.unpaired_ratio(old, new)
        half = 2.776445 * math.sqrt(0.01 / 3 + (0.2 / 3) / 4)
        assert interval == pytest.approx(
            (math.exp(0.2), math.exp(0.2 - half), math.exp(0.2 + half)), rel=1e-5
        )

    def test_same_runs(self) -> None:
        interval = stats.unpaired_ratio(logs(0.0, 0.1, 0.2), logs(0.2, 0.0, 0.1))
        assert interval is not None and interval.ratio == pytest.approx(1.0)
        assert stats.verdict(interval) == "no detectable difference"

    def test_no_spread(self) -> None:
        interval = stats.unpaired_ratio([2.0] * 3, [3.0] * 3)
        assert interval == pytest.approx((1.5, 1.5, 1.5))

    def test_too_few(self) -> None:
        assert stats.unpaired_ratio([1.0, 1.0], [1.0, 1.0, 1.0]) is None


def runs(codec: str, cpus: list[float], **extra: Any) -> list[CaseResult]:
    return [result(codec, cpu, repeat=i, **extra) for i, cpu in enumerate(cpus)]


class TestCores:
    """Cores at the target rate scale CPU us/msg; table, report.md and JSON show them."""

    def test_cores(self) -> None:
        r = report(runs(BASE, [25.0, 30.0]) + runs("protobuf", [10.0, 12.0]))
        decisions.decide(r, 40_000)
        cores = r.summary["medium"]["protobuf"].figures[decisions.CORES]
        assert (cores.median, cores.min, cores.max) == pytest.approx((0.44, 0.4, 0.48))
        assert r.target_rate == 40_000
        (_, headers, body), *_ = tables(r)
        assert "cores at 40,000 msg/s" in headers
        assert "0.44 [0.40-0.48]" in body[0]
        assert "`cores at 40,000 msg/s`: CPU us/msg x 40,000" in markdown(r)


class TestBaselineRatios:
    """With 3 repeats or more each codec gets intervals and verdicts; with fewer, none."""

    def test_verdicts(self) -> None:
        # The baseline moves 2x between repeats, the pairs' ratios only 8 %.
        rows = runs(BASE, [30.0, 40.0, 20.0], rss_steady_mb=80.0)
        rows += runs("protobuf", [10.0, 13.0, 7.0], rss_steady_mb=80.0)
        r = report(rows, repeat=3)
        decisions.decide(r, 1_000)
        found = {x.figure: x for x in r.ratios if x.codec == "protobuf"}
        assert found["cpu_us_per_msg"].verdict == "better"
        assert found["cpu_us_per_msg"].high is not None
        assert found["cpu_us_per_msg"].high < 1
        assert found["rss_steady_mb"].verdict == "no detectable difference"
        assert found["rss_steady_mb"].ratio == pytest.approx(1.0)
        text = decisions.section(r) or ""
        assert "| medium | protobuf | CPU us/msg | 0.34x | 0.31x to 0.37x |" in text
        assert "| better |" in text and "no detectable difference" in text

    def test_failed_repeat_leaves_too_few_pairs(self) -> None:
        rows = runs(BASE, [30.0, 40.0, 20.0]) + runs("protobuf", [10.0, 13.0])
        rows.append(CaseResult(codec="protobuf", profile="medium", repeat=2, error="x"))
        r = report(rows, repeat=3)
        decisions.decide(r, 1_000)
        cpu = next(x for x in r.ratios if x.figure == "cpu_us_per_msg")
        assert (cpu.pairs, cpu.low, cpu.verdict) == (2, None, None)
        assert "no interval (2 pairs measured)" in (decisions.section(r) or "")

    def test_fewer_repeats_say_so(self) -> None:
        r = report(runs(BASE, [30.0, 40.0]) + runs("protobuf", [10.0, 13.0]))
        decisions.decide(r, 1_000)
        assert r.ratios == []
        text = decisions.section(r) or ""
        assert (
            text.count("\n") == 2 and "No intervals with `--repeat 2`: with 3" in text
        )
        assert "No intervals" in markdown(r)

    def test_nothing_to_compare(self) -> None:
        r = report(runs(BASE, [30.0, 40.0, 20.0]), repeat=3)
        decisions.decide(r, 1_000)
        assert decisions.section(r) is None


class TestLateGenerator:
    """A load generator behind its schedule: p99 measures its delay, no verdict."""

    def test_no_p99_verdict(self) -> None:
        late = {"target_rate": 20_000.0, "producer_rate": 3_400.0}
        r = report(
            runs(BASE, [30.0, 31.0, 29.0], e2e_p99_ms=100.0, **late)
            + runs("protobuf", [10.0, 10.5, 9.5], e2e_p99_ms=50.0, **late),
            repeat=3,
        )
        decisions.decide(r, 1_000)
        found = {x.figure: x for x in r.ratios}
        assert found["cpu_us_per_msg"].verdict == "better"
        p99 = found["e2e_p99_ms"]
        assert p99.verdict is None and p99.low is None
        assert p99.why is not None and "3,400 of 20,000 msg/s" in p99.why
        assert "no verdict: the load generator fell behind" in markdown(r)

    def test_on_schedule_keeps_the_verdict(self) -> None:
        ok = {"target_rate": 20_000.0, "producer_rate": 19_900.0}
        r = report(
            runs(BASE, [30.0, 31.0, 29.0], e2e_p99_ms=100.0, **ok)
            + runs("protobuf", [10.0, 10.5, 9.5], e2e_p99_ms=50.0, **ok),
            repeat=3,
        )
        decisions.decide(r, 1_000)
        assert {x.figure: x for x in r.ratios}["e2e_p99_ms"].verdict == "better"
