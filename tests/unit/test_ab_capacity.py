"""Before a paired run: can the machine carry every codec's worker at the rate?"""

from __future__ import annotations

import math

from abrunner.lab import capacity
from abrunner.plan import Plan, Profile
from abrunner.report.paired import capacity_sentence
from abrunner.results import InProcess

CODECS = ("json+pydantic", "msgspec-json", "msgspec-msgpack", "protobuf")


def plan(
    rate: float, codecs: tuple[str, ...] = CODECS, *, max_mode: bool = False
) -> Plan:
    return Plan(
        codecs=codecs,
        profiles=(Profile("medium"),),
        rate=rate,
        duration=10.0,
        warmup=3.0,
        repeat=3,
        max_mode=max_mode,
        max_messages=1,
        partitions=4,
        baseline=codecs[0],
        out="x",
        mode="paired",
    )


def bench(us: float) -> list[InProcess]:
    return [
        InProcess(codec=c, profile="medium", decode_us=us / 2, decode_read_us=us)
        for c in CODECS
    ]


class TestCheck:
    """The sum of the workers' expected cores plus the generator's and the
    broker's must fit the machine's cores."""

    def test_fits(self) -> None:
        found = capacity.check(plan(20_000), bench(5.0), cores=2)
        assert found.fits
        each = (5.0 + capacity.WORKER_US) * 20_000 / 1e6
        assert math.isclose(found.workers["protobuf"], each)
        others = 4 * 20_000 * (capacity.LOADGEN_US + capacity.BROKER_US) / 1e6
        assert math.isclose(found.others, others)
        assert math.isclose(found.needed, 4 * each + others)
        assert "in-process" in found.basis

    def test_does_not_fit(self) -> None:
        found = capacity.check(plan(40_000), bench(30.0), cores=2)
        assert not found.fits
        assert "sequential" in capacity_sentence(found)

    def test_more_cores_fit(self) -> None:
        assert capacity.check(plan(40_000), bench(30.0), cores=16).fits

    def test_calibrates_without_bench(self) -> None:
        asked: list[Plan] = []

        def calibrate(p: Plan) -> list[InProcess]:
            asked.append(p)
            return bench(5.0)

        found = capacity.check(plan(20_000), [], cores=2, calibrate=calibrate)
        assert asked and found.fits and "calibration" in found.basis

    def test_no_figures_assumes_the_slowest(self) -> None:
        found = capacity.check(plan(20_000), [], cores=2, calibrate=lambda p: [])
        assert found.workers["protobuf"] == (capacity.UNKNOWN_US * 20_000 / 1e6)
        assert "no in-process figures" in found.basis

    def test_max_mode_is_never_paired(self) -> None:
        p = plan(20_000, max_mode=True)
        found = capacity.check(p, bench(1.0), cores=64)
        assert not found.fits and "--max" in found.basis

    def test_one_codec_is_never_paired(self) -> None:
        found = capacity.check(plan(20_000, ("protobuf",)), bench(1.0), cores=64)
        assert not found.fits and "one codec" in found.basis

    def test_names_the_load(self) -> None:
        found = capacity.check(plan(20_000), bench(5.0), cores=2)
        assert found.load is not None and found.load >= 0
        assert f"2 cores, load average {found.load:.1f} (" in capacity_sentence(found)
