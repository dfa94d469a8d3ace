"""Sequential runs rotate the codecs' order repeat by repeat, and say whether the
order showed; `--mode` chooses paired or sequential runs."""

from __future__ import annotations

import itertools
import math

import msgspec
import pytest

from abrunner.cli import _FLAGS, build_parser, plan_from_settings
from abrunner.config import TOOL, AbSettings
from abrunner.plan import Plan, Profile, rotations
from abrunner.report import order
from abrunner.results import CaseResult
from service.settings.cli_flags import load_from_args


def plan(*argv: str, environ: dict[str, str] | None = None) -> Plan:
    args = build_parser().parse_args(list(argv))
    return plan_from_settings(
        load_from_args(AbSettings, TOOL, args, _FLAGS, environ=environ or {})
    )


class TestRotations:
    """A balanced (Williams) rotation: every codec in every position, every codec
    right after every other equally often, the listed order first."""

    @pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
    def test_balanced(self, n: int) -> None:
        rows = rotations(n)
        assert rows[0] == list(range(n))
        assert all(sorted(r) == list(range(n)) for r in rows)
        for position in range(n):  # each codec as often in each position
            seen = [r[position] for r in rows]
            assert len(set(seen)) == n
            assert all(seen.count(c) == len(rows) // n for c in range(n))
        follows = [(r[i], r[i + 1]) for r in rows for i in range(n - 1)]
        counts = {p: follows.count(p) for p in itertools.permutations(range(n), 2)}
        assert len(set(counts.values())) == 1, counts

    def test_one_codec(self) -> None:
        assert rotations(1) == [[0]]

    def test_cases_rotate_by_repeat(self) -> None:
        p = plan(
            "--codecs",
            "json+pydantic,msgspec-json,msgspec-msgpack,protobuf",
            "--repeat",
            "4",
            "--mode",
            "sequential",
        )
        cases = p.cases()
        orders = [[c.codec for c in cases if c.repeat == r] for r in range(4)]
        assert orders[0] == list(p.codecs)
        assert len({tuple(o) for o in orders}) == 4
        firsts = {o[0] for o in orders}
        assert firsts == set(p.codecs)


class TestMode:
    """`--mode`, `AB_MODE` and `[ab] mode`; `--window` the paired windows."""

    def test_default_paired(self) -> None:
        assert plan().mode == "paired"

    def test_flag_and_env(self) -> None:
        assert plan("--mode", "sequential").mode == "sequential"
        assert plan(environ={"AB_MODE": "sequential"}).mode == "sequential"
        assert plan("--window-s", "2").window_s == 2.0

    def test_bad_mode_exits_2(self, capsys: pytest.CaptureFixture[str]) -> None:
        from abrunner.cli import main

        assert main(["--mode", "sideways"]) == 2
        assert "mode" in capsys.readouterr().err


def _result(codec: str, repeat: int, cpu: float) -> CaseResult:
    return CaseResult(codec=codec, profile="medium", repeat=repeat, cpu_us_per_msg=cpu)


class TestOrderEffect:
    """The report says whether a case's position in its repeat moved its CPU."""

    CODECS = ("json+pydantic", "msgspec-json", "msgspec-msgpack", "protobuf")

    def _results(self, drift: float) -> tuple[Plan, list[CaseResult]]:
        p = Plan(
            codecs=self.CODECS,
            profiles=(Profile("medium"),),
            rate=1.0,
            duration=1.0,
            warmup=1.0,
            repeat=4,
            max_mode=False,
            max_messages=1,
            partitions=1,
            baseline=self.CODECS[0],
            out="x",
            mode="sequential",
            rotated=True,
        )
        base = dict(zip(self.CODECS, (20.0, 10.0, 12.0, 8.0), strict=True))
        noise = [1.0, 1.01, 0.99, 1.005, 0.995, 1.0, 1.01, 0.99]
        found = []
        for i, case in enumerate(p.cases()):
            position = p.position(case)
            cpu = base[case.codec] * (1 + drift) ** position * noise[i % len(noise)]
            found.append(_result(case.codec, case.repeat, cpu))
        return p, found

    def test_visible(self) -> None:
        p, results = self._results(0.08)
        effect = order.effect(p, results, "medium")
        assert effect is not None and effect.visible
        assert math.isclose(effect.per_position, 0.08, abs_tol=0.02)
        assert "visible" in order.sentence(effect)

    def test_not_visible(self) -> None:
        p, results = self._results(0.0)
        effect = order.effect(p, results, "medium")
        assert effect is not None and not effect.visible
        assert "no order effect" in order.sentence(effect)

    def test_needs_rotation(self) -> None:
        p, results = self._results(0.0)
        one = [r for r in results if r.repeat == 0]
        assert order.effect(p, one, "medium") is None


class TestOlderReports:
    """A report written before the rotation ran every repeat in the listed order:
    no positions are invented for it, and no order effect is claimed."""

    def test_listed_order(self) -> None:
        p = plan("--repeat", "4", "--codecs", "msgspec-json,protobuf")
        old = msgspec.structs.replace(p, rotated=False)
        assert [c.codec for c in old.cases()] == ["msgspec-json", "protobuf"] * 4
        decoded = msgspec.json.decode(
            msgspec.json.encode(p).replace(b',"rotated":true', b""), type=Plan
        )
        assert not decoded.rotated
