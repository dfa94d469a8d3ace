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
from abrunner.staging import cli as staging_cli, figures as sf
from abrunner.staging.slices import (
    EXPRESSIONS,
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
A, B = 'side="A"', 'side="B"'


@dataclass
class FakeSide:
    """One side's per-slice figures (None: no data in that slice)."""

    codec: str = "json+pydantic"
    codecs: tuple[str, ...] = ()
    messages: list[float | None] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)
    bytes_per_msg: float = 900.0
    lag: float = 10.0
    starts: list[float] = field(default_factory=list)
    instance: str = "a:9100"
    consumer_errors: float = 0.0
    topic: str = "orders"


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


class Fake:
    """The fake server's state: the sides by selector and the window's slices."""

    def __init__(self, sides: dict[str, FakeSide], n: int) -> None:
        self.sides, self.n = sides, n
        self.refuse: set[str] = set()

    def at(self, i: int) -> float:
        return START + (i + 1) * SLICE

    def instant(self, query: str) -> list[dict[str, Any]]:
        for sel, s in self.sides.items():
            span = self.n * SLICE
            if query == render(INFO, sel, span):
                if not any(m is not None for m in s.messages) and s.messages:
                    return [_sample({"codec": s.codec, "schema": "medium"}, 1)]
                codecs = s.codecs or (s.codec,)
                return [_sample({"codec": c, "schema": "medium"}, 1) for c in codecs]
            if query == render(TOPICS, sel, span):
                return [_sample({"topic": s.topic, "partition": "0"}, 1)]
            if query == render(INSTANCES, sel, span):
                return [_sample({"job": "codec-worker", "instance": s.instance}, 1)]
            total = sum(m for m in s.messages if m is not None)
            if query == render(EXPRESSIONS["messages"], sel, span):
                return [_sample({}, total)] if total else []
            if query == render(EXPRESSIONS["bytes"], sel, span):
                return [_sample({}, total * s.bytes_per_msg)] if total else []
        return []

    def ranged(self, query: str) -> list[dict[str, Any]]:
        for sel, s in self.sides.items():
            if query == render(STARTS, sel, SLICE):
                points = [(START - 100, START - 100)] + [
                    (t + 1, t) for t in s.starts
                ]  # (evaluated at, start time)
                return [
                    {
                        "metric": {"job": "codec-worker", "instance": s.instance},
                        "values": [[at, str(v)] for at, v in points],
                    }
                ]
            for key, template in {**EXPRESSIONS, **HISTOGRAMS}.items():
                if query == render(template, sel, SLICE):
                    return self._series(s, key)
        raise AssertionError(f"unexpected query {query}")

    def _series(self, s: FakeSide, key: str) -> list[dict[str, Any]]:
        def values(fn: Any) -> list[list[Any]]:
            return [
                [self.at(i), str(fn(i, m))]
                for i, m in enumerate(s.messages)
                if m is not None
            ]

        if key in HISTOGRAMS:  # every message at 4 ms (e2e) or 20 us (decode)
            le = "0.005" if key == "e2e" else "0.00002"
            return [
                {"metric": {"le": le}, "values": values(lambda i, m: m)},
                {"metric": {"le": "+Inf"}, "values": values(lambda i, m: m)},
            ]
        fns = {
            "messages": lambda i, m: m,
            "bytes": lambda i, m: m * s.bytes_per_msg,
            "cpu_seconds": lambda i, m: m * s.cpu_us[i] / 1e6,
            "gc_seconds": lambda i, m: 0.001,
            "gc_collections": lambda i, m: 2,
            "decode_sum": lambda i, m: m / 32 * 20e-6,
            "decode_count": lambda i, m: m / 32,
            "rss_bytes": lambda i, m: 80 * 2**20,
            "lag": lambda i, m: s.lag,
            "processes": lambda i, m: 1,
        }
        if key == "consumer_errors" and s.consumer_errors:
            return [{"metric": {}, "values": values(lambda i, m: s.consumer_errors)}]
        if key not in fns:  # dead letters, consumer errors: never created
            return []
        return [{"metric": {}, "values": values(fns[key])}]


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
                data = {"resultType": "matrix", "result": fake.ranged(query)}
            elif url.path.endswith("/query"):
                data = {"resultType": "vector", "result": fake.instant(query)}
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
            "side B had no data in 2 of 12 slices",
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
