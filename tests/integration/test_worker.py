"""The worker against a real broker: counts, dead letters, shutdown, auto codec,
start-up checks and logs."""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from codec import REAL_CODECS, CodecName, get_codec
from loadgen.payloads import make_payloads
from localkafka import TopicAdmin, delete_topic
from tests.support import (
    Record,
    WorkerProcess,
    consume_all,
    free_port_run,
    produce,
)

TopicFactory = Callable[..., str]


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


def dlq_args(topic_factory: TopicFactory) -> tuple[str, str]:
    """`--dlq-topic` naming a topic of its own (deleted at teardown): every worker
    checks at start-up that its dead-letter topic exists."""
    return ("--dlq-topic", topic_factory(1, prefix="dlq"))


def json_lines(log: Path) -> list[dict[str, Any]]:
    """The JSON log lines of a worker's output (other lines are left out), complete
    lines only: a running worker may be half-way through writing the last one."""
    text = log.read_text() if log.exists() else ""
    done = text[: text.rfind("\n") + 1].splitlines()
    return [json.loads(line) for line in done if line.startswith("{")]


def _logged(log: Path, event: str) -> set[int]:
    """The worker indexes that logged `event` so far."""
    return {line["worker"] for line in json_lines(log) if line.get("event") == event}


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
        args = ("--codec", codec_name, *dlq_args(topic_factory))
        with WorkerProcess(kafka_bootstrap, topic, *args, log=log_file) as w:
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
        args = ["--codec", "msgspec-msgpack", "--max-payload-bytes", "4000"]
        args += ["--summary-interval-s", "1"]
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
        # The summary lines count each interval's dead letters by reason; over the
        # run (the final line closes the last interval) they add up to the poison.
        per_reason: Counter[str] = Counter()
        for line in json_lines(log_file):
            if line["event"] in ("worker_summary", "worker_final"):
                per_reason.update(line["dead_letters"])
        assert per_reason == Counter(reason for _, reason in poison.values())


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
            *dlq_args(topic_factory),
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
        args = ("--codec", "auto", *dlq_args(topic_factory))
        with WorkerProcess(kafka_bootstrap, topic, *args, log=log_file) as w:
            assert w.wait_for(n) == n
            assert w.messages("decode_error") == 0
            assert w.stop() == 0


def _counts(*workers: WorkerProcess) -> list[int]:
    """Each worker's handled count; a scrape that times out on a busy machine is
    retried rather than read as 0."""
    counts = []
    for worker in workers:
        count = 0
        for _ in range(5):
            count = worker.messages()
            if count:
                break
            time.sleep(0.5)
        counts.append(count)
    return counts


class TestProcesses:
    """`--processes 2` shares the group: every message handled once in total."""

    def test_two_processes(
        self, kafka_bootstrap: str, topic_factory: Any, log_file: Path
    ) -> None:
        topic = topic_factory(4)
        base = free_port_run(2)
        w = WorkerProcess(
            kafka_bootstrap,
            topic,
            "--codec",
            "protobuf",
            "--schema",
            "small",
            "--processes",
            "2",
            *dlq_args(topic_factory),
            log=log_file,
            port=base,
        )
        second = WorkerProcess(kafka_bootstrap, topic, port=base + 1)
        with w:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not all(
                p.metrics().get("worker_assigned_partitions") == 2 for p in (w, second)
            ):
                time.sleep(0.3)
            assigned = [
                p.metrics().get("worker_assigned_partitions") for p in (w, second)
            ]
            assert assigned == [2, 2], f"the group never settled: {assigned}"
            n = produce(kafka_bootstrap, topic, records("protobuf", "small", 2_000))
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and sum(_counts(w, second)) < n:
                time.sleep(0.3)
            time.sleep(1.0)
            counts = _counts(w, second)
            assert sum(counts) == n, f"handled {counts} of {n}"
            assert min(counts) > 0, f"one process handled nothing: {counts}"
            assert w.stop() == 0
        # Every line names its process and its index; each index is one process.
        lines = json_lines(log_file)
        pids = {(line["worker"], line["pid"]) for line in lines}
        assert {worker for worker, _ in pids} == {0, 1}
        assert len(pids) == 2

    def test_children_die_with_supervisor(
        self, kafka_bootstrap: str, topic_factory: Any, log_file: Path
    ) -> None:
        topic = topic_factory(2)
        args = ("--processes", "2", *dlq_args(topic_factory))
        base = free_port_run(2)
        w = WorkerProcess(kafka_bootstrap, topic, *args, log=log_file, port=base)
        second = WorkerProcess(kafka_bootstrap, topic, port=base + 1)
        with w:
            # Both consumers built first: /metrics answers before a child has one,
            # and a child stopped then has nothing to close.
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and (
                _logged(log_file, "partitions_assigned") != {0, 1}
            ):
                time.sleep(0.2)
            assert _logged(log_file, "partitions_assigned") == {0, 1}
            assert w.metrics() and second.metrics()
            w.stop(signal.SIGKILL)  # the supervisor only
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and (w.metrics() or second.metrics()):
                time.sleep(0.2)
            assert not w.metrics() and not second.metrics(), "orphaned worker processes"
        assert log_file.read_text().count('"consumer_closed"') == 2


class TestStartupTopics:
    """Start-up checks the input, dead-letter and output topics, or creates them."""

    @pytest.mark.parametrize("missing", ["dlq", "input"])
    def test_a_missing_topic_exits_2_with_one_line(
        self,
        kafka_bootstrap: str,
        topic_factory: TopicFactory,
        log_file: Path,
        missing: str,
    ) -> None:
        absent = f"absent-{uuid.uuid4().hex[:8]}"
        if missing == "dlq":
            topic, args = topic_factory(1), ("--dlq-topic", absent)
        else:
            topic, args = absent, dlq_args(topic_factory)
        w = WorkerProcess(kafka_bootstrap, topic, *args, log=log_file)
        with w:
            assert w.proc is not None
            assert w.proc.wait(60) == 2
        role = "dead letters, --dlq-topic" if missing == "dlq" else "input, --topic"
        assert log_file.read_text().splitlines() == [
            f"config error: no topic {absent!r} ({role}) on {kafka_bootstrap}: create "
            f"it with `codec-kafka topics create {absent} --partitions 4 "
            f"--bootstrap-servers {kafka_bootstrap}`, or start with --create-topics"
        ]

    def test_create_topics_makes_the_missing_ones(
        self, kafka_bootstrap: str, topic_factory: TopicFactory, log_file: Path
    ) -> None:
        run = uuid.uuid4().hex[:8]
        topic, dlq, out = f"in-{run}", f"dlq-{run}", f"out-{run}"
        args = ["--dlq-topic", dlq, "--output-topic", out, "--create-topics"]
        args += ["--partitions", "3", "--schema", "small", "--codec", "msgspec-msgpack"]
        try:
            with WorkerProcess(kafka_bootstrap, topic, *args, log=log_file) as w:
                w.wait_ready()
                n = produce(
                    kafka_bootstrap, topic, records("msgspec-msgpack", "small", 50)
                )
                assert w.wait_for(n) == n
                assert w.stop() == 0
            admin = TopicAdmin(kafka_bootstrap)
            assert [admin.partitions(t) for t in (topic, dlq, out)] == [3, 3, 3]
            created = [
                line["topic"]
                for line in json_lines(log_file)
                if line["event"] == "topic_created"
            ]
            assert created == [topic, dlq, out]
        finally:
            for name in (topic, dlq, out):
                delete_topic(kafka_bootstrap, name, timeout=15)


class TestUnreachableBroker:
    """No broker: one clear line, librdkafka's retries quiet, a clean stop."""

    @pytest.mark.parametrize("level", ["info", "error"])
    def test_one_clear_line_then_a_graceful_stop(
        self, log_file: Path, level: str
    ) -> None:
        unreachable = "127.0.0.1:1"
        w = WorkerProcess(unreachable, "orders", "--log-level", level, log=log_file)
        with w:
            assert w.proc is not None
            pid = w.proc.pid
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and "kafka_unreachable" not in (
                log_file.read_text()
            ):
                time.sleep(0.2)
            assert w.stop() == 0
        text = log_file.read_text()
        lines = json_lines(log_file)
        assert len(lines) == len(text.splitlines()), "raw lines in the output"
        [said] = [line for line in lines if line["event"] == "kafka_unreachable"]
        assert said["error"].startswith(f"cannot reach Kafka at {unreachable}: ")
        assert "Connection refused" in said["error"]
        assert all(line["pid"] == pid and line["worker"] == 0 for line in lines)
        if level == "error":
            assert {line["level"] for line in lines} == {"error"}
