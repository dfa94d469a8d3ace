"""Fell behind only when lag or throughput say so: the load window is the producer's."""

from __future__ import annotations

import pytest

from abrunner.lab.case_figures import fell_behind, figures, window_rate
from abrunner.plan import Case, Profile
from tests.unit.test_ab_measure import snapshot

CASE = Case("msgspec-json", Profile("small"), 0)


def test_a_worker_at_lag_0_is_not_behind_for_its_load_generators_exit() -> None:
    # 200 msg/s for 3 s, every message handled (most of them dead-lettered) as it
    # came; the load generator's process exits 0.7 s after its last message.
    s0 = snapshot(100.0, 1, [])
    points = [(100.0 + 0.5 * k, 1.0 + min(100 * k, 599)) for k in range(1, 9)]
    s1 = snapshot(103.7, 600, [])
    result = figures(CASE, s0, s1, s1, [], [0.0])
    assert result.throughput == pytest.approx(599 / 3.7)  # < 90 % of 200: "behind"
    rate = window_rate(s0, points, 3.0)
    assert rate == pytest.approx(200, rel=0.01)
    assert not fell_behind(lag_end=0, throughput=rate, produced=200.0, rate=200)


def test_the_window_end_is_interpolated() -> None:
    s0 = snapshot(10.0, 0, [])
    assert window_rate(s0, [(11.0, 100), (13.0, 300)], 2.0) == pytest.approx(100)
    assert window_rate(s0, [(11.0, 100)], 2.0) is None  # the samples end first
    assert window_rate(s0, [(11.0, 100)], 0.0) is None


@pytest.mark.parametrize(
    ("lag", "throughput", "behind"),
    [(0, 199.0, False), (0, 150.0, True), (5_000, 200.0, True), (900, 190.0, False)],
)
def test_fell_behind(lag: float, throughput: float, behind: bool) -> None:
    assert (
        fell_behind(lag_end=lag, throughput=throughput, produced=200.0, rate=200)
        is behind
    )
