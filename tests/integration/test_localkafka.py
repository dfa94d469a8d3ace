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
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported, not in __all__
    AdminClient,
    ConfigResource,
)

import localkafka.broker
from localkafka import (
    STATE_FILE,
    LocalKafka,
    TopicAdmin,
    create_topic,
    delete_topic,
    kafka_version,
)
from localkafka.cli import main
from localkafka.process import port_open, stop_process_group
from localkafka.topics import cluster
from schemas.errors import LocalKafkaError
from service import __version__
from service.kafka.connection import DEFAULT_BOOTSTRAP
from service.lifecycle.child_processes import free_port, pid_alive

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


@pytest.mark.own_broker
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


@pytest.fixture
def listening_port() -> Iterator[int]:
    """A port a plain socket listens on (it accepts, but never speaks Kafka)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield int(taken.getsockname()[1])


@dataclass(frozen=True)
class CliBroker:
    """A broker left running by `codec-kafka start`."""

    data_dir: Path
    bootstrap: str
    pid: int


@pytest.fixture(scope="module")
def cli_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CliBroker]:
    """`codec-kafka start` in a fresh data dir for this module; stopped at the end."""
    data = tmp_path_factory.mktemp("cli-broker")
    start = _cli("start", "--data-dir", str(data), "--heap", "256m")
    assert start.returncode == 0, start.stderr
    state = json.loads((data / STATE_FILE).read_text())
    assert set(state) == {"pid", "bootstrap", "version", "security"}  # tools read it
    assert state["security"] == "plaintext"  # no client.toml: none is needed
    try:
        yield CliBroker(data, state["bootstrap"], int(state["pid"]))
    finally:
        _cli("stop", "--data-dir", str(data), timeout=60)
        if pid_alive(state["pid"]):
            stop_process_group(state["pid"], timeout=5)


def test_local_kafka_refuses_a_taken_port(tmp_path: Path, listening_port: int) -> None:
    kafka = LocalKafka(tmp_path / "busy", port=listening_port, heap="256m")
    with pytest.raises(LocalKafkaError, match=rf"^port {listening_port} .*not free"):
        kafka.start(timeout=30)
    assert kafka.pid is None
    assert not (tmp_path / "busy").exists()  # refused before anything ran


@pytest.mark.own_broker
def test_local_kafka_reports_broker_death(
    tmp_path: Path, listening_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The port is taken after the check (a race): the JVM dies, the log says why."""
    monkeypatch.setattr(localkafka.broker, "ensure_port_free", lambda *_: None)
    kafka = LocalKafka(tmp_path / "busy", port=listening_port, heap="256m")
    with pytest.raises(LocalKafkaError, match=r"(?s)log tail.*Address already in use"):
        kafka.start(timeout=30)
    assert kafka.pid is None
    assert (tmp_path / "busy" / "logs" / "server.log").is_file()  # kept for debugging


def test_local_kafka_tells_another_broker_from_its_own(
    tmp_path: Path, cli_broker: CliBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker already on the port answers the readiness probe: still an error."""
    monkeypatch.setattr(localkafka.broker, "ensure_port_free", lambda *_: None)
    port = _port(cli_broker.bootstrap)
    kafka = LocalKafka(tmp_path / "second", port=port, heap="256m")
    with pytest.raises(LocalKafkaError, match=rf"^port {port} .*not from the broker"):
        kafka.start(timeout=30)
    assert kafka.pid is None
    assert pid_alive(cli_broker.pid)  # the other broker is left alone
    assert cli_broker.bootstrap.endswith(f":{port}") and port_open(port)


def test_cli_start_refuses_the_port_of_a_running_broker(
    tmp_path: Path, cli_broker: CliBroker
) -> None:
    port = str(_port(cli_broker.bootstrap))
    done = _cli("start", "--port", port, "--data-dir", str(tmp_path / "k"))
    assert done.returncode == 1
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()  # one line, no traceback
    assert line.startswith("codec-kafka: error: port " + port), line
    assert not (tmp_path / "k" / STATE_FILE).exists()
    assert pid_alive(cli_broker.pid)


@pytest.mark.own_broker
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
    assert stop.stdout == f"stopped the broker at {bootstrap} (pid {pid}, {data})\n"
    assert not pid_alive(pid)
    assert not port_open(_port(bootstrap))
    assert not (data / STATE_FILE).exists()
    assert (data / "kraft-logs" / "meta.properties").is_file()  # data dir is kept
    assert _cli("stop", "--data-dir", str(data)).returncode == 0  # idempotent


@pytest.mark.own_broker
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


def test_cli_versions_and_usage(capsys: pytest.CaptureFixture[str]) -> None:
    labelled = f"codec-ab {__version__}, Kafka {kafka_version()}\n"
    assert main(["version"]) == 0
    assert capsys.readouterr().out == labelled
    assert re.fullmatch(r"4\.1\.\d+", kafka_version())
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == labelled  # the same line, not another number
    done = _cli("--help", timeout=30)  # the module entry shows the script's name
    assert done.returncode == 0 and done.stdout.startswith("usage: codec-kafka ")


def _topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    resource = ConfigResource("topic", topic)
    entries = admin.describe_configs([resource])[resource].result(timeout=10)
    return {key: entry.value for key, entry in entries.items()}


class TestTopicsCli:
    """`codec-kafka topics create|list|delete`: one line out per topic, errors in one."""

    def test_create_list_delete(
        self, kafka_bootstrap: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        names = [f"cli-{uuid.uuid4().hex[:10]}" for _ in range(2)]
        server = ["--bootstrap-servers", kafka_bootstrap]
        create = ["topics", "create", *names, "--partitions", "3", *server]
        config = [
            f"--topic-config={c}"
            for c in ("retention.ms=60000", "cleanup.policy=compact")
        ]
        assert main([*create, *config]) == 0
        assert capsys.readouterr().out == "".join(f"created {n}\n" for n in names)
        admin = TopicAdmin(kafka_bootstrap)
        assert admin.create(names[0], 3) is False  # the CLI waited for the leaders
        configs = _topic_configs(kafka_bootstrap, names[0])
        assert configs["retention.ms"] == "60000"
        assert configs["cleanup.policy"] == "compact"
        assert main([*create[:3], "--partitions", "3", *server]) == 0  # kept: fine
        assert capsys.readouterr().out == f"exists {names[0]}\n"
        setting = ["--topic-config", "retention.ms=120000"]
        again = [*create[:3], "--partitions", "3", *setting]
        assert main([*again, *server]) == 0  # an existing topic gets the setting
        assert (
            capsys.readouterr().out == f"exists {names[0]}: set retention.ms=120000\n"
        )
        configs = _topic_configs(kafka_bootstrap, names[0])
        assert configs["retention.ms"] == "120000"
        assert configs["cleanup.policy"] == "compact"  # the others are kept
        assert main(["topics", "list", *server]) == 0
        listed = capsys.readouterr().out.splitlines()
        assert set(names) <= set(listed) and listed == sorted(listed)
        assert not any(name.startswith("__") for name in listed)
        assert main(["topics", "delete", *names, *server]) == 0
        assert capsys.readouterr().out == "".join(f"deleted {n}\n" for n in names)
        assert not set(names) & set(admin.names())
        assert main(["topics", "delete", names[0], *server]) == 0  # gone: fine
        assert f"no topic {names[0]!r} to delete" in capsys.readouterr().err

    @pytest.mark.parametrize(
        ("extra", "message"),
        [
            (["--partitions", "5"], "has 2 partitions, not 5"),
            (["--topic-config", "no.such.config=1"], "Unknown topic config name"),
        ],
    )
    def test_create_errors_are_one_line(
        self,
        kafka_bootstrap: str,
        topic_factory: TopicFactory,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
        extra: list[str],
        message: str,
    ) -> None:
        monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)  # no flag
        topic = topic_factory(2)
        name = topic if "--partitions" in extra else topic + "-new"
        assert main(["topics", "create", name, *extra]) == 1
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith("codec-kafka: error: ") and message in line, line

    def test_default_is_the_broker_start_recorded(
        self,
        cli_broker: CliBroker,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
        name = f"pidfile-{uuid.uuid4().hex[:10]}"
        where = ["--data-dir", str(cli_broker.data_dir)]
        assert main(["topics", "create", name, "--partitions", "2", *where]) == 0
        assert name in TopicAdmin(cli_broker.bootstrap).names()
        assert main(["topics", "delete", name, *where]) == 0
        assert capsys.readouterr().out == f"created {name}\ndeleted {name}\n"

    def test_bootstrap_precedence(self, tmp_path: Path) -> None:
        """Flag, then env (tests/unit/test_settings.py has the file too), then a
        live recorded broker, else 127.0.0.1:9092."""

        def address(flag: str | None, environ: dict[str, str]) -> str:
            return cluster(
                flags={"kafka": {"bootstrap_servers": flag}} if flag else {},
                flag_names={},
                config_file=None,
                data_dir=tmp_path,
                environ=environ,
            ).bootstrap_servers

        env = {"KAFKA_BOOTSTRAP_SERVERS": "env:9092"}
        assert address("flag:1", env) == "flag:1"
        assert address(None, env) == "env:9092"
        assert address(None, {}) == DEFAULT_BOOTSTRAP
        dead = subprocess.Popen([sys.executable, "-c", ""])
        dead.wait()  # a stale state file: its broker is gone
        state = {"pid": dead.pid, "bootstrap": "stale:1", "version": "4.1.2"}
        (tmp_path / STATE_FILE).write_text(json.dumps(state))
        assert address(None, {}) == DEFAULT_BOOTSTRAP

    def test_unreachable_broker_fails_fast(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        address = f"127.0.0.1:{free_port()}"  # nothing listens there
        started = time.monotonic()
        assert main(["topics", "list", "--bootstrap-servers", address]) == 1
        assert time.monotonic() - started < 12
        out = capsys.readouterr()
        (line,) = out.err.splitlines()
        assert out.out == "" and f"no Kafka broker answers at {address}" in line

    @pytest.mark.parametrize(
        "argv",
        [
            ["topics", "create"],
            ["topics", "create", "t", "--topic-config", "novalue"],
            ["topics", "create", "t", "--partitions", "0"],
            ["topics", "delete"],
            ["topics"],
            ["start", "--port", "70000"],
        ],
    )
    def test_usage_errors_exit_2_in_one_line(
        self, argv: list[str], capsys: pytest.CaptureFixture[str]
    ) -> None:
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith("codec-kafka") and ": error: " in line, line
