"""`codec-ab staging` against a fake Prometheus HTTP API: slicing, blocks, intervals,
warnings and the error paths (the real Prometheus: tests/integration/test_staging.py).

The fake answers exactly the expressions `abrunner.staging.slices` renders for the two
sides' selectors, from per-slice figures the test chooses.
"""

from __future__ import annotations

import io
import json
import math
import random
import re
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from abrunner import cli
from abrunner.report import compare, tables as report_module
from abrunner.staging import backlog, cli as staging_cli, counters, figures as sf
from abrunner.staging.slices import (
    BUCKETS,
    COUNTERS,
    EXPRESSIONS,
    GAUGES,
    HISTOGRAMS,
    INFO,
    INSTANCES,
    STARTS,
    TOPICS,
    render,
)
from service.lifecycle.child_processes import free_ports

START = 1_800_000_000.0
SLICE = 10.0
SCRAPE = 1.0
A, B = 'side="A"', 'side="B"'
JOB = "codec-worker"


@dataclass
class FakeSide:
    """One side's per-slice figures (None: no sample in that slice).

    `lag` is the backlog at every step; `lag_at` overrides it at given seconds
    after the window's start.
    """

    codec: str = "json+pydantic"
    codecs: tuple[str, ...] = ()
    messages: list[float | None] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)
    bytes_per_msg: float = 900.0
    lag: float = 10.0
    lag_at: dict[int, float] = field(default_factory=dict)
    e2e_s: dict[int, float] = field(default_factory=dict)
    """Slice -> the latency of its messages (default 4 ms)."""
    starts: list[float] = field(default_factory=list)
    instance: str = "a:9100"
    consumer_errors: float = 0.0
    topic: str = "orders"

    def increments(self, key: str) -> list[tuple[dict[str, str], list[float | None]]]:
        """Per series of counter `key`: (labels, its gain per slice)."""
        m = self.messages
        per: dict[str, Any] = {
            "messages": lambda i, x: x,
            "bytes": lambda i, x: x * self.bytes_per_msg,
            "cpu_seconds": lambda i, x: x * self.cpu_us[i] / 1e6,
            "gc_seconds": lambda i, x: 0.001,
            "gc_collections": lambda i, x: 2,
            "decode_sum": lambda i, x: x / 32 * 20e-6,
            "decode_count": lambda i, x: x / 32,
        }
        if key == "consumer_errors" and self.consumer_errors:
            per[key] = lambda i, x: self.consumer_errors
        labels = {"job": JOB, "instance": self.instance}
        if key in per:
            gains = [None if x is None else per[key](i, x) for i, x in enumerate(m)]
            return [(labels, gains)]
        if key in HISTOGRAMS:  # every message at 4 ms (e2e) or 20 us (decode)
            found = []
            bounds = ("0.005", "0.1", "60") if key == "e2e" else ("0.00002",)
            for le in (*bounds, "+Inf"):
                gains = [
                    None
                    if x is None
                    else x
                    if le == "+Inf"
                    or key != "e2e"
                    or self.e2e_s.get(i, 0.004) <= float(le)
                    else 0.0
                    for i, x in enumerate(m)
                ]
                found.append(({**labels, "le": le}, gains))
            return found
        return []  # dead letters, consumer errors: never created

    def lag_now(self, at: float) -> float:
        return self.lag_at.get(round(at - START), self.lag)


def raw_samples(
    gains: list[float | None],
    starts: list[float] = (),  # type: ignore[assignment]
) -> list[list[Any]]:
    """A counter's raw samples from its gain per slice: one a second, the gain
    spread evenly over the slice's scrapes, a sample before the window at 0; the
    counter starts again from 0 at each of `starts` (a restart)."""
    values: list[list[Any]] = [[START - 5, "0"]]
    total = 0.0
    per = round(SLICE / SCRAPE)
    for i, gained in enumerate(gains):
        if gained is None:
            continue
        for k in range(1, per + 1):
            at = START + i * SLICE + k * SCRAPE
            if any(at - SCRAPE < t <= at for t in starts):
                total = 0.0
            total += gained / per
            values.append([at, repr(total)])
    return values


def side(
    codec: str, cpu_us: float, n: int, seed: int, rate: float = 1000.0
) -> FakeSide:
    """A side at `rate` msg/s and about `cpu_us` CPU us/msg (5 % noise)."""
    rng = random.Random(seed)
    return FakeSide(
        codec=codec,
        messages=[rate * SLICE] * n,
        cpu_us=[cpu_us * rng.uniform(0.95, 1.05) for _ in range(n)],
        instance=f"{codec}-{seed}:9100",
    )


RAW = re.compile(r"^(\w+)\{(.*)\}\[(\d+)s\]$")
"""An instant query of raw samples: `metric{selector}[Ns]`."""


class Fake:
    """The fake server's state: the sides by selector and the window's slices.

    `raw` overrides what the raw-sample queries answer: (metric, side) -> series.
    """

    def __init__(self, sides: dict[str, FakeSide], n: int) -> None:
        self.sides, self.n = sides, n
        self.refuse: set[str] = set()
        self.raw: dict[tuple[str, str], list[dict[str, Any]]] = {}

    def at(self, i: int) -> float:
        return START + (i + 1) * SLICE

    def instant(self, query: str) -> Any:
        if (found := RAW.match(query)) is not None:
            return "matrix", self._raw(found[1], found[2])
        query = re.sub(r"\[[0-9]+m?s\]", f"[{self.n * SLICE:g}s]", query)
        for sel, s in self.sides.items():
            span = self.n * SLICE
            if query == render(INFO, sel, span):
                if not any(m is not None for m in s.messages) and s.messages:
                    return "vector", [
                        _sample({"codec": s.codec, "schema": "medium"}, 1)
                    ]
                codecs = s.codecs or (s.codec,)
                return "vector", [
                    _sample({"codec": c, "schema": "medium"}, 1) for c in codecs
                ]
            if query == render(TOPICS, sel, span):
                return "vector", [_sample({"topic": s.topic, "partition": "0"}, 1)]
            if query == render(INSTANCES, sel, span):
                return "vector", [_sample({"job": JOB, "instance": s.instance}, 1)]
        return "vector", []

    def _raw(self, metric: str, selector: str) -> list[dict[str, Any]]:
        for sel, s in self.sides.items():
            mine = sel == selector or (
                metric.startswith("process_")
                and re.escape(s.instance) in selector.replace("\\\\", "\\")
            )
            if not mine:
                continue
            if (metric, sel) in self.raw:
                return self.raw[(metric, sel)]
            key = next(
                (k for k, v in {**COUNTERS, **BUCKETS}.items() if v == metric), ""
            )
            return [
                {"metric": labels, "values": raw_samples(gains, s.starts)}
                for labels, gains in s.increments(key)
            ]
        return []

    def ranged(self, query: str, start: float, end: float, step: float) -> list[Any]:
        for sel, s in self.sides.items():
            if query == render(STARTS, sel, SLICE):
                points = [(START - 100, START - 100)] + [
                    (t + 1, t) for t in s.starts
                ]  # (evaluated at, start time)
                return [
                    {
                        "metric": {"job": JOB, "instance": s.instance},
                        "values": [[at, str(v)] for at, v in points],
                    }
                ]
            if query == backlog.LAG.replace("{S}", "{" + sel + "}"):
                steps = round((end - start) / step)
                times = [start + k * step for k in range(steps + 1)]
                return [
                    {"metric": {}, "values": [[t, str(s.lag_now(t))] for t in times]}
                ]
            for key in GAUGES:
                if query == render(EXPRESSIONS[key], sel, SLICE):
                    value = 80 * 2**20 if key == "rss_bytes" else 1
                    return [
                        {
                            "metric": {},
                            "values": [
                                [self.at(i), str(value)]
                                for i, m in enumerate(s.messages)
                                if m is not None
                            ],
                        }
                    ]
        raise AssertionError(f"unexpected query {query}")


def _sample(labels: dict[str, str], value: float) -> dict[str, Any]:
    return {"metric": labels, "value": [START, str(value)]}


@pytest.fixture(autouse=True)
def no_charts(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Charts (matplotlib, ~1 s a report) in one test only."""
    if request.node.name != "test_cheaper_side_b_is_better_with_an_interval_below_one":
        monkeypatch.setattr(staging_cli, "charts", lambda report, out: [])


@pytest.fixture
def prometheus() -> Iterator[tuple[str, list[Fake]]]:
    """A fake Prometheus on 127.0.0.1; the test puts its `Fake` in the list."""
    holder: list[Fake] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            url = urllib.parse.urlparse(self.path)
            params = dict(urllib.parse.parse_qsl(url.query))
            fake = holder[0]
            query = params.get("query") or params.get("match[]", "")
            if any(bad in query for bad in fake.refuse):
                return self._send(400, {"status": "error", "error": "parse error"})
            data: Any
            if url.path.endswith("/query_range"):
                times = [float(params[k]) for k in ("start", "end", "step")]
                data = {"resultType": "matrix", "result": fake.ranged(query, *times)}
            elif url.path.endswith("/query"):
                kind, result = fake.instant(query)
                data = {"resultType": kind, "result": result}
            else:  # /series: every selector the fake knows exists somewhere
                known = any(sel in query for sel in fake.sides)
                data = [{"__name__": "worker_info"}] if known else []
            self._send(200, {"status": "success", "data": data})

        def _send(self, code: int, body: Any) -> None:
            raw = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", holder
    finally:
        server.shutdown()
        server.server_close()


def run(
    url: str, tmp: Path, n: int, *extra: str
) -> tuple[int, str, str, dict[str, Any]]:
    """`codec-ab staging` over the fake's n slices: status, stdout, stderr, report."""
    out = tmp / "staging"
    argv = ["staging", "--prometheus", url, "--start", str(START)]
    argv += ["--end", str(START + n * SLICE), "--slice", f"{SLICE:g}s"]
    argv += ["--out", str(out), *extra]
    stdout, stderr = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("sys.stdout", stdout)
        mp.setattr("sys.stderr", stderr)
        status = cli.main(argv)
    path = out / "report.json"
    report = json.loads(path.read_text()) if path.exists() and status != 2 else {}
    return status, stdout.getvalue(), stderr.getvalue(), report


def verdicts(report: dict[str, Any]) -> dict[str, Any]:
    return {r["figure"]: r for r in report["ratios"]}


class TestLayout:
    """Slices into blocks: sqrt(n) blocks, the earliest remainder dropped."""

    def test_eighteen_slices_make_four_blocks_of_four(self) -> None:
        blocks, dropped = sf.layout(list(range(18)))
        assert [len(b) for b in blocks] == [4, 4, 4, 4]
        assert dropped == 2
        assert blocks[0][0] == 2 and blocks[-1][-1] == 17

    def test_too_few_slices_make_one_block(self) -> None:
        assert sf.layout(list(range(8))) == ([list(range(8))], 0)
        assert len(sf.layout(list(range(9)))[0]) == 3

    def test_many_slices_make_at_most_ten_blocks(self) -> None:
        blocks, _ = sf.layout(list(range(400)))
        assert len(blocks) == sf.MAX_BLOCKS


class TestVerdicts:
    """The figures, intervals and verdicts from live-like slices."""

    def test_cheaper_side_b_is_better_with_an_interval_below_one(
        self, prometheus: tuple[str, list[Fake]], tmp_path: Path
    ) -> None:
        url, holder = prometheus
        holder.append(
            Fake(
                {
                    A: side("json+pydantic", 20, 16, 1),
                    B: side("msgspec-json", 7, 16, 2),
                },
                16,
            )
        )
        status, out, err, report = run(url, tmp_path, 16)
        assert status == 0, err
        cpu = verdicts(report)["cpu_us_per_msg"]
        assert cpu["verdict"] == "better" and cpu["high"] < 1
        assert cpu["pairs"] == 4 and math.isclose(cpu["ratio"], 0.35, rel_tol=0.05)
        rows = report["summary"]["medium"]
        assert set(rows) == {"A: json+pydantic", "B: msgspec-json"}
        a = rows["A: json+pydantic"]["figures"]
        assert math.isclose(a["throughput"]["median"], 1000, rel_tol=1e-6)
        assert math.isclose(a["e2e_p99_ms"]["median"], 4.95, rel_tol=0.01)
        assert report["staging"]["blocks"] == 4
        assert report["staging"]["same_messages"] is True
        assert "better" in out and "same messages" in out
        md = (tmp_path / "staging" / "report.md").read_text()
        assert "staging report" in md and "batch means" in md
        assert "| lost |" not in md and "| DLQ |" in md  # loss is not measured here
        assert (tmp_path / "staging" / "cpu_per_message.png").stat().st_size > 0
        assert compare.load(tmp_path / "staging").staging is not None
        before = (tmp_path / "staging" / "report.json").read_bytes()
        assert report_module.main([str(tmp_path / "staging")]) == 2  # never redrawn
        assert (tmp_path / "staging" / "report.json").read_bytes() == before

    def test_the_report_opens_with_the_answer(
        self, prometheus: tuple[str, list[Fake]], tmp_path: Path
    ) -> None:
        url, holder = prometheus
        holder.append(
            Fake(
                {
                    A: side("json+pydantic", 20, 16, 1),
                    B: side("msgspec-json", 7, 16, 2),
                },
                16,
            )
        )
        status, out, err, _ = run(url, tmp_path, 16)
        assert status == 0, err
        md = (tmp_path / "staging" / "report.md").read_text()
        assert md.index("## The answer") < md.index("## Sides") < md.index("## Ratios")
        said = next(x for x in md.splitlines() if x.startswith("**msgspec-json**"))
        assert said.startswith(
            "**msgspec-json** (side B) instead of `json+pydantic` (side A): CPU per "
            "message 7."
        )
        assert " us against 20.0 (0.35x; 95 % interval" in said
        assert ": better)" in said and "p99 latency" in said and "RSS" in said
        assert "dead-lettered 0 against 0" in said
        assert out.lstrip().startswith("## The answer")

    def test_a_a_has_no_detectable_difference(
        self, prometheus: tuple[str, list[Fake]], tmp_path: Path
    ) -> None:
        url, holder = prometheus
        holder.append(
            Fake(
                {A: side("msgspec-json", 7, 16, 3), B: side("msgspec-json", 7, 16, 4)},
                16,
            )
        )
        status, out, err, report = run(url, tmp_path, 16)
        assert status == 0, err
        cpu = verdicts(report)["cpu_us_per_msg"]
        assert cpu["verdict"] == "no detectable difference"
        assert cpu["low"] < 1 < cpu["high"]
        assert "A/A" in out

    def test_too_few_slices_refuse_a_verdict(
        self, prometheus: tuple[str, list[Fake]], tmp_path: Path
    ) -> None:
        url, holder = prometheus
        holder.append(
            Fake(
                {A: side("json+pydantic", 20, 6, 1), B: side("msgspec-json", 7, 6, 2)},
                6,
            )
        )
        status, out, err, report = run(url, tmp_path, 6)
        assert status == 0, err
        cpu = verdicts(report)["cpu_us_per_msg"]
        assert "verdict" not in cpu and "low" not in cpu
        assert "No verdict" in out and "at least 9" in out


class TestWarnings:
    """The sides' comparability, in the report and on the terminal."""

    def test_different_rates_sizes_gaps_lag_and_restarts_are_warned(
        self, prometheus: tuple[str, list[Fake]], tmp_path: Path
    ) -> None:
        url, holder = prometheus
        a = side("json+pydantic", 20, 12, 1)
        b = side("msgspec-json", 7, 12, 2, rate=700)
        b.bytes_per_msg, b.lag = 500.0, 50_000.0
        b.messages[3] = b.messages[4] = None
        b.starts = [START + 5.5 * SLICE]
        b.consumer_errors = 2.0
        b.topic = "orders-b"
        holder.append(Fake({A: a, B: b}, 12))
        status, out, err, report = run(url, tmp_path, 12)
        assert status == 0, err
        warned = "\n".join(report["staging"]["warnings"])
        for words in (
            "message rates differ",
            "payload bytes per message differ",
            "side B handled no message in 2 of 12 slices (slice 4-5",
            "side B restarted",
            "side B lagged",
            "fell behind",
            "side B had 20 Kafka consumer errors",
        ):
            assert words in warned and words in out, words
        assert "read different topics (orders; orders-b)" in out
        assert report["staging"]["usable"] == 10
        assert report["staging"]["same_messages"] is False
        assert report["staging"]["sides"][1]["restarts"] == 1


RATE_EACH = 800.0
"""msg/s of each of side B's three workers in the recorded burst."""
KILLED_AT, RESTARTED_AT = 35.4, 50.2
"""Seconds after START: worker 2 killed (kill -9), and started again."""
BURST_TOTAL = 2 * 90 * RATE_EACH + 25 * RATE_EACH + 40_000 + 49 * RATE_EACH
"""What the counters recorded: two workers 90 s at 800 msg/s; the third 25 s
before its kill, a 40,000-message catch-up in its first scrape after the restart,
then 49 s more."""


def burst() -> list[dict[str, Any]]:
    """A Prometheus range-query answer for side B's `worker_messages_total`: three
    workers scraped every second from START - 5 s to START + 130 s, traffic from
    START + 10 s to START + 100 s; worker 2 killed at 35.4 s and restarted at 50.2 s,
    its first scrape after the restart holding a 40,000-message catch-up, a value
    above its last one before the kill (the reset shows in its start time only)."""
    found = []
    for w in range(3):
        values, total = [], 0.0
        for t in range(-5, 131):
            if w == 2 and KILLED_AT < t < RESTARTED_AT:
                continue  # down: no scrape
            if w == 2 and t == 51:
                total = 40_000.0
            elif 10 < t <= 100:
                total += RATE_EACH
            values.append([START + t, repr(total)])
        labels = {"job": JOB, "instance": f"w{w}:9100", "outcome": "ok"}
        found.append({"metric": labels, "values": values})
    return found


class TestSlicesAddUp:
    """Slice counts from the counters' raw samples sum to the counters' totals
    wherever the slices fall (issue 31, item 1)."""

    def series(self) -> list[tuple[list[tuple[float, float]], list[float]]]:
        starts = {"w2:9100": [START + RESTARTED_AT]}
        return [
            (
                [(float(t), float(v)) for t, v in s["values"]],
                starts.get(s["metric"]["instance"], []),
            )
            for s in burst()
        ]

    @pytest.mark.parametrize("offset", range(int(SLICE)))
    def test_every_start_offset_gives_the_counters_totals(self, offset: int) -> None:
        edges = [START + offset + i * SLICE for i in range(12)]
        found = counters.summed_gains(self.series(), edges)
        assert found is not None
        assert math.fsum(found) == pytest.approx(BURST_TOTAL, abs=1e-6)
        assert max(found) >= 40_000  # the catch-up, whole, in one slice

    def test_a_reset_shows_in_a_drop_or_a_start_time(self) -> None:
        samples = [(0.0, 100.0), (1.0, 30.0), (2.0, 40.0), (3.0, 200.0)]
        assert counters.gains(samples, [0.0, 3.0]) == [200.0]  # drop: 30 + 10 + 160
        assert counters.gains(samples, [0.0, 3.0], [2.5]) == [240.0]  # 30 + 10 + 200

    def test_a_series_born_in_the_window_counts_from_zero(self) -> None:
        assert counters.gains([(5.0, 70.0), (6.0, 90.0)], [0.0, 10.0]) == [90.0]
        assert counters.gains([(-1.0, 70.0), (6.0, 90.0)], [0.0, 10.0]) == [20.0]

    @pytest.mark.parametrize("offset", [0, 1, 3, 7, 9])
    def test_the_report_totals_do_not_move_with_the_start(
        self, offset: int, prometheus: tuple[str, list[Fake]], tmp_path: Path
    ) -> None:
        """Through the command: --start moved by `offset` s, the same totals."""
        url, holder = prometheus
        a, b = side("json+pydantic", 20, 13, 1), side("msgspec-json", 7, 13, 2)
        b.instance, b.starts = "w2:9100", [START + RESTARTED_AT]
        fake = Fake({A: a, B: b}, 11)
        fake.raw[("worker_messages_total", B)] = burst()
        holder.append(fake)
        begin = START + offset
        status, _out, err, report = run(
            url, tmp_path, 11, "--start", str(begin), "--end", str(begin + 110)
        )
        assert status == 0, err
        handled = [
            r["processed"]
            for r in report["staging"]["slice_results"]
            if r["codec"][0] == "B"
        ]
        assert sum(handled) == pytest.approx(BURST_TOTAL, abs=2)
        assert f"B {BURST_TOTAL:,.0f}." in report["staging"]["window_note"]


class TestBacklog:
    """The backlog over the whole window, and the stalls it shows (item 2)."""

    def test_a_backlog_between_slice_ends_is_warned_with_size_and_time(
        self, prometheus: tuple[str, list[Fake]], tmp_path: Path
    ) -> None:
        url, holder = prometheus
        a, b = side("json+pydantic", 20, 16, 1), side("msgspec-json", 7, 16, 2)
        b.lag_at = {t: 1000.0 * (t - 60) for t in range(61, 76)}  # 14,000 at 74 s
        b.e2e_s = {6: 30.0, 7: 30.0}
        holder.append(Fake({A: a, B: b}, 16))
        status, out, err, report = run(url, tmp_path, 16)
        assert status == 0, err
        warned = "\n".join(report["staging"]["warnings"])
        assert "side B lagged: its backlog peaked at 15,000 messages at" in warned
        assert "08:01:15 UTC (15.0 s of its traffic at 1,000 msg/s)" in warned
        assert "from 08:01:02 to 08:01:15 (slice 7-8)" in warned
        assert "(blocks holding it: 2 of 4)" in report["staging"]["stalls"]["B"]
        md = (tmp_path / "staging" / "report.md").read_text()
        assert cell(md, "B: msgspec-json", "status").startswith(
            "STALLED, caught up by the window's end"
        )
        assert "Without those blocks, B/A is: p99 ms" in out

    def test_a_side_that_handled_nothing_is_a_stall(
        self, prometheus: tuple[str, list[Fake]], tmp_path: Path
    ) -> None:
        url, holder = prometheus
        a, b = side("json+pydantic", 20, 16, 1), side("msgspec-json", 7, 16, 2)
        b.messages[6] = 0.0
        holder.append(Fake({A: a, B: b}, 16))
        status, _out, err, report = run(url, tmp_path, 16)
        assert status == 0, err
        warned = "\n".join(report["staging"]["warnings"])
        assert "side B handled no message in 1 of 16 slices (slice 7" in warned
        assert "side A handled 10,000 in them" in warned
        assert (
            "handled no message in slice 7 (from 08:01:00)"
            in report["staging"]["stalls"]["B"]
        )


def cell(md: str, row: str, header: str) -> str:
    """The cell of report.md's first table row starting `| row` under `header`."""
    lines = md.splitlines()
    for k, line in enumerate(lines):
        if line.startswith("| codec |"):
            headers = [h.strip() for h in line.strip("|").split("|")]
            for body in lines[k + 2 :]:
                if body.startswith(f"| {row}"):
                    cells = [c.strip() for c in body.strip("|").split("|")]
                    return cells[headers.index(header)]
    raise AssertionError(f"no row {row} under {header}")


class TestLinesTrue:
    """Every line of the report says what the data shows (issue 31, item 3)."""

    def fake(self, n: int = 16) -> tuple[FakeSide, FakeSide]:
        return side("json+pydantic", 20, n, 1), side("msgspec-json", 7, n, 2)

    def test_a_slice_where_a_side_handled_nothing_is_not_with_data(
        self, prometheus: tuple[str, list[Fake]], tmp_path: Path
    ) -> None:
        url, holder = prometheus
        a, b = self.fake()
        b.messages[5] = 0.0  # the series is there; the counter did not move
        holder.append(Fake({A: a, B: b}, 16))
        status, out, err, report = run(url, tmp_path, 16)
        assert status == 0, err
        assert report["staging"]["usable"] == 15
        assert "15 in which both sides handled messages" in out
        assert report["staging"]["sides"][1]["slices_without_data"] == 1

    def test_the_cores_column_states_its_target_rate(
        self, prometheus: tuple[str, list[Fake]], tmp_path: Path
    ) -> None:
        url, holder = prometheus
        a, b = self.fake()
        a.messages[0] = 5000.0  # a slow first slice must not set the rate
        holder.append(Fake({A: a, B: b}, 16))
        status, _out, err, _ = run(url, tmp_path, 16)
        assert status == 0, err
        md = (tmp_path / "staging" / "report.md").read_text()
        assert "cores at 969 msg/s" in md and "traffic's rate" in md
        status, _out, err, _ = run(url, tmp_path, 16, "--target-rate", "2500")
        assert status == 0, err
        md = (tmp_path / "staging" / "report.md").read_text()
        assert "cores at 2,500 msg/s" in md and "(`--target-rate`)" in md

    def test_the_columns_have_a_legend(
        self, prometheus: tuple[str, list[Fake]], tmp_path: Path
    ) -> None:
        url, holder = prometheus
        holder.append(Fake(dict(zip((A, B), self.fake(), strict=True)), 16))
        status, _out, err, _ = run(url, tmp_path, 16)
        assert status == 0, err
        md = (tmp_path / "staging" / "report.md").read_text()
        assert "- `decode us`: the median" in md
        assert "- `decode % of CPU`: the mean" in md
        assert "- `CPU us/msg`: summed CPU seconds over summed messages" in md

    def test_one_ratio_per_figure(
        self, prometheus: tuple[str, list[Fake]], tmp_path: Path
    ) -> None:
        url, holder = prometheus
        a, b = self.fake()
        a.cpu_us = [20.0] * 16
        b.cpu_us = [5.0] * 4 + [10.0] * 4 + [7.0] * 4 + [9.0] * 4
        holder.append(Fake({A: a, B: b}, 16))
        status, _out, err, report = run(url, tmp_path, 16)
        assert status == 0, err
        paired = verdicts(report)["cpu_us_per_msg"]["ratio"]
        assert paired == pytest.approx((5 * 10 * 7 * 9 / 20**4) ** 0.25, rel=1e-3)
        md = (tmp_path / "staging" / "report.md").read_text()
        assert f"({paired:.2f}x)" in cell(md, "B: msgspec-json", "CPU us/msg")
        assert f"| CPU us/msg | {paired:.2f}x |" in md

    def test_the_window_as_analysed_says_what_was_left_out(
        self, prometheus: tuple[str, list[Fake]], tmp_path: Path
    ) -> None:
        url, holder = prometheus
        holder.append(Fake(dict(zip((A, B), self.fake(), strict=True)), 16))
        status, out, err, _ = run(
            url, tmp_path, 16, "--end", str(START + 16 * SLICE + 3)
        )
        assert status == 0, err
        for text in (out, (tmp_path / "staging" / "report.md").read_text()):
            assert "the last 3.0 s" in text and "left out" in text

    def test_a_stall_is_shown_beside_the_latency_ratios(
        self, prometheus: tuple[str, list[Fake]], tmp_path: Path
    ) -> None:
        url, holder = prometheus
        a, b = self.fake()
        b.lag = 50_000.0  # 50 s of B's 1,000 msg/s
        holder.append(Fake({A: a, B: b}, 16))
        status, out, err, _ = run(url, tmp_path, 16)
        assert status == 0, err
        p99 = next(line for line in out.splitlines() if line.startswith("| p99 ms"))
        assert "includes side B's stall" in p99, p99
        cpu = next(line for line in out.splitlines() if line.startswith("| CPU us"))
        assert "stall" not in cpu
        assert "Side B stalled" in out
        answer = out.split("## The answer", 1)[1].split("\n## ", 1)[0]
        assert "includes side B's stall" in answer
        assert "Before you act on it:" in answer and "- Side B stalled" in answer


class TestErrors:
    """Bad input exits 2, Prometheus failing exits 1: one line, no traceback."""

    def check(self, status: int, err: str, expected: int, words: str) -> None:
        assert status == expected
        assert words in err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err

    def test_unreachable_prometheus(self, tmp_path: Path) -> None:
        (port,) = free_ports(1)
        status, _, err, _ = run(f"http://127.0.0.1:{port}", tmp_path, 12)
        self.check(status, err, 1, "Prometheus unreachable")

    def test_selector_matching_nothing(
        self, prometheus: tuple[str, list[Fake]], tmp_path: Path
    ) -> None:
        url, holder = prometheus
        holder.append(Fake({A: side("json+pydantic", 20, 12, 1)}, 12))
        status, _, err, _ = run(url, tmp_path, 12)
        self.check(status, err, 2, "--b 'side=\"B\"': matches no worker")

    def test_selector_refused(
        self, prometheus: tuple[str, list[Fake]], tmp_path: Path
    ) -> None:
        url, holder = prometheus
        fake = Fake({A: side("json+pydantic", 20, 12, 1)}, 12)
        fake.refuse.add("side=B")
        holder.append(fake)
        status, _, err, _ = run(url, tmp_path, 12, "--b", "side=B")
        self.check(status, err, 2, "Prometheus refused it")

    def test_window_without_data(
        self, prometheus: tuple[str, list[Fake]], tmp_path: Path
    ) -> None:
        url, holder = prometheus
        empty = FakeSide(messages=[None] * 12, cpu_us=[0.0] * 12, instance="x:1")
        holder.append(Fake({A: side("json+pydantic", 20, 12, 1), B: empty}, 12))
        status, _, err, _ = run(url, tmp_path, 12)
        self.check(status, err, 2, "no messages handled in the window")

    def test_side_with_two_codecs(
        self, prometheus: tuple[str, list[Fake]], tmp_path: Path
    ) -> None:
        url, holder = prometheus
        b = side("msgspec-json", 7, 12, 2)
        b.codecs = ("msgspec-json", "protobuf")
        holder.append(Fake({A: side("json+pydantic", 20, 12, 1), B: b}, 12))
        status, _, err, _ = run(url, tmp_path, 12)
        self.check(status, err, 2, "runs 2 codecs (msgspec-json, protobuf)")

    def test_no_prometheus_url(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("AB_PROMETHEUS_URL", raising=False)
        err = io.StringIO()
        monkeypatch.setattr("sys.stderr", err)
        assert staging_cli.main(["--window", "1h"]) == 2
        assert "--prometheus URL is required" in err.getvalue()

    def test_bad_window_names_the_setting(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        err = io.StringIO()
        monkeypatch.setattr("sys.stderr", err)
        assert (
            staging_cli.main(["--prometheus", "http://127.0.0.1:1", "--window", "2x"])
            == 2
        )
        assert "ab.window = '2x' (flag --window)" in err.getvalue()

    @pytest.mark.parametrize(
        ("flags", "words"),
        [
            (("--window", "1h", "--slice", "2h"), "is longer than the window"),
            (("--window", "7d", "--slice", "10s"), "at most 10000"),
            (("--start", "2000", "--end", "1000"), "the window is empty"),
        ],
    )
    def test_bad_windows(
        self, flags: tuple[str, ...], words: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        err = io.StringIO()
        monkeypatch.setattr("sys.stderr", err)
        argv = ["--prometheus", "http://127.0.0.1:1", *flags]
        assert staging_cli.main(argv) == 2
        assert words in err.getvalue() and len(err.getvalue().splitlines()) == 1


class TestGate:
    """`--compare` on staging reports, as on lab reports."""

    def test_a_regression_of_side_b_fails_the_gate(
        self, prometheus: tuple[str, list[Fake]], tmp_path: Path
    ) -> None:
        url, holder = prometheus
        holder.append(
            Fake(
                {
                    A: side("json+pydantic", 20, 16, 1),
                    B: side("msgspec-json", 7, 16, 2),
                },
                16,
            )
        )
        status, _, err, _ = run(url, tmp_path / "old", 16)
        assert status == 0, err
        holder[0] = Fake(
            {A: side("json+pydantic", 20, 16, 1), B: side("msgspec-json", 10, 16, 5)},
            16,
        )
        old = tmp_path / "old" / "staging"
        status, out, err, _ = run(url, tmp_path / "new", 16, "--compare", str(old))
        assert status == 1, err
        assert "REGRESSION: B: msgspec-json" in out
        holder[0] = Fake(
            {A: side("json+pydantic", 20, 16, 1), B: side("msgspec-json", 7, 16, 6)}, 16
        )
        status, out, err, _ = run(url, tmp_path / "same", 16, "--compare", str(old))
        assert status == 0, err
        assert "result: no regression" in out
