"""`codec-ab --processing-guarantee both`: exactly-once's cost per codec, beside
at-least-once's on the same load."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from abrunner import cli as ab_cli, guarantees
from abrunner.config import AbSettings
from abrunner.report.tables import aggregate, environment
from abrunner.results import CaseResult, Report

CODECS = ["json+pydantic", "msgspec-json"]


def report(guarantee: str, figures: dict[str, tuple[float, float]]) -> Report:
    """A report of one run: codec -> (CPU us/msg, p99 ms), two repeats each."""
    s = AbSettings(codecs=CODECS, processing_guarantee=guarantee)
    results = [
        CaseResult(
            codec=codec,
            profile="medium",
            repeat=r,
            cpu_us_per_msg=cpu * (1 + 0.1 * r),
            e2e_p99_ms=p99,
            lost=0,
        )
        for codec, (cpu, p99) in figures.items()
        for r in (0, 1)
    ]
    return Report(
        plan=ab_cli.plan_from_settings(s),
        environment=environment("4.1.2"),
        results=results,
        summary=aggregate(results),
    )


class TestSettings:
    """`both` and the two guarantees listed are one setting."""

    @pytest.mark.parametrize(
        "given", ["both", "at-least-once,exactly-once", "exactly-once, at-least-once"]
    )
    def test_both(self, given: str) -> None:
        assert AbSettings(processing_guarantee=given).processing_guarantee == "both"

    def test_anything_else_is_refused(self) -> None:
        with pytest.raises(ValueError, match="processing_guarantee"):
            AbSettings(processing_guarantee="at-most-once,exactly-once")


class TestCosts:
    """Per codec: each guarantee's CPU per message and p99, and their ratio."""

    def test_ratios(self) -> None:
        alo = report(
            "at-least-once", {"json+pydantic": (10, 20), "msgspec-json": (4, 8)}
        )
        eo = report("exactly-once", {"json+pydantic": (12, 30), "msgspec-json": (6, 8)})
        rows = {r.codec: r for r in guarantees.costs(alo, eo)}
        assert set(rows) == set(CODECS)
        fast = rows["msgspec-json"]
        assert fast.at_least_once["cpu_us_per_msg"] == pytest.approx(4.2)
        assert fast.exactly_once["cpu_us_per_msg"] == pytest.approx(6.3)
        assert fast.ratio["cpu_us_per_msg"] == pytest.approx(1.5)
        assert fast.ratio["e2e_p99_ms"] == pytest.approx(1.0)
        assert rows["json+pydantic"].ratio["e2e_p99_ms"] == pytest.approx(1.5)

    def test_a_codec_one_run_lacks_has_no_ratio(self) -> None:
        alo = report(
            "at-least-once", {"json+pydantic": (10, 20), "msgspec-json": (4, 8)}
        )
        eo = report("exactly-once", {"json+pydantic": (12, 30)})
        rows = {r.codec: r for r in guarantees.costs(alo, eo)}
        assert rows["msgspec-json"].ratio == {}
        assert rows["msgspec-json"].exactly_once == {}

    def test_the_files(self, tmp_path: Path) -> None:
        alo = report(
            "at-least-once", {"json+pydantic": (10, 20), "msgspec-json": (4, 8)}
        )
        eo = report("exactly-once", {"json+pydantic": (12, 30), "msgspec-json": (6, 8)})
        md, js = guarantees.write(tmp_path, alo, eo)
        text = md.read_text()
        assert "| msgspec-json | 4.2 | 6.3 | 1.50x | 8.0 | 8.0 | 1.00x | 0 |" in text
        assert "(exactly-once/report.md)" in text
        rows = msgspec.json.decode(js.read_bytes(), type=list[guarantees.GuaranteeCost])
        assert [r.codec for r in rows] == CODECS


class TestCommand:
    """`--processing-guarantee both` runs the load once per guarantee, each into
    its own directory, then writes the cost beside them."""

    def test_runs_each_guarantee_then_the_cost(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        ran: list[tuple[str, Path]] = []
        figures = {"at-least-once": (4.0, 8.0), "exactly-once": (6.0, 9.0)}

        def fake_run(
            s: AbSettings, before: object, compare: object
        ) -> tuple[int, Report]:
            ran.append((s.processing_guarantee, s.out))
            one = report(
                s.processing_guarantee,
                {"msgspec-json": figures[s.processing_guarantee]},
            )
            return 0, one

        monkeypatch.setattr(ab_cli, "_run", fake_run)
        status = ab_cli.main(
            [
                *("--codecs", "msgspec-json", "--out", str(tmp_path)),
                *("--processing-guarantee", "at-least-once,exactly-once"),
            ]
        )
        assert status == 0
        assert ran == [
            ("at-least-once", tmp_path / "at-least-once"),
            ("exactly-once", tmp_path / "exactly-once"),
        ]
        assert (
            "| msgspec-json | 4.2 | 6.3 | 1.50x |"
            in (tmp_path / "guarantees.md").read_text()
        )
