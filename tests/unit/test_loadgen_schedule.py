"""Rate schedules: the intended send time of every message, patterns and plans."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings as hyp_settings, strategies as st

from loadgen.config import LoadgenSettings
from loadgen.schedule import (
    RateSchedule,
    TableSchedule,
    build_schedule,
    plan,
    rate_pieces,
    shard_count,
)
from loadgen.source import Source


def make(**kw: Any) -> LoadgenSettings:
    return LoadgenSettings.model_validate(kw)


SOURCE = Source(values=[b"x"] * 10, keys=[None] * 10)


class TestRateSchedule:
    """N(t) and its inverse: message k is due at the time N reaches k."""

    def test_constant_rate_is_exact(self) -> None:
        sched = RateSchedule([(math.inf, 40_000.0, 40_000.0)])
        assert sched.time_of(0) == 0
        assert sched.time_of(1) == pytest.approx(25e-6)
        assert sched.time_of(40_000) == pytest.approx(1.0)
        assert sched.due(0.0) == 1
        assert sched.due(1.0) == 40_001
        assert sched.count_before(1.0) == 40_000
        assert sched.count_before(60.0) == 2_400_000
        assert sched.count_before(0.0) == 0
        assert sched.due(-1.0) == 0

    def test_ramp_accumulates_the_area_under_the_rate(self) -> None:
        sched = RateSchedule([(10.0, 0.0, 1000.0), (math.inf, 1000.0, 1000.0)])
        assert sched.cumulative(10.0) == pytest.approx(5000.0)
        assert sched.cumulative(5.0) == pytest.approx(1250.0)
        assert sched.rate_at(2.5) == pytest.approx(250.0)
        assert sched.count_before(11.0) == 6000
        # The inverse of a quadratic piece: N(t_k) == k.
        assert sched.cumulative(sched.time_of(1250)) == pytest.approx(1250.0)

    def test_descending_ramp(self) -> None:
        sched = RateSchedule([(4.0, 1000.0, 0.0), (math.inf, 10.0, 10.0)])
        assert sched.cumulative(4.0) == pytest.approx(2000.0)
        assert sched.time_of(2000) == pytest.approx(4.0)
        assert sched.time_of(2010) == pytest.approx(5.0)

    def test_zero_rate_pieces_are_skipped_by_the_inverse(self) -> None:
        sched = RateSchedule([(2.0, 0.0, 0.0), (math.inf, 100.0, 100.0)])
        assert sched.time_of(1) == pytest.approx(2.01)
        assert sched.count_before(1.9) == 0

    @hyp_settings(max_examples=200, deadline=None)
    @given(
        st.lists(
            st.tuples(
                st.floats(0.01, 50),
                st.floats(0, 50_000),
                st.floats(0, 50_000),
            ),
            min_size=1,
            max_size=6,
        ),
        st.floats(1, 50_000),
        st.integers(0, 2_000_000),
    )
    def test_time_of_inverts_due(
        self, pieces: list[tuple[float, float, float]], last: float, k: int
    ) -> None:
        sched = RateSchedule([*pieces, (math.inf, last, last)])
        t = sched.time_of(k)
        assert sched.due(t) >= k + 1
        assert sched.count_before(t - 1e-6 - t * 1e-9) <= k
        assert sched.time_of(k + 1) >= t


class TestPatterns:
    """Each pattern's pieces as the flags describe them."""

    def test_constant(self) -> None:
        assert rate_pieces(make(rate=500)) == [(math.inf, 500, 500)]

    def test_ramp_defaults_to_the_whole_duration(self) -> None:
        pieces = rate_pieces(make(rate=800, pattern="ramp", duration=20))
        assert pieces == [(20, 0, 800), (math.inf, 800, 800)]
        sched = RateSchedule(rate_pieces(make(rate=800, pattern="ramp", ramp_s=4)))
        assert sched.rate_at(2) == pytest.approx(400)
        assert sched.rate_at(9) == 800

    def test_step_climbs_in_equal_steps(self) -> None:
        s = make(rate=1000, pattern="step", start_rate=200, steps=4, step_s=3)
        sched = RateSchedule(rate_pieces(s))
        rates = [sched.rate_at(t) for t in (0, 3.5, 6.5, 9.5, 12.5, 100)]
        assert rates == [200, 400, 600, 800, 1000, 1000]

    def test_spike(self) -> None:
        s = make(rate=100, pattern="spike", spike_at_s=5, spike_s=2, spike_rate=900)
        sched = RateSchedule(rate_pieces(s))
        assert [sched.rate_at(t) for t in (4.9, 5.5, 6.9, 7.1)] == [100, 900, 900, 100]
        assert sched.count_before(10) == 100 * 8 + 900 * 2
        default = RateSchedule(rate_pieces(make(rate=100, pattern="spike")))
        assert default.rate_at(12) == 200

    def test_unthrottled_has_no_schedule(self) -> None:
        assert build_schedule(make(rate=0), SOURCE) is None


class TestTableSchedule:
    """A paced replay: recorded times, repeated with the recording's period."""

    def test_due_and_time_of_loop(self) -> None:
        sched = TableSchedule([0.0, 0.0, 0.5, 1.0], period_s=1.25)
        assert [sched.due(t) for t in (0, 0.49, 0.5, 1.0, 1.25, 1.75)] == [
            2,
            2,
            3,
            4,
            6,
            7,
        ]
        assert [sched.time_of(k) for k in range(6)] == [0, 0, 0.5, 1.0, 1.25, 1.25]
        assert [sched.count_before(t) for t in (0, 0.5, 1.25, 1.3)] == [0, 2, 4, 6]
        assert sched.rate_at(0) == pytest.approx(4 / 1.25)

    def test_speed_divides_recorded_times(self) -> None:
        source = Source([b"a", b"b"], [None, None], times_s=[0.0, 2.0], period_s=4.0)
        s = make(replay=Path("r.rec"), speed=4.0)
        sched = build_schedule(s, source)
        assert sched is not None
        assert sched.time_of(1) == pytest.approx(0.5)
        assert sched.time_of(2) == pytest.approx(1.0)


class TestPlan:
    """How many messages a run sends and over which window."""

    def test_default_is_sixty_seconds(self) -> None:
        s = make(rate=1000)
        assert plan(s, build_schedule(s, SOURCE), SOURCE) == (60_000, 60.0)

    def test_count_shorter_than_duration_wins(self) -> None:
        s = make(rate=1000, duration=10, count=500)
        total, window = plan(s, build_schedule(s, SOURCE), SOURCE)
        assert total == 500
        assert window == pytest.approx(0.5)

    def test_duration_shorter_than_count_wins(self) -> None:
        s = make(rate=1000, duration=2, count=50_000)
        assert plan(s, build_schedule(s, SOURCE), SOURCE) == (2000, 2)

    def test_unthrottled(self) -> None:
        assert plan(make(rate=0, count=7), None, SOURCE) == (7, 0.0)
        assert plan(make(rate=0, duration=3), None, SOURCE) == (None, 3)

    def test_replay_sends_the_recording_once_by_default(self) -> None:
        source = Source([b"a"] * 3, [None] * 3, times_s=[0, 1, 2], period_s=3)
        s = make(replay=Path("r.rec"))
        total, window = plan(s, build_schedule(s, source), source)
        assert (total, window) == (3, 3)

    @pytest.mark.parametrize("total", [0, 1, 7, 10, 11])
    def test_shards_split_seqs_without_overlap(self, total: int) -> None:
        counts = [shard_count(total, i, 3) for i in range(3)]
        assert sum(counts) == total
        assert counts == [len(range(i, total, 3)) for i in range(3)]
