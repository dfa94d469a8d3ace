"""`codec-ab` end to end on the real broker: report structure and invariants."""

from __future__ import annotations

from pathlib import Path

import pytest

from abrunner.cli import main
from abrunner.report import read

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class TestAbRun:
    """A short two-codec A/B at a modest rate produces a complete, sane report."""

    @pytest.mark.slow
    def test_two_codecs(self, kafka_bootstrap: str, tmp_path: Path) -> None:
        out = tmp_path / "ab"
        code = main(
            [
                *("--bootstrap-servers", kafka_bootstrap),
                *("--codecs", "json+pydantic,msgspec-msgpack"),
                *("--baseline", "json+pydantic", "--rate", "2000", "--duration", "6"),
                *("--warmup", "2", "--profile", "small", "--partitions", "2"),
                *("--out", str(out)),
            ]
        )
        report = read(out / "report.json")
        assert code == 0, report.results
        results = report.results
        assert sorted(r.codec for r in results) == ["json+pydantic", "msgspec-msgpack"]
        for r in results:
            assert r.error is None, r
            assert r.mode == "rate"
            assert r.lost == 0 and r.seq_missing == 0
            assert r.worker_exit == 0 and r.offsets_committed_to_end
            assert r.acked == r.sent and (r.sent or 0) > 0
            assert r.producer_rate == pytest.approx(2000, rel=0.1)
            assert r.throughput == pytest.approx(2000, rel=0.25)
            assert r.kept_up
            assert 0 < (r.cpu_us_per_msg or 0) < 10_000
            assert r.e2e_p50_ms is not None and r.e2e_p99_ms is not None
            assert r.e2e_p50_ms <= r.e2e_p99_ms <= (r.e2e_p999_ms or 0)
            assert (r.rss_peak_mb or 0) >= (r.rss_steady_mb or 0) > 10
            assert (r.wire_bytes or 0) > 20
        wire = {r.codec: r.wire_bytes or 0 for r in results}
        assert wire["msgspec-msgpack"] < wire["json+pydantic"]
        env = report.environment
        assert env.librdkafka and env.libraries["msgspec"] and env.cpu_count
        assert set(report.summary["small"]) == {"json+pydantic", "msgspec-msgpack"}
        md = (out / "report.md").read_text()
        assert "json+pydantic (baseline)" in md and "| msgspec-msgpack |" in md
        for name in (
            "cpu_per_message.png",
            "p99_latency.png",
            "rss.png",
            "wire_size.png",
        ):
            assert (out / name).read_bytes().startswith(PNG_MAGIC), name
            assert f"]({name})" in md
