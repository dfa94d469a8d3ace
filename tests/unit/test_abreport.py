"""The A/B report from synthetic results: ordering, ratios, status, spread, charts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from abrunner import report as abreport
from abrunner.runner import Profile, main


def result(codec: str, cpu: float, *, repeat: int = 0, kept_up: bool = True,
           profile: str = "medium", **extra: Any) -> dict[str, Any]:  # fmt: skip
    base = {"codec": codec, "profile": profile, "repeat": repeat, "throughput": 40_000.0,
            "cpu_pct": cpu * 4, "cpu_us_per_msg": cpu, "decode_us": cpu / 2,
            "e2e_p50_ms": 3.0, "e2e_p99_ms": 11.0, "e2e_p999_ms": 20.0, "rss_peak_mb": 90.0,
            "rss_steady_mb": 80.0, "wire_bytes": 900.0, "lag_end": 0.0, "lost": 0,
            "seq_missing": 0, "dead_lettered": 0, "kept_up": kept_up}  # fmt: skip
    return {**base, **extra}


RESULTS = [
    result(
        "json-stdlib+pydantic", 25.0, kept_up=False, lag_end=250_000.0, cpu_pct=99.0
    ),
    result("msgspec-msgpack", 8.0, wire_bytes=800.0),
    result("msgspec-msgpack", 9.0, repeat=1, wire_bytes=800.0),
    result("protobuf", 10.0, wire_bytes=500.0),
]


def report(results: list[dict[str, Any]] = RESULTS) -> dict[str, Any]:
    return {
        "plan": {"max_mode": False, "rate": 40_000, "duration": 30, "warmup": 5,
                 "partitions": 4, "repeat": 2, "baseline": "json-stdlib+pydantic"},
        "environment": abreport.environment("4.1.2"),
        "results": results,
        "summary": abreport.aggregate(results),
    }  # fmt: skip


class TestTable:
    """Rows are sorted by CPU per message with ratios to the baseline."""

    def test_order_ratio_status_spread(self) -> None:
        rows = abreport.aggregate(RESULTS)["medium"]
        headers, body = abreport.table(rows, "json-stdlib+pydantic", False, True)
        assert [cells[0] for cells in body] == [
            "msgspec-msgpack", "protobuf", "json-stdlib+pydantic (baseline)"]  # fmt: skip
        cpu = headers.index("CPU us/msg")
        assert body[0][cpu] == "8.5 (0.34x) [8.0-9.0]"
        assert body[1][headers.index("wire B/msg")] == "500 (0.56x)"
        assert body[0][1] == "ok"
        assert body[2][1] == "FELL BEHIND (lag 250,000, CPU 99%)"

    def test_lost_and_failed_are_shown(self) -> None:
        rows = abreport.aggregate([result("protobuf", 5.0, lost=3),
                                   {"codec": "orjson+pydantic", "profile": "medium", "error": "boom"}])["medium"]  # fmt: skip
        _, body = abreport.table(rows, "protobuf", False, False)
        status = {cells[0].split()[0]: cells[1] for cells in body}
        assert status["protobuf"] == "LOST 3"
        assert status["orjson+pydantic"].startswith("FAILED: boom")

    def test_backlog_is_not_loss(self) -> None:
        rows = abreport.aggregate(
            [
                result(
                    "json-stdlib+pydantic",
                    30.0,
                    kept_up=False,
                    lost=None,
                    not_drained=5000,
                )
            ]
        )["medium"]
        _, [cells] = abreport.table(rows, "json-stdlib+pydantic", False, False)
        assert cells[1] == "FELL BEHIND, not drained (5,000 queued)"
        assert cells[-2] == "0"  # lost


class TestFiles:
    """report.md, report.json and valid PNG charts, plus the size sweep chart."""

    def test_write(self, tmp_path: Path) -> None:
        sweep = [*RESULTS, *(result(r["codec"], r["cpu_us_per_msg"] * 3, profile="large:100000",
                                    wire_bytes=r["wire_bytes"] * 90) for r in RESULTS)]  # fmt: skip
        paths = abreport.write(report(sweep), tmp_path)
        names = {p.name for p in paths}
        assert {"report.md", "report.json", "cpu_per_message.png", "p99_latency.png",
                "rss.png", "wire_size.png", "throughput_vs_size.png"} <= names  # fmt: skip
        for path in paths:
            if path.suffix == ".png":
                assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        md = (tmp_path / "report.md").read_text()
        assert "## Profile `large:100000`" in md and "librdkafka" in md


class TestFlags:
    """Bad flags exit 2 before any broker is started."""

    @pytest.mark.parametrize(
        ("argv", "needle"),
        [(["--codecs", "auto"], "not a wire codec"),
         (["--codecs", "protobuf"], "--baseline"),
         (["--profile", "huge"], "huge"),
         (["--rate", "0"], "--rate must be positive")],
    )  # fmt: skip
    def test_exit_2(self, argv: list[str], needle: str, tmp_path: Path,
                    capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
        assert main([*argv, "--out", str(tmp_path)]) == 2
        assert needle in capsys.readouterr().err

    def test_profile_parse(self) -> None:
        assert Profile.parse("large:5000").label == "large:5000"
        with pytest.raises(ValueError, match="small:5"):
            Profile.parse("small:5")
