"""Pools and `--max` backlogs bounded by bytes; the broker's disk checked first."""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any, cast

import msgspec
import pytest
from rich.console import Console

import codecbench
from abrunner import cli
from abrunner.lab import inprocess_bench, payload_sizing, runner
from abrunner.lab.processes import LoadgenProcess
from abrunner.plan import Plan, Profile
from tests.unit.test_ab_report import report

SWEEP = (Profile("small"), Profile("medium"), Profile("large", 10_000))
HUGE = Profile("large", 1_500_000)


def plan(*profiles: Profile, **kw: Any) -> Plan:
    base = report([]).plan
    return msgspec.structs.replace(base, profiles=profiles, **kw)


def test_pools_hold_at_most_64_mb_of_payloads() -> None:
    assert [payload_sizing.pool_size(p) for p in SWEEP] == [1000, 1000, 1000]
    assert payload_sizing.pool_size(Profile("large")) == 1000  # the default 64 KB
    assert payload_sizing.pool_size(Profile("large", 100_000)) == 671
    assert payload_sizing.pool_size(HUGE) == 44


def test_backlogs_hold_at_most_2_gib_of_payloads() -> None:
    p = plan(*SWEEP, HUGE, max_mode=True, max_messages=200_000)
    assert [payload_sizing.backlog(p, x) for x in (*SWEEP, HUGE)] == [
        200_000,
        200_000,
        200_000,
        1431,
    ]
    assert payload_sizing.backlog(p, Profile("large", 100_000)) == 21_474


def test_a_disk_too_small_is_one_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = plan(HUGE, max_mode=True, max_messages=200_000)
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(
        shutil, "disk_usage", lambda _: usage._replace(free=2_000_000_000)
    )
    problem = payload_sizing.disk_problem(p, tmp_path / "not-yet")
    assert problem == (
        "--max: the largest backlog needs ~5.4 GB free on the broker's disk "
        f"({tmp_path / 'not-yet'}), 2.0 GB are: lower --max-messages or "
        "--large-bytes, or free some space"
    )
    assert payload_sizing.disk_problem(plan(HUGE), tmp_path) is None  # not --max


def test_codec_ab_checks_the_disk_before_the_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr(
        payload_sizing, "disk_problem", lambda plan, directory: "--max: full"
    )
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.setattr(runner, "run", lambda *a: pytest.fail("ran"))
    monkeypatch.chdir(tmp_path)  # no broker recorded here: the run would start one
    args = ["--max", "--profiles", "large", "--large-bytes", "1500000", "--no-bench"]
    assert cli.main([*args, "--out", str(tmp_path / "ab")]) == 2
    assert capsys.readouterr().err == "codec-ab: --max: full\n"


def test_the_bench_and_the_load_generator_use_the_bounded_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[int] = []

    def fake_run(*args: Any, pool_size: int, **kw: Any) -> Any:
        seen.append(pool_size)
        return type("R", (), {"results": []})()

    monkeypatch.setattr(codecbench, "run", fake_run)
    inprocess_bench.measure(plan(Profile("medium"), HUGE), lambda _: None)
    assert seen == [1000, 44]
    proc = LoadgenProcess("127.0.0.1:1", "t", "protobuf", HUGE, "r", rate=0, count=1)
    try:
        cmd = [str(a) for a in cast("list[str]", proc.proc.args)]
        assert cmd[cmd.index("--pool-size") + 1] == "44"
    finally:
        proc.close()


@pytest.mark.parametrize("terminal", [True, False])
def test_the_bench_shows_its_progress_on_a_terminal_only(
    monkeypatch: pytest.MonkeyPatch, terminal: bool
) -> None:
    def fake_run(codecs: Any, profiles: Any, *, progress: Any, **kw: Any) -> Any:
        for codec in codecs:
            progress(f"{codec} {profiles[0]}")
        return type("R", (), {"results": []})()

    monkeypatch.setattr(codecbench, "run", fake_run)
    out = io.StringIO()
    console = Console(file=out, force_terminal=terminal, width=100)
    assert inprocess_bench.shown(plan(Profile("medium")), console) == []
    text = out.getvalue()
    assert ("codec-bench: protobuf medium" in text) is terminal
    assert ("  protobuf medium\n" in text) is not terminal
