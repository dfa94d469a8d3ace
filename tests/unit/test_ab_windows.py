"""A paired run's window statistics: ratios block by block, and the reasons given
where the windows cannot support a verdict."""

from __future__ import annotations

import math
import random

import pytest

from abrunner.report import paired
from abrunner.results import Ratio
from abrunner.windowed import Paired, Window

BOUNDS = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]


def window(
    codec: str,
    repeat: int,
    index: int,
    *,
    us: float,
    messages: float = 20_000,
    p99_bucket: int = 3,
    lag: float = 0.0,
) -> Window:
    """A 1 s window: `us` CPU per message, 99.5 % of the latencies in bucket 1,
    the rest in `p99_bucket`."""
    e2e = [0.0] * (len(BOUNDS) + 1)
    e2e[1] = messages * 0.985
    e2e[p99_bucket] += messages * 0.015
    return Window(
        codec=codec,
        profile="medium",
        repeat=repeat,
        index=index,
        seconds=1.0,
        messages=messages,
        cpu_s=us * messages / 1e6,
        lag=lag,
        e2e=e2e,
    )


def run(pairs: list[tuple[Window, Window]]) -> Paired:
    return Paired(window_s=1.0, bounds=BOUNDS, windows=[w for p in pairs for w in p])


def by_figure(found: list[Ratio]) -> dict[str, Ratio]:
    return {r.figure: r for r in found}


class TestCancels:
    """A slowdown that hits both sides of a window cancels in its ratio."""

    def test_common_noise_cancels(self) -> None:
        rng = random.Random(35)
        pairs = []
        for i in range(30):
            machine = rng.uniform(0.7, 1.6)  # the shared machine's mood: +-50 %
            own = rng.gauss(1.0, 0.02)
            pairs.append(
                (
                    window("base", i // 10, i % 10, us=25.0 * machine),
                    window("new", i // 10, i % 10, us=10.0 * machine * own),
                )
            )
        found = by_figure(paired.ratios(run(pairs), "medium", "base", "new"))
        cpu = found["cpu_us_per_msg"]
        assert cpu.low is not None and cpu.high is not None, cpu
        assert math.isclose(cpu.ratio, 0.4, rel_tol=0.02)
        assert cpu.high / cpu.low < 1.05  # within +-2.5 %, though the machine moved 2x
        assert cpu.verdict == "better"
        assert cpu.pairs == 5  # 30 windows: 5 blocks of 6

    def test_p99_per_window(self) -> None:
        pairs = [
            (
                window("base", 0, i, us=20.0, p99_bucket=5),
                window("new", 0, i, us=20.0, p99_bucket=3),
            )
            for i in range(16)
        ]
        p99 = by_figure(paired.ratios(run(pairs), "medium", "base", "new"))[
            "e2e_p99_ms"
        ]
        assert p99.verdict == "better", p99
        assert p99.why is None


class TestReasons:
    """No interval where the data cannot support one, and the reason why."""

    def test_too_few_windows(self) -> None:
        pairs = [
            (window("base", 0, i, us=20.0), window("new", 0, i, us=10.0))
            for i in range(5)
        ]
        for r in paired.ratios(run(pairs), "medium", "base", "new"):
            assert r.low is None and r.verdict is None
            assert r.why is not None and "too few windows: 5" in r.why

    def test_stall_on_one_side(self) -> None:
        pairs = [
            (
                window("base", 0, i, us=20.0),
                window("new", 0, i, us=10.0, messages=20_000 if i < 4 else 100),
            )
            for i in range(12)
        ]
        for r in paired.ratios(run(pairs), "medium", "base", "new"):
            assert r.verdict is None
            assert r.why is not None and "stall" in r.why and "new in 8" in r.why

    def test_stalled_windows_left_out(self) -> None:
        pairs = [
            (
                window("base", 0, i, us=20.0),
                window(
                    "new",
                    0,
                    i,
                    us=10.0 if i != 3 else 500.0,
                    messages=20_000 if i != 3 else 10,
                ),
            )
            for i in range(16)
        ]
        cpu = by_figure(paired.ratios(run(pairs), "medium", "base", "new"))[
            "cpu_us_per_msg"
        ]
        assert math.isclose(cpu.ratio, 0.5, rel_tol=1e-6)

    def test_lagging_side_has_no_p99_verdict(self) -> None:
        pairs = [
            (
                window("base", 0, i, us=40.0, lag=50_000.0),
                window("new", 0, i, us=10.0),
            )
            for i in range(16)
        ]
        found = by_figure(paired.ratios(run(pairs), "medium", "base", "new"))
        assert found["cpu_us_per_msg"].verdict == "better"
        p99 = found["e2e_p99_ms"]
        assert p99.verdict is None
        assert p99.why is not None and "base lagged" in p99.why


@pytest.mark.parametrize(("a", "b", "side"), [(100, 100, None), (100, 40, "new")])
def test_stalls(a: float, b: float, side: str | None) -> None:
    assert (
        paired.stalls(
            window("base", 0, 0, us=1.0, messages=a),
            window("new", 0, 0, us=1.0, messages=b),
        )
        == side
    )
