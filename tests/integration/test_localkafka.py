"""Integration tests of the session broker and of the localkafka package itself."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from localkafka.broker import (
    STATE_FILE,
    LocalKafka,
    create_topic,
    delete_topic,
    kafka_version,
    pid_alive,
    port_open,
    stop_process_group,
)
from service.errors import LocalKafkaError

REPO = Path(__file__).resolve().parents[2]
QUIET = {"log.connection.close": False}
BIG = 16 * 1024 * 1024
TopicFactory = Callable[..., str]  # the topic_factory fixture of conftest.py


def _port(bootstrap: str) -> int:
    return int(bootstrap.rpartition(":")[2])


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "localkafka", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        check=False,
    )


def test_produce_consume_round_trip(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(3, config={"max.message.bytes": str(BIG)})
    big = os.urandom(1_500_000)  # the benchmark's largest payloads must fit
    sent = {f"k{i}".encode(): f"v{i}".encode() for i in range(20)} | {b"big": big}
    producer = Producer(
        {"bootstrap.servers": kafka_bootstrap, "message.max.bytes": BIG, **QUIET}
    )
    for key, value in sent.items():
        producer.produce(topic, value=value, key=key)
    assert producer.flush(30) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": f"{topic}-group",
            "auto.offset.reset": "earliest",
            **QUIET,
        }
    )
    got: dict[bytes, bytes] = {}
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(got) < len(sent) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got_key, got_value = msg.key(), msg.value()
                assert got_key is not None and got_value is not None
                got[got_key] = got_value
    finally:
        consumer.close()
    assert got == sent


def test_create_topic_is_idempotent_and_checks_partitions(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(2)
    create_topic(kafka_bootstrap, topic, 2)  # already exists: fine
    with pytest.raises(LocalKafkaError, match="partitions"):
        create_topic(kafka_bootstrap, topic, 5, timeout=10)
    delete_topic(kafka_bootstrap, topic)
    delete_topic(kafka_bootstrap, topic)  # already gone: fine


def test_local_kafka_lifecycle() -> None:
    kafka = LocalKafka(partitions_default=2, heap="256m")
    started = time.monotonic()
    with kafka:
        bootstrap = kafka.bootstrap_servers
        assert re.fullmatch(r"127\.0\.0\.1:\d+", bootstrap)
        assert time.monotonic() - started < 60
        pid, data_dir = kafka.pid, kafka.data_dir
        assert pid is not None and data_dir is not None and pid_alive(pid)
        assert (data_dir / "logs" / "server.log").is_file()
        admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
        assert list(admin.list_topics(timeout=10).brokers) == [1]
        create_topic(bootstrap, "lifecycle", 2)
        assert kafka.start() == bootstrap  # already running: same broker
        del admin
    assert not pid_alive(pid)
    assert not port_open(_port(bootstrap))
    assert not data_dir.exists()  # temp data dir removed
    kafka.stop()  # idempotent
    with pytest.raises(LocalKafkaError):
        _ = kafka.bootstrap_servers


def test_local_kafka_reports_broker_death(tmp_path: Path) -> None:
    with socket.socket() as taken:  # the requested port is busy: the JVM dies
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        kafka = LocalKafka(tmp_path / "busy", port=taken.getsockname()[1], heap="256m")
        with pytest.raises(
            LocalKafkaError, match=r"(?s)log tail.*Address already in use"
        ):
            kafka.start(timeout=30)
    assert kafka.pid is None
    assert (tmp_path / "busy" / "logs" / "server.log").is_file()  # kept for debugging


def test_cli_start_stop_round_trip(tmp_path: Path) -> None:
    data = tmp_path / "kafka"
    start = _cli("start", "--data-dir", str(data), "--heap", "256m")
    assert start.returncode == 0, start.stderr
    bootstrap = start.stdout.strip()
    assert re.fullmatch(r"127\.0\.0\.1:\d+", bootstrap), start.stdout
    pid = int(json.loads((data / STATE_FILE).read_text())["pid"])
    try:
        assert pid_alive(pid)
        assert port_open(_port(bootstrap))
        again = _cli("start", "--data-dir", str(data))
        assert again.returncode == 0 and again.stdout.strip() == bootstrap
    finally:
        stop = _cli("stop", "--data-dir", str(data), timeout=60)
        if pid_alive(pid):  # never leak the JVM, even if 'stop' is broken
            stop_process_group(pid, timeout=5)
    assert stop.returncode == 0, stop.stderr
    assert not pid_alive(pid)
    assert not port_open(_port(bootstrap))
    assert not (data / STATE_FILE).exists()
    assert (data / "kraft-logs" / "meta.properties").is_file()  # data dir is kept
    assert _cli("stop", "--data-dir", str(data)).returncode == 0  # idempotent


def test_cli_foreground_stops_on_sigterm(tmp_path: Path) -> None:
    data = tmp_path / "fg"
    cmd = [sys.executable, "-m", "localkafka", "start", "--foreground"]
    proc = subprocess.Popen(
        [*cmd, "--data-dir", str(data), "--heap", "256m"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    pid = None
    try:
        assert proc.stdout is not None
        bootstrap = proc.stdout.readline().strip()
        assert re.fullmatch(r"127\.0\.0\.1:\d+", bootstrap), proc.stderr
        pid = int(json.loads((data / STATE_FILE).read_text())["pid"])
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)
        if pid is not None and pid_alive(pid):
            stop_process_group(pid, timeout=5)
    assert not pid_alive(pid)
    assert not port_open(_port(bootstrap))
    assert not (data / STATE_FILE).exists()


def test_cli_version_matches_pom() -> None:
    done = _cli("version", timeout=30)
    assert done.returncode == 0
    assert done.stdout.strip() == kafka_version()
    assert re.fullmatch(r"4\.1\.\d+", kafka_version())
