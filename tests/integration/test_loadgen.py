"""The load generator against a real broker: delivery, headers, record/replay, rate.

No tight timing assertions: the machine is shared, so rates are checked loosely.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from codec import CodecName, get_codec
from loadgen.config import LoadgenSettings
from loadgen.generator import run
from loadgen.payloads import make_payloads
from loadgen.recording import read_recording, record
from localkafka import TopicAdmin, delete_topic
from schemas.errors import ConfigError
from tests.support import consume_all

TopicFactory = Callable[..., str]


def settings(bootstrap: str, topic: str, **kw: Any) -> LoadgenSettings:
    base = {
        "kafka": {"bootstrap_servers": bootstrap},
        "topic": topic,
        "progress": "never",
    }
    return LoadgenSettings.model_validate(base | kw)


def seq_of(msg: Any) -> int:
    return int(dict(msg.headers())["x-seq"])


class TestDelivery:
    """N messages arrive exactly once, decodable, with the contract's headers."""

    @pytest.mark.parametrize(
        ("codec", "processes"), [("msgspec-msgpack", 1), ("protobuf", 2)]
    )
    def test_exactly_once_with_headers(
        self,
        kafka_bootstrap: str,
        topic_factory: TopicFactory,
        codec: str,
        processes: int,
    ) -> None:
        topic = topic_factory(partitions=3)
        n = 3000
        s = settings(
            kafka_bootstrap,
            topic,
            codec=codec,
            profile="medium",
            rate=3000,
            count=n,
            pool_size=100,
            seed=7,
            run_id="it-run",
            processes=processes,
        )
        summary = run(s)
        assert (summary.sent, summary.acked, summary.failed) == (n, n, 0)
        msgs = consume_all(kafka_bootstrap, topic, n)
        assert sorted(seq_of(m) for m in msgs) == list(range(n))
        wire = get_codec(s.codec, "medium")
        pool = make_payloads("medium", 100, seed=7)
        for m in msgs:
            names = [k for k, _ in m.headers()]
            assert names == ["x-sent-ns", "content-type", "x-seq", "x-run-id"]
            headers = dict(m.headers())
            assert headers["content-type"] == wire.content_type.encode()
            assert headers["x-run-id"] == b"it-run"
            sent_ns = int(headers["x-sent-ns"])
            assert m.timestamp()[1] == sent_ns // 1_000_000
            seq = seq_of(m)
            expected = pool[seq % 100]
            assert m.key() == expected["order_id"].encode()
            decoded = wire.to_builtins(wire.decode(m.value()))
            assert decoded == wire.to_builtins(wire.from_builtins(expected))

    def test_intended_times_follow_the_schedule(
        self, kafka_bootstrap: str, topic_factory: TopicFactory
    ) -> None:
        topic = topic_factory(partitions=1)
        run(settings(kafka_bootstrap, topic, codec="msgspec-json", rate=500, count=200))
        msgs = sorted(consume_all(kafka_bootstrap, topic, 200), key=seq_of)
        stamps = [int(dict(m.headers())["x-sent-ns"]) for m in msgs]
        gaps = {b - a for a, b in itertools.pairwise(stamps)}
        assert gaps <= {1_999_999, 2_000_000, 2_000_001}


class TestTopics:
    """The topic must exist, unless `--create-topics` creates it."""

    def test_a_missing_topic_is_one_config_error_naming_the_fix(
        self, kafka_bootstrap: str
    ) -> None:
        absent = f"absent-{uuid.uuid4().hex[:8]}"
        with pytest.raises(ConfigError) as info:
            run(settings(kafka_bootstrap, absent, count=1))
        assert str(info.value) == (
            f"config error: no topic {absent!r} (--topic, LOADGEN_TOPIC) on "
            f"{kafka_bootstrap}: create it with `codec-kafka topics create {absent} "
            f"--partitions 4 --bootstrap-servers {kafka_bootstrap}`, or start with "
            "--create-topics"
        )
        assert absent not in TopicAdmin(kafka_bootstrap).names()

    def test_create_topics_creates_it_with_its_partitions(
        self, kafka_bootstrap: str
    ) -> None:
        topic = f"made-{uuid.uuid4().hex[:8]}"
        s = settings(
            kafka_bootstrap, topic, create_topics=True, partitions=3, count=300
        )
        try:
            summary = run(s)
            assert (summary.sent, summary.acked) == (300, 300)
            assert TopicAdmin(kafka_bootstrap).partitions(topic) == 3
            msgs = consume_all(kafka_bootstrap, topic, 300)
            assert {m.partition() for m in msgs} == {0, 1, 2}
        finally:
            delete_topic(kafka_bootstrap, topic, timeout=15)


class TestPacedRun:
    """A short paced run holds its rate (loosely: the machine is shared)."""

    def test_rate_and_report(
        self, kafka_bootstrap: str, topic_factory: TopicFactory
    ) -> None:
        topic = topic_factory(partitions=2)
        s = settings(
            kafka_bootstrap, topic, codec="msgspec-msgpack", rate=2000, duration=2.5
        )
        summary = run(s)
        assert summary.sent == 5000
        assert summary.target_rate == 2000
        assert summary.achieved_rate == pytest.approx(2000, rel=0.1)
        assert summary.acked == 5000
        assert len(summary.per_second) == 2
        assert summary.ack_latency.p50_ms is not None
        assert summary.exit_code == 0


class TestRecordReplay:
    """record captures a topic; replay reproduces it, restamped, or transcoded."""

    def test_record_then_replay_reproduces_messages(
        self, kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
    ) -> None:
        source, target = topic_factory(partitions=3), topic_factory(partitions=3)
        run(settings(kafka_bootstrap, source, codec="protobuf", rate=2000, count=300))
        out = tmp_path / "traffic.rec.gz"
        s = settings(
            kafka_bootstrap, source, record_out=out, record_timeout_s=2, record_max=300
        )
        count, info = record(s)
        assert (count, info.partitions) == (300, 3)
        _, recorded = read_recording(out)
        original = {seq_of_record(r): r for r in recorded}
        assert sorted(original) == list(range(300))

        replayed = run(
            settings(kafka_bootstrap, target, replay=out, speed=50.0, run_id="again")
        )
        assert (replayed.sent, replayed.acked) == (300, 300)
        msgs = consume_all(kafka_bootstrap, target, 300)
        assert len(msgs) == 300
        by_value = {(r.key, r.value): r for r in recorded}
        for m in msgs:
            r = by_value[(m.key(), m.value())]
            assert m.partition() == r.partition
            headers = dict(m.headers())
            assert headers["x-run-id"] == b"again"
            assert headers["content-type"] == dict(r.headers)["content-type"]
        assert sorted(seq_of(m) for m in msgs) == list(range(300))

    @pytest.mark.parametrize("target_codec", ["msgspec-msgpack", "json+pydantic"])
    def test_transcoded_replay_decodes_to_the_originals(
        self,
        kafka_bootstrap: str,
        topic_factory: TopicFactory,
        tmp_path: Path,
        target_codec: CodecName,
    ) -> None:
        source, target = topic_factory(partitions=2), topic_factory(partitions=2)
        run(settings(kafka_bootstrap, source, codec="protobuf", rate=2000, count=120))
        out = tmp_path / "traffic.rec"
        record(settings(kafka_bootstrap, source, record_out=out, record_timeout_s=2))
        s = settings(
            kafka_bootstrap,
            target,
            replay=out,
            rate=3000,
            transcode=target_codec,
            profile="medium",
        )
        assert run(s).acked == 120
        proto = get_codec("protobuf", "medium")
        _, recorded = read_recording(out)
        originals = {
            r.key: proto.to_builtins(proto.decode(r.value or b"")) for r in recorded
        }
        wire = get_codec(target_codec, "medium")
        for m in consume_all(kafka_bootstrap, target, 120):
            assert dict(m.headers())["content-type"] == wire.content_type.encode()
            assert wire.to_builtins(wire.decode(m.value())) == originals[m.key()]


def seq_of_record(r: Any) -> int:
    return int(dict(r.headers)["x-seq"])


def _sent_so_far(port: int, deadline: float) -> float:
    """loadgen_messages_sent_total once positive (the run has started), else 0."""
    url = f"http://127.0.0.1:{port}/metrics"
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                for line in resp.read().decode().splitlines():
                    if line.startswith("loadgen_messages_sent_total{"):
                        sent = float(line.rsplit(" ", 1)[1])
                        if sent > 0:
                            return sent
        except OSError:
            pass  # not serving yet
        time.sleep(0.2)
    return 0.0


class TestCommandLine:
    """The console entry point as compose runs it: LOADGEN_* only, no flags."""

    def _env(self, bootstrap: str, topic: str, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOADGEN_")}
        env |= {
            "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "LOADGEN_TOPIC": topic,
            "LOADGEN_CODEC": "orjson+pydantic",
            "LOADGEN_PROFILE": "small",
            "LOADGEN_RATE": "1000",
            "LOADGEN_OUTPUT": "json",
        }
        return env | extra

    def test_env_only_run_prints_one_json_object(
        self, kafka_bootstrap: str, topic_factory: TopicFactory
    ) -> None:
        topic = topic_factory(partitions=1)
        env = self._env(kafka_bootstrap, topic, LOADGEN_COUNT="500")
        done = subprocess.run(
            [sys.executable, "-m", "loadgen"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert (summary["sent"], summary["acked"], summary["codec"]) == (
            500,
            500,
            "orjson+pydantic",
        )

    def test_sigterm_stops_gracefully(
        self, kafka_bootstrap: str, topic_factory: TopicFactory
    ) -> None:
        topic = topic_factory(partitions=1)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        env = self._env(
            kafka_bootstrap,
            topic,
            LOADGEN_DURATION="600",
            LOADGEN_METRICS_PORT=str(port),
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "loadgen"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert _sent_so_far(port, deadline=time.monotonic() + 60) > 0
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0, err
        summary = json.loads(out)
        assert summary["interrupted"] is True
        assert summary["sent"] > 0
        assert summary["acked"] == summary["sent"]
