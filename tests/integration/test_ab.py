"""`codec-ab` end to end on the real broker: report structure and invariants."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from abrunner.cli import INTERRUPTED, main
from abrunner.report.tables import read

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class TestAbRun:
    """A short two-codec A/B at a modest rate produces a complete, sane report
    (paired, the default: both workers at once on one fanned-out load)."""

    @pytest.mark.slow
    def test_two_codecs(
        self, kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        out = tmp_path / "ab"
        code = main(
            [
                *("--bootstrap-servers", kafka_bootstrap),
                *("--codecs", "json+pydantic,msgspec-msgpack"),
                *("--baseline", "json+pydantic", "--rate", "2000", "--duration", "6"),
                *("--warmup", "2", "--profile", "small", "--partitions", "2"),
                *("--out", str(out), "--no-bench"),
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
            assert r.gc_ms_per_s is not None and r.gc_ms_per_s >= 0
            assert r.gc_per_1k_msgs is not None and r.gc_per_1k_msgs >= 0
            assert (r.decode_p50_us or 0) > 0 and (r.decode_us or 0) > 0
            # CPU time of the decodes, a part of the worker's CPU: never above it
            # (wall-time samples read 655 % in a paired run of four workers).
            assert (r.decode_us or 0) < (r.cpu_us_per_msg or 0)
        wire = {r.codec: r.wire_bytes or 0 for r in results}
        assert wire["msgspec-msgpack"] < wire["json+pydantic"]
        assert report.capacity is not None and report.capacity.fits
        assert report.paired is not None  # both sides sampled at the same edges
        windows = report.paired.windows
        assert {w.codec for w in windows} == {"json+pydantic", "msgspec-msgpack"}
        for codec in ("json+pydantic", "msgspec-msgpack"):
            mine = [w for w in windows if w.codec == codec]
            assert len(mine) >= 4 and sum(w.messages for w in mine) > 0
            assert all(len(w.e2e) == len(report.paired.bounds) + 1 for w in mine)
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
        assert "`--repeat 3` or more" in md and not report.interrupted
        printed = capsys.readouterr().out  # not a terminal: report.md's tables
        assert "| json+pydantic (baseline) |" in printed and "--repeat 3" in printed
        assert "| GC ms/s |" in md and "| decode us |" in md


def _interrupt_at(cmd: list[str], marker: str) -> tuple[int, str, str]:
    """Run `cmd`, send SIGINT once a stderr line starts with `marker`, wait.

    Returns:
        The exit status, stdout and stderr.
    """
    lines: queue.Queue[str] = queue.Queue()
    with subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stderr is not None and proc.stdout is not None
        stderr = proc.stderr

        def read_stderr() -> None:
            for text in stderr:
                lines.put(text)

        reader = threading.Thread(target=read_stderr)
        reader.start()
        try:
            line = ""
            while not line.startswith(marker):
                line = lines.get(timeout=180)
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        printed = proc.stdout.read()
        reader.join(10)
    return code, printed, "".join(lines.queue)


def _topics(bootstrap: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return set(admin.list_topics(timeout=10).topics)


class TestInterrupt:
    """SIGINT after the first case: that case reported, the second torn down, 130."""

    @pytest.mark.slow
    def test_sigint_after_first_case(
        self, kafka_bootstrap: str, tmp_path: Path
    ) -> None:
        out = tmp_path / "ab"
        cmd = [
            *(sys.executable, "-m", "abrunner", "--bootstrap-servers", kafka_bootstrap),
            *("--codecs", "msgspec-msgpack,msgspec-json", "--rate", "1000"),
            *("--duration", "4", "--warmup", "1", "--profile", "small"),
            *("--partitions", "1", "--no-bench", "--no-verify", "--out", str(out)),
            *("--mode", "sequential"),
        ]
        # The second case's first progress line: the first case is finished.
        code, printed, err = _interrupt_at(cmd, "msgspec-json / small / run 1:")
        assert code == INTERRUPTED, err
        assert "Traceback" not in err + printed
        report = read(out / "report.json")
        assert report.interrupted
        assert [r.codec for r in report.results] == ["msgspec-msgpack"]
        md = (out / "report.md").read_text().splitlines()
        assert md[2].startswith("**Interrupted**")
        assert "**Interrupted**" in printed
        assert "| msgspec-msgpack (baseline) |" in printed
        # The interrupted case's topics are deleted (deletion spreads in a moment).
        deadline = time.monotonic() + 30
        while (
            left := {
                t for t in _topics(kafka_bootstrap) if t.endswith("msgspec-json-small")
            }
        ) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert left == set()
