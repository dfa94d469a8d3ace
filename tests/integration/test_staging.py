"""`codec-ab staging` on live sides scraped by a real Prometheus.

One stack for the module (tests/deploy/staging_stack.py): one topic at 3,000 msg/s of
~1 KB JSON orders, five sides reading it in their own consumer groups, Debian's Prometheus with the
shipped config (targets and 1 s intervals changed) and rules:

- A: json+pydantic, one worker; B and D: msgspec-json, one worker each (A/A);
- C: msgspec-json, two workers (figures summed over the processes);
- E: msgspec-json, one worker restarted half-way through the window.

The last test stops the sides and runs a lab `codec-ab` of A and B's codecs at the
same rate, and compares its CPU us/msg with the staging report's.

The window is 72 s of 4 s slices (18 slices: 4 blocks of 4). The report's figures are
printed (`-s` shows them); nothing here asserts on a time.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest

from abrunner import cli
from abrunner.lab.worker_probe import cpu_seconds, scrape
from service.lifecycle.child_processes import free_ports
from tests.deploy.staging_stack import RATE, Stack, running
from tests.deploy.support import GRAFANA_DIR, panel_queries

pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.slow,
    # The window's CPU figures (verdicts, the lab agreement) would move with a test
    # running beside them.
    pytest.mark.exclusive,
]

WINDOW_S: Final = 72
SLICE: Final = "4s"
SIDES: Final = {
    "A": ("json+pydantic", 1),
    "B": ("msgspec-json", 1),
    "C": ("msgspec-json", 2),
    "D": ("msgspec-json", 1),
    "E": ("msgspec-json", 1),
}
A_A_SPREAD: Final = 0.10
"""How far two identical sides' CPU us/msg may differ with a verdict. Measured on this
machine: 0.95x (interval 0.91-0.99, "better") for B/D in one CI run with five sides,
the broker and Prometheus on 2 cores; two identical bare loops in one fixed-rate
bench differ by up to 4 % (`bench_worker --twin-bare`), runs by more."""
PROC_TOLERANCE: Final = 0.10
"""Prometheus's CPU us/msg of a side against /proc's over the same window (the lab
run's accounting): both read the same process's counters, so only the window edges
(scrape times, `increase()`'s extrapolation) differ."""


@dataclass(frozen=True)
class Live:
    """The stack and the window measured on it."""

    stack: Stack
    start: float
    end: float
    proc_cpu_us: dict[str, float]
    """Sides B and C: CPU us/msg over the window from /proc and /metrics, summed
    over the side's processes (the lab run's accounting)."""
    tmp: Path


def _proc(stack: Stack) -> dict[str, tuple[float, float]]:
    """Sides B and C: CPU seconds and messages handled, summed over processes."""
    found = {}
    for side in ("B", "C"):
        workers = stack.sides[side]
        cpu = sum(cpu_seconds(w.pid) for w in workers)
        msgs = sum(scrape(w.port).total("worker_messages_total") for w in workers)
        found[side] = (cpu, msgs)
    return found


@pytest.fixture(scope="module")
def live(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    """The sides running through a 72 s window, E restarted half-way."""
    tmp = tmp_path_factory.mktemp("staging-stack")
    with running(kafka_bootstrap, tmp, SIDES) as stack:
        time.sleep(4)  # every side past its first batches
        start = time.time()
        before = _proc(stack)
        time.sleep(WINDOW_S / 2)
        (restarted,) = stack.sides["E"]
        restarted.stop()
        restarted.start()
        time.sleep(start + WINDOW_S - time.time())
        end = time.time()
        after = _proc(stack)
        time.sleep(3)  # Prometheus scrapes past the window's end
        proc = {
            side: 1e6 * (after[side][0] - cpu) / (after[side][1] - msgs)
            for side, (cpu, msgs) in before.items()
        }
        yield Live(stack, start, end, proc, tmp)


def staging(
    live: Live, out: str, *flags: str, start: float | None = None
) -> tuple[int, str, str, dict[str, Any]]:
    """`codec-ab staging` on the live window: status, stdout, stderr, report.json."""
    begin = live.start if start is None else start
    argv = ["staging", "--prometheus", live.stack.prometheus, "--slice", SLICE]
    argv += ["--start", f"{begin:.3f}", "--end", f"{begin + WINDOW_S:.3f}"]
    argv += ["--out", str(live.tmp / out), *flags]
    stdout, stderr = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("sys.stdout", stdout)
        mp.setattr("sys.stderr", stderr)
        status = cli.main(argv)
    path = live.tmp / out / "report.json"
    report = json.loads(path.read_text()) if status == 0 else {}
    print(stdout.getvalue(), stderr.getvalue())  # the figures, for the record
    return status, stdout.getvalue(), stderr.getvalue(), report


def ratio(report: dict[str, Any], figure: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [r for r in report["ratios"] if r["figure"] == figure]
    assert len(found) == 1, report["ratios"]
    return found[0]


def row(report: dict[str, Any], key: str) -> dict[str, Any]:
    rows: dict[str, Any] = next(iter(report["summary"].values()))
    figures: dict[str, Any] = rows[key]["figures"]
    return figures


def whole_window_cpu_us(report: dict[str, Any], side: str, last: int = 0) -> float:
    """CPU us/msg over every slice of `side` (or its `last` ones): total CPU over
    total messages."""
    first = report["staging"]["slices"] - last if last else 0
    slices = [
        r
        for r in report["staging"]["slice_results"]
        if r["codec"][0] == side
        and r.get("cpu_us_per_msg") is not None
        and r["repeat"] >= first
    ]
    cpu = sum(r["cpu_us_per_msg"] * r["processed"] for r in slices)
    return float(cpu / sum(r["processed"] for r in slices))


class TestVerdict:
    """json+pydantic (A) vs msgspec-json (B) on the same messages."""

    def test_msgspec_json_is_better_on_cpu_per_message(self, live: Live) -> None:
        """B/A CPU us/msg: `better`, with a 95 % interval entirely below 1."""
        status, out, err, report = staging(live, "a-b")
        assert status == 0, err
        cpu = ratio(report, "cpu_us_per_msg")
        assert cpu["verdict"] == "better", cpu
        assert cpu["low"] <= cpu["ratio"] <= cpu["high"] < 1
        assert cpu["pairs"] == report["staging"]["blocks"] == 4
        assert report["staging"]["slices"] == 18
        assert set(next(iter(report["summary"].values()))) == {
            "A: json+pydantic",
            "B: msgspec-json",
        }
        assert "better" in out and "Ratios B/A" in out
        assert (
            (live.tmp / "a-b" / "report.md")
            .read_text()
            .startswith("# Codec A/B staging report")
        )
        again = io.StringIO()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("sys.stdout", again)
            path = str(live.tmp / "a-b")
            assert cli.main(["--compare", path, path]) == 0
        assert "result: no regression" in again.getvalue()

    def test_cpu_per_message_agrees_with_proc_accounting(self, live: Live) -> None:
        """Side B's CPU us/msg from Prometheus is /proc's over the same window."""
        status, _, err, report = staging(live, "a-b-proc")
        assert status == 0, err
        prom = whole_window_cpu_us(report, "B")
        proc = live.proc_cpu_us["B"]
        print(f"side B CPU us/msg: Prometheus {prom:.2f}, /proc {proc:.2f}")
        assert abs(prom / proc - 1) < PROC_TOLERANCE


class TestDashboard:
    """The Verdict row's recording rules and the report say the same."""

    def test_verdict_rules_agree_with_the_reports_last_minute(self, live: Live) -> None:
        """B/A CPU per message from the rules at the window's end is the report's
        over its last minute (15 slices of 4 s), within 10 %; the Verdict row's
        panels return data on two live sides."""
        status, out, err, report = staging(live, "a-b-rules")
        assert status == 0, err
        shown = report["staging"]["dashboard"]
        rules = shown["B"]["cpu_us_per_msg"] / shown["A"]["cpu_us_per_msg"]
        last = {side: whole_window_cpu_us(report, side, last=15) for side in ("A", "B")}
        print(f"B/A CPU us/msg: rules {rules:.3f}, report {last['B'] / last['A']:.3f}")
        assert abs(rules / (last["B"] / last["A"]) - 1) < 0.10
        assert "Verdict row" in out
        dash = json.loads((GRAFANA_DIR / "dashboards" / "codec-ab.json").read_text())
        verdict = [e for _, e in panel_queries(dash) if re.match(r"(ab|side):", e)]
        assert len(verdict) >= 2
        for expr in verdict:
            assert live.stack.query(expr), expr


class TestSides:
    """A/A, a side of two processes, a side restarted."""

    def test_a_a_has_no_detectable_difference(self, live: Live) -> None:
        """B vs D, both msgspec-json: an interval around 1, the same messages."""
        status, out, err, report = staging(
            live, "b-d", "--a", 'side="B"', "--b", 'side="D"'
        )
        assert status == 0, err
        cpu = ratio(report, "cpu_us_per_msg")
        # Two identical processes on a shared 2-core machine differ by a few per cent
        # for reasons that are not the codec (which core runs them, beside the broker
        # or not, their memory layout), and a long window makes the interval narrow
        # enough to say so: the interval must sit around 1 (its width follows the
        # machine's load), and any verdict other than no detectable difference must
        # be for a difference within that spread (`A_A_SPREAD`).
        assert 0.8 < cpu["low"] <= cpu["ratio"] <= cpu["high"] < 1.25, cpu
        assert (
            cpu["verdict"] == "no detectable difference"
            or abs(cpu["ratio"] - 1) < A_A_SPREAD
        ), cpu
        assert report["staging"]["same_messages"] is True, report["staging"]
        assert "saw the same messages" in out and "A/A" in out

    def test_two_processes_are_summed(self, live: Live) -> None:
        """C (two processes) handles the whole topic, as B does, and its CPU per
        message is the processes' summed CPU over their summed messages (/proc)."""
        status, _, err, report = staging(
            live, "b-c", "--a", 'side="B"', "--b", 'side="C"'
        )
        assert status == 0, err
        one, two = report["staging"]["sides"]
        assert (one["processes"], two["processes"]) == (1, 2)
        handled = {
            side: sum(
                r["processed"]
                for r in report["staging"]["slice_results"]
                if r["codec"][0] == side
            )
            for side in "AB"
        }  # the whole topic each (averaged over processes it would be half); the
        # sides' lags at the window's edges differ by a few seconds of traffic
        assert abs(handled["B"] / handled["A"] - 1) < 0.15, handled
        assert row(report, "B: msgspec-json")["throughput"]["median"] > 0.8 * RATE
        prom = whole_window_cpu_us(report, "B")
        proc = live.proc_cpu_us["C"]
        print(
            f"side C (two processes) CPU us/msg: Prometheus {prom:.2f}, /proc {proc:.2f}"
        )
        assert abs(prom / proc - 1) < PROC_TOLERANCE
        cpu = ratio(report, "cpu_us_per_msg")["ratio"]
        # Not asserted: each process costs CPU when idle (polls, its lag gauge, the
        # scrapes), so two processes at a low rate cost more per message than one.
        print(f"two processes over one, CPU us/msg: {cpu:.2f}x")

    def test_restart_is_reported_without_a_negative_rate(self, live: Live) -> None:
        """E restarted mid-window: a restart warning, every figure >= 0, exit 0."""
        status, out, err, report = staging(
            live, "b-e", "--a", 'side="B"', "--b", 'side="E"'
        )
        assert status == 0, err
        assert report["staging"]["sides"][1]["restarts"] >= 1
        assert "side B restarted" in out
        for result in report["staging"]["slice_results"] + report["results"]:
            for key, value in result.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    assert value >= 0, (key, result)


class TestBadInput:
    """One line on stderr, exit 2 (bad input) or 1 (Prometheus unreachable)."""

    @pytest.mark.parametrize(
        ("flags", "status", "words"),
        [
            (("--b", 'side="Z"'), 2, "matches no worker"),
            (("--b", 'side=~"A|B"'), 2, "runs 2 codecs"),
            (("--b", "side=="), 2, "Prometheus refused it"),
        ],
    )
    def test_bad_selector(
        self, live: Live, flags: tuple[str, ...], status: int, words: str
    ) -> None:
        done, _, err, _ = staging(live, "bad", *flags)
        assert done == status and words in err, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err

    def test_window_without_data(self, live: Live) -> None:
        done, _, err, _ = staging(live, "early", start=live.start - 3600)
        assert done == 2 and "no data in the window" in err, err
        assert len(err.strip().splitlines()) == 1

    def test_unreachable_prometheus(self, live: Live) -> None:
        (port,) = free_ports(1)
        argv = ["staging", "--prometheus", f"http://127.0.0.1:{port}"]
        argv += ["--window", "60s", "--slice", "4s", "--out", str(live.tmp / "x")]
        stderr = io.StringIO()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("sys.stderr", stderr)
            assert cli.main(argv) == 1
        assert "Prometheus unreachable" in stderr.getvalue()
        assert len(stderr.getvalue().strip().splitlines()) == 1


LAB_TOLERANCE: Final = 0.30
"""A side's CPU us/msg in the staging report against a lab `codec-ab` run of the same
codec, rate and payloads. Not the same measurement: the staging sides share the two
cores with five other workers, the load generator and Prometheus, the lab run's
worker with the broker and its load generator only. Measured apart on this machine:
lab 28.1 / 15.7 us/msg (json+pydantic / msgspec-json) against staging 28.0-29.9 /
15.3-17.9 on a loaded machine; in this test on a quiet one, lab 48.4 / 28.1 against
staging 42.8 / 25.6 (staging / lab 0.89 / 0.91). Within 15 %; the bound is twice that."""


class TestLabAgreement:
    """Last in the module: it stops the sides, then runs the lab A/B alone."""

    def test_cpu_per_message_agrees_with_a_lab_run(
        self, live: Live, kafka_bootstrap: str
    ) -> None:
        status, _, err, report = staging(live, "a-b-lab")
        assert status == 0, err
        staged = {
            "json+pydantic": whole_window_cpu_us(report, "A"),
            "msgspec-json": whole_window_cpu_us(report, "B"),
        }
        for process in live.stack.processes():  # Prometheus is not needed any more
            process.stop()
        out = live.tmp / "lab"
        argv = ["--bootstrap-servers", kafka_bootstrap]
        argv += ["--codecs", ",".join(staged), "--rate", str(RATE)]
        argv += ["--duration", "20", "--warmup", "3", "--partitions", "2"]
        argv += ["--no-bench", "--out", str(out)]
        assert cli.main(argv) == 0
        lab = json.loads((out / "report.json").read_text())
        rows = next(iter(lab["summary"].values()))
        for codec, cpu in staged.items():
            in_lab = rows[codec]["figures"]["cpu_us_per_msg"]["median"]
            print(f"{codec} CPU us/msg: staging {cpu:.2f}, lab {in_lab:.2f}")
            assert abs(cpu / in_lab - 1) < LAB_TOLERANCE, (codec, cpu, in_lab)
