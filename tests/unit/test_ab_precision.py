"""`--precision`: a paired run adds repeats until every CPU ratio is as precise as
asked, or a time cap; the report says what it reached and why it stopped.

Three paired repeats of 10 s gave CPU ratio intervals of ±10 % to ±18 % on the
project's machine: the run stopped before the answer was decided.
"""

from __future__ import annotations

import random
from typing import Any

import msgspec
import pytest
from rich.console import Console

from abrunner.cli import plan_from_settings
from abrunner.config import AbSettings
from abrunner.lab import paired as lab_paired, precision
from abrunner.plan import Plan, Profile
from abrunner.report import answer, decisions, paired as report_paired
from abrunner.results import CaseResult, Ratio, Report
from abrunner.windowed import Paired, PrecisionStop
from schemas.errors import ConfigError
from tests.unit.test_ab_report import report as make_report, result
from tests.unit.test_ab_windows import BOUNDS, window

CODECS = ("json+pydantic", "msgspec-json", "protobuf")


def _plan(**extra: Any) -> Plan:
    """The report tests' plan, paired on `CODECS` at 20,000 msg/s, asked ±5 %."""
    settings = msgspec.structs.asdict(make_report([]).plan)
    settings.update(codecs=CODECS, profiles=(Profile("medium"),), rate=20_000)
    settings.update(duration=10, repeat=3, baseline="json+pydantic", mode="paired")
    settings.update(precision=0.05, precision_cap_s=600.0)
    return Plan(**{**settings, **extra})


def _ratio(ratio: float, low: float | None, high: float | None) -> Ratio:
    return Ratio(
        profile="medium",
        codec="protobuf",
        figure="cpu_us_per_msg",
        pairs=5,
        ratio=ratio,
        low=low,
        high=high,
    )


class TestStoppingRule:
    def test_half_width_is_the_farther_bound_as_a_fraction_of_the_ratio(self) -> None:
        assert precision.half_width(_ratio(0.4, 0.38, 0.42)) == pytest.approx(0.05)
        assert precision.half_width(_ratio(0.4, 0.30, 0.41)) == pytest.approx(0.25)
        assert precision.half_width(_ratio(0.4, None, None)) is None

    @pytest.mark.parametrize(
        ("reached", "repeats", "elapsed", "why"),
        [
            (0.01, 2, 10.0, None),  # fewer than --repeat: never checked
            (0.049, 3, 100.0, "reached"),
            (0.05, 3, 100.0, "reached"),
            (0.08, 3, 100.0, None),  # time left: another repeat
            (None, 3, 100.0, None),  # no interval yet: another repeat
            (0.08, 3, 560.0, "time cap"),  # 560 + 60 passes 600
            (None, 100, 100.0, "repeat limit"),
            (0.08, 4, 100.0, "failed"),  # the last two failed
        ],
    )
    def test_why_stop(
        self, reached: float | None, repeats: int, elapsed: float, why: str | None
    ) -> None:
        found = precision.why_stop(
            asked=0.05,
            reached=reached,
            repeats=repeats,
            min_repeats=3,
            elapsed_s=elapsed,
            longest_s=60.0,
            cap_s=600.0,
            failed_in_a_row=2 if repeats == 4 else 0,
        )
        assert found == why


def _windows(repeat: int, noise: float, rng: random.Random) -> list[Any]:
    """One repeat's 10 windows for every codec: a shared machine swing that
    cancels, and each candidate's own noise of `noise` (log sd)."""
    found = []
    for i in range(10):
        machine = rng.uniform(0.7, 1.5)
        found.append(window(CODECS[0], repeat, i, us=25.0 * machine))
        for codec, us in ((CODECS[1], 10.0), (CODECS[2], 8.0)):
            own = rng.lognormvariate(0.0, noise)
            w = window(codec, repeat, i, us=us * machine * own)
            found.append(w)
    return [msgspec.structs.replace(w, profile="medium") for w in found]


class _FakeRepeats:
    """`run_repeat` without Kafka: each repeat adds its windows and a result per
    codec, and takes `seconds` of a fake clock."""

    def __init__(
        self, noise: float, seconds: float, fail_at: frozenset[int] = frozenset()
    ):
        self.rng = random.Random(7)
        self.noise, self.seconds, self.fail_at = noise, seconds, fail_at
        self.now = 0.0
        self.calls = 0

    def clock(self) -> float:
        return self.now

    def __call__(
        self,
        bootstrap: Any,
        plan: Plan,
        profile: Profile,
        repeat: int,
        note: Any,
        found: Paired,
    ) -> list[CaseResult]:
        self.calls += 1
        self.now += self.seconds
        if repeat in self.fail_at:
            raise RuntimeError("worker exited")
        found.bounds = BOUNDS
        found.windows += _windows(repeat, self.noise, self.rng)
        return [result(c, 10.0, repeat=repeat) for c in plan.codecs]


class _Clock:
    """`time` as `abrunner.lab.precision` reads it, on the fake's clock."""

    def __init__(self, clock: Any) -> None:
        self.monotonic = clock


def _run(monkeypatch: pytest.MonkeyPatch, fake: _FakeRepeats, plan: Plan) -> Paired:
    monkeypatch.setattr(lab_paired, "run_repeat", fake)
    monkeypatch.setattr(precision, "time", _Clock(fake.clock))
    found = Paired(window_s=1.0, bounds=[])
    results: list[CaseResult] = []
    lab_paired.run_all(None, plan, Console(quiet=True), results, found)  # type: ignore[arg-type]
    assert len(results) == fake.calls * len(CODECS)
    return found


class TestRunAll:
    def test_adds_repeats_until_every_cpu_ratio_is_as_precise_as_asked(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
    ) -> None:
        fake = _FakeRepeats(noise=0.15, seconds=30.0)
        found = _run(monkeypatch, fake, _plan(out=str(tmp_path)))
        [stop] = found.stops
        assert stop.why == "reached" and fake.calls > 3  # more than --repeat
        assert stop.reached is not None and stop.reached <= 0.05
        assert stop.repeats == fake.calls and stop.windows == 10 * fake.calls
        for codec in CODECS[1:]:
            cpu = next(
                r
                for r in report_paired.ratios(found, "medium", CODECS[0], codec)
                if r.figure == "cpu_us_per_msg"
            )
            half = precision.half_width(cpu)
            assert half is not None and half <= 0.05

    def test_stops_at_the_time_cap_and_says_how_far_it_got(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
    ) -> None:
        fake = _FakeRepeats(noise=0.6, seconds=100.0)
        plan = _plan(out=str(tmp_path), precision_cap_s=450.0)
        [stop] = _run(monkeypatch, fake, plan).stops
        assert stop.why == "time cap" and fake.calls == 4  # a 5th would end at 500
        assert stop.reached is not None and stop.reached > 0.05

    def test_without_precision_it_runs_the_repeats_asked(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
    ) -> None:
        fake = _FakeRepeats(noise=0.6, seconds=100.0)
        found = _run(monkeypatch, fake, _plan(out=str(tmp_path), precision=None))
        assert fake.calls == 3 and found.stops == []

    def test_one_failed_repeat_is_passed_over_two_in_a_row_end_the_profile(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
    ) -> None:
        (tmp_path / "logs").mkdir()
        fake = _FakeRepeats(noise=0.6, seconds=10.0, fail_at=frozenset({1, 3, 4}))
        [stop] = _run(monkeypatch, fake, _plan(out=str(tmp_path))).stops
        assert stop.why == "failed" and fake.calls == 5


def _stopped(stop: PrecisionStop | None, paired: bool = True) -> Report:
    r = make_report([result("json-stdlib+pydantic", 20.0), result("protobuf", 8.0)])
    r.plan = msgspec.structs.replace(r.plan, precision=0.05, mode="paired")
    r.summary = {"medium": r.summary["medium"]}
    if paired:
        r.paired = Paired(window_s=1.0, bounds=BOUNDS, stops=[stop] if stop else [])
    decisions.decide(r, 40_000)
    return r


STOP: dict[str, Any] = dict(
    profile="medium", asked=0.05, repeats=9, windows=90, cap_s=900.0
)


class TestReport:
    def test_states_the_precision_reached_and_why_it_stopped(self) -> None:
        stop = PrecisionStop(
            **STOP, reached=0.041, widest="protobuf", seconds=412.0, why="reached"
        )
        said = "\n".join(answer.section(_stopped(stop)))
        assert (
            "Precision: every CPU us/msg ratio's 95 % interval within ±4.1 % of it "
            "(widest: `protobuf`), asked ±5 %, after 9 repeats, 90 windows, 412 s; "
            "stopped: the precision asked was reached."
        ) in said

    def test_a_time_cap_says_so(self) -> None:
        stop = PrecisionStop(
            **STOP, reached=0.062, widest="protobuf", seconds=880.0, why="time cap"
        )
        said = "\n".join(report_paired.precision_lines(_stopped(stop)))
        assert "within ±6.2 % of it" in said
        assert "stopped at the time cap (900 s, `--precision-cap`)" in said

    def test_a_sequential_fallback_says_precision_was_not_applied(self) -> None:
        said = report_paired.precision_lines(_stopped(None, paired=False))
        assert said and "was not applied: the run was sequential" in said[0]


class TestSettings:
    def test_precision_is_a_percentage_with_a_time_cap(self) -> None:
        given: dict[str, Any] = {"precision": "5%", "precision_cap": "10m"}
        s = AbSettings(codecs=list(CODECS), **given)
        plan = plan_from_settings(s)
        assert plan.precision == pytest.approx(0.05)
        assert plan.precision_cap_s == 600.0

    @pytest.mark.parametrize(
        "extra",
        [{"mode": "sequential"}, {"max_mode": True}, {"codecs": ("protobuf",)}],
    )
    def test_precision_needs_a_paired_run_of_two_codecs(
        self, extra: dict[str, Any]
    ) -> None:
        if "codecs" in extra:
            extra["baseline"] = "protobuf"
        with pytest.raises(ConfigError, match="--precision"):
            _plan(**extra)
