"""The worker against a real broker: counts, dead letters, shutdown, auto codec."""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from loadgen.payloads import make_payloads
from service.codecs import REAL_CODECS, CodecName, get_codec
from tests.support import Record, WorkerProcess, consume_all, produce


def records(
    codec_name: CodecName,
    schema: str,
    count: int,
    *,
    run: str = "it",
    header: bool = True,
    start: int = 0,
) -> list[Record]:
    codec = get_codec(codec_name, schema)  # type: ignore[arg-type]
    out = []
    for seq, payload in enumerate(make_payloads(schema, count, seed=start), start):  # type: ignore[arg-type]
        headers = [
            ("x-sent-ns", str(time.time_ns()).encode()),
            ("x-seq", str(seq).encode()),
            ("x-run-id", run.encode()),
        ]
        if header:
            headers.append(("content-type", codec.content_type.encode()))
        out.append(
            {
                "key": str(seq).encode(),
                "value": codec.encode(codec.from_builtins(payload)),
                "headers": headers,
            }
        )
    return out


def header(msg: Any, name: str) -> bytes | None:
    return dict(msg.headers() or ()).get(name)


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    return tmp_path / "worker.log"


class TestCounts:
    """For each codec, the worker processes exactly the N messages produced."""

    @pytest.mark.parametrize("codec_name", REAL_CODECS)
    def test_exactly_n(
        self,
        kafka_bootstrap: str,
        topic_factory: Any,
        log_file: Path,
        codec_name: CodecName,
    ) -> None:
        topic = topic_factory(3)
        n = produce(kafka_bootstrap, topic, records(codec_name, "medium", 300))
        with WorkerProcess(
            kafka_bootstrap, topic, "--codec", codec_name, log=log_file
        ) as w:
            assert w.wait_for(n) == n
            time.sleep(1.0)  # anything extra (duplicates) would show up by now
            metrics = w.metrics()
            assert w.messages("ok") == n
            assert w.messages("decode_error") == w.messages("logic_error") == 0
            assert (
                metrics[f'worker_e2e_latency_seconds_count{{codec="{codec_name}"}}']
                == n
            )
            assert (
                sum(
                    v
                    for k, v in metrics.items()
                    if k.startswith("worker_consumer_lag_messages{")
                )
                == 0
            )
            assert w.stop() == 0


class TestDeadLetters:
    """Poison lands in the DLQ byte-identical; good messages around it are processed."""

    def test_poison_interleaved(
        self, kafka_bootstrap: str, topic_factory: Any, log_file: Path
    ) -> None:
        topic = topic_factory(2)
        topic_factory(
            2, prefix=topic
        )  # placeholder so teardown deletes <topic>.dlq too
        from localkafka import create_topic

        create_topic(kafka_bootstrap, f"{topic}.dlq", 2)
        good = records("msgspec-msgpack", "medium", 40)
        small = records("msgspec-msgpack", "small", 1)[0]["value"]
        codec = get_codec("msgspec-msgpack", "medium")
        no_items = codec.encode(
            codec.from_builtins(dict(make_payloads("medium", 1)[0], items=[]))
        )
        poison = {
            b"p-garbage": (b"\x00\xff garbage", "decode"),
            b"p-truncated": (good[0]["value"][:-7], "decode"),
            b"p-wrong-schema": (small, "decode"),
            b"p-empty": (None, "empty"),
            b"p-oversize": (b"\x92" * 5000, "oversize"),
            b"p-logic": (no_items, "logic"),
        }
        batch: list[Record] = []
        for i, (key, (value, _)) in enumerate(poison.items()):
            batch += good[i * 6 : i * 6 + 6]
            batch.append(
                {
                    "key": key,
                    "value": value,
                    "headers": [("x-seq", b"p"), ("trace", b"t1")],
                }
            )
        batch += good[36:]
        produce(kafka_bootstrap, topic, batch)
        args = ("--codec", "msgspec-msgpack", "--max-payload-bytes", "4000")
        with WorkerProcess(kafka_bootstrap, topic, *args, log=log_file) as w:
            w.wait_for(len(good))
            w.wait_for(5, outcome="decode_error")
            w.wait_for(1, outcome="logic_error")
            assert w.messages("ok") == len(good)
            dead = consume_all(kafka_bootstrap, f"{topic}.dlq", len(poison))
            assert w.stop() == 0
        assert sorted(m.key() for m in dead) == sorted(poison)
        for m in dead:
            value, reason = poison[m.key()]
            assert m.value() == value
            headers = dict(m.headers())
            assert headers["trace"] == b"t1" and headers["x-seq"] == b"p"
            assert headers["x-dlq-reason"] == reason.encode()
            assert headers["x-dlq-topic"] == topic.encode()
            assert headers["x-dlq-codec"] == b"msgspec-msgpack"
            assert int(headers["x-dlq-offset"]) >= 0
            assert b"garbage" not in headers["x-dlq-exception-message"]


class TestShutdown:
    """SIGTERM mid-stream, then a restart: no message lost, none processed twice."""

    def test_sigterm_then_restart(
        self, kafka_bootstrap: str, topic_factory: Any, log_file: Path
    ) -> None:
        topic, out = topic_factory(4), topic_factory(4)
        n = produce(kafka_bootstrap, topic, records("msgspec-msgpack", "small", 20_000))
        args = (
            "--codec",
            "msgspec-msgpack",
            "--schema",
            "small",
            "--output-topic",
            out,
            "--batch-size",
            "200",
        )
        first = WorkerProcess(kafka_bootstrap, topic, *args, log=log_file).start()
        try:
            first.wait_for(2_000)
            assert first.stop(signal.SIGTERM) == 0
        finally:
            first.__exit__()
        second = WorkerProcess(
            kafka_bootstrap, topic, *args, group=first.group, log=log_file
        )
        with second:
            done_before = 0
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                results = consume_all(kafka_bootstrap, out, n, timeout=5)
                if len(results) >= n:
                    break
                assert len(results) >= done_before
                done_before = len(results)
            assert second.stop() == 0
        seqs = Counter(int(header(m, "x-seq") or -1) for m in results)
        assert set(seqs) == set(range(n)), "lost messages"
        assert max(seqs.values()) == 1, (
            f"duplicates: {[s for s, c in seqs.items() if c > 1][:10]}"
        )
        log = log_file.read_text()
        assert log.count('"consumer_closed"') == 2


class TestAuto:
    """An auto worker handles a topic that holds every codec's wire format."""

    def test_mixed_topic(
        self, kafka_bootstrap: str, topic_factory: Any, log_file: Path
    ) -> None:
        topic = topic_factory(2)
        batch: list[Record] = []
        for i, name in enumerate(REAL_CODECS):
            batch += records(name, "medium", 50, start=i * 50)
        batch += records("json+pydantic", "medium", 20, header=False, start=1000)
        n = produce(kafka_bootstrap, topic, batch)
        with WorkerProcess(
            kafka_bootstrap, topic, "--codec", "auto", log=log_file
        ) as w:
            assert w.wait_for(n) == n
            assert w.messages("decode_error") == 0
            assert w.stop() == 0


class TestProcesses:
    """`--processes 2` shares the group: every message handled once in total."""

    def test_two_processes(
        self, kafka_bootstrap: str, topic_factory: Any, log_file: Path
    ) -> None:
        topic = topic_factory(4)
        w = WorkerProcess(
            kafka_bootstrap,
            topic,
            "--codec",
            "protobuf",
            "--schema",
            "small",
            "--processes",
            "2",
            log=log_file,
        )
        second = WorkerProcess(kafka_bootstrap, topic)
        second.port = w.port + 1
        with w:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not all(
                p.metrics().get("worker_assigned_partitions") == 2 for p in (w, second)
            ):
                time.sleep(0.3)
            n = produce(kafka_bootstrap, topic, records("protobuf", "small", 2_000))
            while time.monotonic() < deadline and w.messages() + second.messages() < n:
                time.sleep(0.3)
            time.sleep(1.0)
            assert w.messages() + second.messages() == n
            assert w.messages() > 0 and second.messages() > 0
            assert w.stop() == 0

    def test_children_die_with_supervisor(
        self, kafka_bootstrap: str, topic_factory: Any, log_file: Path
    ) -> None:
        topic = topic_factory(2)
        w = WorkerProcess(kafka_bootstrap, topic, "--processes", "2", log=log_file)
        second = WorkerProcess(kafka_bootstrap, topic)
        second.port = w.port + 1
        with w:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not (
                w.metrics() and second.metrics()
            ):
                time.sleep(0.2)
            assert w.metrics() and second.metrics()
            w.stop(signal.SIGKILL)  # the supervisor only
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and (w.metrics() or second.metrics()):
                time.sleep(0.2)
            assert not w.metrics() and not second.metrics(), "orphaned worker processes"
        assert log_file.read_text().count('"consumer_closed"') == 2
