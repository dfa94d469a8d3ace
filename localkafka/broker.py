"""Runs a real single-node KRaft Apache Kafka broker locally, without Docker.

The broker jars are resolved once by Maven from ``deploy/local-kafka/pom.xml``
(the single source of truth for the Kafka version) and cached as a classpath in
``deploy/local-kafka/target/classpath.txt``. ``LocalKafka`` formats a data dir,
starts ``kafka.Kafka`` in its own process group and waits until it answers.

CLI::

    python -m localkafka resolve
    python -m localkafka start [--port P] [--data-dir D] [--foreground]
    python -m localkafka stop [--data-dir D]
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from service.children import die_with_parent
from service.errors import LocalKafkaError

POM_ENV = "LOCAL_KAFKA_POM"
STATE_FILE = "broker.pid"
DEFAULT_DATA_DIR = ".local-kafka"
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
# What bin/kafka-server-start.sh uses by default (KAFKA_JVM_PERFORMANCE_OPTS).
_JVM_PERFORMANCE_OPTS = (
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
)
_QUIET = {"log.connection.close": False, "log_level": 3}


def pom_path() -> Path:
    """Returns the pom pinning the broker (env ``LOCAL_KAFKA_POM`` overrides it)."""
    if env := os.environ.get(POM_ENV):
        return Path(env).resolve()
    return Path(__file__).resolve().parents[1] / "deploy" / "local-kafka" / "pom.xml"


def kafka_version() -> str:
    """Returns the pinned Kafka version (``kafka.version`` property of the pom)."""
    found = re.search(r"<kafka\.version>\s*([^<\s]+)\s*<", pom_path().read_text())
    if found is None:
        raise LocalKafkaError(f"no <kafka.version> property in {pom_path()}")
    return found.group(1)


def resolve_classpath(*, force: bool = False) -> str:
    """Returns the broker classpath, running Maven if the cache is missing or stale.

    Args:
        force: Re-resolve even if the cached classpath looks valid.

    Raises:
        LocalKafkaError: Maven is missing or failed.
    """
    pom = pom_path()
    cache = pom.parent / "target" / "classpath.txt"
    if not force and cache.is_file() and cache.stat().st_mtime >= pom.stat().st_mtime:
        jars = cache.read_text().strip()
        if jars and all(Path(jar).is_file() for jar in jars.split(os.pathsep)):
            return jars
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LocalKafkaError("'mvn' is not on PATH: install Maven 3.8+ (Kafka jars)")
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_name(f"classpath.{os.getpid()}.tmp")
    goal = ["dependency:build-classpath", f"-Dmdep.outputFile={tmp}"]
    cmd = [mvn, "-q", "-B", "-Dstyle.color=never", "-f", str(pom), *goal]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)  # noqa: S603
    except subprocess.TimeoutExpired as exc:
        raise LocalKafkaError(f"Maven timed out resolving {pom}") from exc
    if done.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        out = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise LocalKafkaError(f"Maven failed on {pom} ({done.returncode}):\n{out}")
    os.replace(tmp, cache)
    return cache.read_text().strip()


def _java() -> str:
    home = Path(os.environ.get("JAVA_HOME") or "/nonexistent") / "bin" / "java"
    java = str(home) if home.is_file() else shutil.which("java")
    if java is None:
        raise LocalKafkaError("'java' not found (PATH, JAVA_HOME): install a JDK 17+")
    return java


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"({path.name}: no log)"


def _free_ports(count: int) -> list[int]:
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Returns whether something accepts TCP connections on ``host:port``."""
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((host, port)) == 0


def pid_alive(pid: int) -> bool:
    """Returns whether ``pid`` is a live process (zombies count as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:  # no procfs: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def wait_until_ready(
    bootstrap: str, timeout: float = 60.0, alive: Callable[[], bool] | None = None
) -> None:
    """Waits until a broker at ``bootstrap`` answers a metadata request.

    Args:
        bootstrap: ``host:port`` of the broker.
        timeout: Seconds before giving up.
        alive: Returns False once the broker process has died (stops the wait).

    Raises:
        TimeoutError: Not ready within ``timeout`` seconds.
        LocalKafkaError: ``alive`` reported that the broker process died.
    """
    host, _, port = bootstrap.rpartition(":")
    deadline = time.monotonic() + timeout
    admin: AdminClient | None = None  # kept referenced while its requests run
    while (left := deadline - time.monotonic()) > 0:
        if alive is not None and not alive():
            raise LocalKafkaError("broker process exited during start")
        if port_open(int(port), host):
            admin = admin or AdminClient({"bootstrap.servers": bootstrap, **_QUIET})
            with contextlib.suppress(KafkaException):
                if admin.list_topics(timeout=max(0.5, min(5.0, left))).brokers:
                    return
        time.sleep(0.2)
    raise TimeoutError(f"Kafka at {bootstrap} not ready after {timeout:.0f}s")


def broker_properties(
    port: int, controller_port: int, log_dir: Path, partitions_default: int = 4
) -> dict[str, str]:
    """Returns the server.properties of the combined broker+controller node 1."""
    big, one = str(MAX_MESSAGE_BYTES), "1"
    return {
        "process.roles": "broker,controller",
        "node.id": one,
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(log_dir),
        "num.partitions": str(partitions_default),
        "auto.create.topics.enable": "false",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.replication.factor": one,
        "offsets.topic.num.partitions": "8",
        "transaction.state.log.replication.factor": one,
        "transaction.state.log.min.isr": one,
        "share.coordinator.state.topic.replication.factor": one,
        "share.coordinator.state.topic.min.isr": one,
        "message.max.bytes": big,
        "replica.fetch.max.bytes": big,
    }


def stop_process_group(
    pid: int, timeout: float = 20.0, wait: Callable[[float], object] | None = None
) -> None:
    """SIGTERMs process group ``pid``; SIGKILLs it if still alive after ``timeout``.

    Args:
        pid: Leader of the process group (the broker JVM).
        timeout: Seconds to wait after SIGTERM.
        wait: ``Popen.wait`` when ``pid`` is our child (reaps it).
    """
    for sig, grace in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, sig)
        if wait is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                wait(grace)
                return
            continue
        deadline = time.monotonic() + grace
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not pid_alive(pid):
            return
    raise LocalKafkaError(f"broker pid {pid} survived SIGKILL")


class LocalKafka:
    """A single-node KRaft broker in a subprocess; also a context manager.

    Args:
        data_dir: Data, config and logs; a temp dir (removed on stop) if None.
        port: Broker listener port on 127.0.0.1; a free one if None.
        partitions_default: ``num.partitions`` of the broker.
        heap: JVM heap (-Xms and -Xmx), e.g. ``"1g"``.
        overrides: Extra server.properties entries.
        detached: Leave the broker running when this process exits (CLI use).
    """

    def __init__(
        self,
        data_dir: Path | None = None,
        port: int | None = None,
        *,
        partitions_default: int = 4,
        heap: str = "1g",
        overrides: Mapping[str, str] | None = None,
        detached: bool = False,
    ) -> None:
        self.data_dir = Path(data_dir).resolve() if data_dir is not None else None
        self._owns_dir = False
        self._port = port
        self._partitions = partitions_default
        self._heap = heap
        self._overrides = dict(overrides or {})
        self._detached = detached
        self._proc: subprocess.Popen[bytes] | None = None
        self._bootstrap: str | None = None

    @property
    def bootstrap_servers(self) -> str:
        """The ``127.0.0.1:PORT`` bootstrap address (after start())."""
        if self._bootstrap is None:
            raise LocalKafkaError("LocalKafka is not started")
        return self._bootstrap

    @property
    def pid(self) -> int | None:
        """The broker JVM's pid (and process group id), None if not running."""
        return self._proc.pid if self._proc is not None else None

    def start(self, timeout: float = 60.0) -> str:
        """Resolves jars, formats storage, starts the broker, waits until it answers.

        Args:
            timeout: Seconds for the broker to answer (jar resolution excluded).

        Returns:
            The bootstrap address ``127.0.0.1:PORT``.

        Raises:
            LocalKafkaError: Tools missing, or the broker died or timed out (the
                message has the tail of its log).
        """
        if self._proc is not None:
            return self.bootstrap_servers
        if not self._detached:
            atexit.register(self.stop)
        try:
            cmd = [
                _java(),
                "-Djava.awt.headless=true",
                "-Dlog4j2.shutdownHookEnabled=false",
            ]
            cmd += [f"-Dlog4j2.configurationFile={pom_path().parent / 'log4j2.yaml'}"]
            if self.data_dir is None:
                self.data_dir = Path(tempfile.mkdtemp(prefix="local-kafka-"))
                self._owns_dir = True
            logs = self.data_dir / "logs"
            logs.mkdir(parents=True, exist_ok=True)
            cmd += [f"-Dkafka.logs.dir={logs}", "-cp", resolve_classpath()]
            for attempt in range(3):
                port = self._launch(cmd, self.data_dir)
                try:
                    wait_until_ready(f"127.0.0.1:{port}", timeout, alive=self._running)
                except (LocalKafkaError, TimeoutError) as exc:
                    log = (
                        _tail(logs / "broker.out", 15)
                        + "\n"
                        + _tail(logs / "server.log")
                    )
                    self._kill(timeout=5.0)
                    if (
                        "Address already in use" in log
                        and not self._port
                        and attempt < 2
                    ):
                        continue  # lost a race for a free port: retry with others
                    raise LocalKafkaError(
                        f"Kafka broker failed to start ({exc}); data dir "
                        f"{self.data_dir}; log tail:\n{log}"
                    ) from exc
                self._bootstrap = f"127.0.0.1:{port}"
                return self._bootstrap
            raise AssertionError("unreachable")  # pragma: no cover
        except BaseException:
            self.stop()
            raise

    def _launch(self, java: list[str], data_dir: Path) -> int:
        port, controller_port = _free_ports(2)
        if self._port:
            controller_port = next(p for p in _free_ports(2) if p != self._port)
            port = self._port
        kraft = data_dir / "kraft-logs"
        props = data_dir / "server.properties"
        config = broker_properties(port, controller_port, kraft, self._partitions)
        config.update(self._overrides)
        props.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
        if not (kraft / "meta.properties").is_file():
            fmt = [*java, "kafka.tools.StorageTool", "format", "-t", new_cluster_id()]
            done = subprocess.run(  # noqa: S603
                [*fmt, "-c", str(props)], capture_output=True, text=True, timeout=120
            )
            if done.returncode != 0:
                out = done.stdout + done.stderr
                raise LocalKafkaError(f"kafka storage format failed:\n{out}")
        heap = [f"-Xms{self._heap}", f"-Xmx{self._heap}", *_JVM_PERFORMANCE_OPTS]
        with open(data_dir / "logs" / "broker.out", "ab") as out_file:
            self._proc = subprocess.Popen(  # noqa: S603
                [*java[:1], *heap, *java[1:], "kafka.Kafka", str(props)],
                stdin=subprocess.DEVNULL,
                stdout=out_file,
                stderr=subprocess.STDOUT,
                cwd=data_dir,
                start_new_session=True,
                preexec_fn=None if self._detached else die_with_parent(signal.SIGKILL),
            )
        return port

    def _running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _kill(self, timeout: float) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_process_group(proc.pid, timeout, wait=proc.wait)

    def wait(self) -> int:
        """Blocks until the broker process exits; returns its exit code."""
        return self._proc.wait() if self._proc is not None else 0

    def stop(self, timeout: float = 20.0) -> None:
        """Stops the broker (SIGTERM, then SIGKILL); removes a temp data dir.

        Idempotent; also runs at interpreter exit unless ``detached``.
        """
        self._kill(timeout)
        self._bootstrap = None
        atexit.unregister(self.stop)
        if self._owns_dir and self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir, self._owns_dir = None, False

    def __enter__(self) -> LocalKafka:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def new_cluster_id() -> str:
    """Returns a random Kafka cluster id (base64url UUID, never starting with '-')."""
    while True:  # like Kafka's Uuid.randomUuid: a leading '-' would parse as a flag
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _wait_topic(
    admin: AdminClient, name: str, timeout: float, done: Callable[[Any], bool]
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(KafkaException):
            if done(admin.list_topics(topic=name, timeout=5.0).topics.get(name)):
                return
        time.sleep(0.1)
    raise TimeoutError(f"topic {name!r} not settled after {timeout:.0f}s")


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int,
    *,
    config: dict[str, str] | None = None,
    timeout: float = 30,
) -> None:
    """Creates a topic (replication 1); waits until every partition has a leader.

    An existing topic is accepted if it has ``partitions`` partitions.

    Raises:
        LocalKafkaError: The topic exists with another partition count.
        KafkaException: The broker rejected the creation.
        TimeoutError: The partitions got no leader in time.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap, **_QUIET})
    topic = NewTopic(name, partitions, replication_factor=1, config=dict(config or {}))
    futures = admin.create_topics(
        [topic], request_timeout=timeout, operation_timeout=timeout
    )
    try:
        futures[name].result(timeout=timeout)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise

    def ready(meta: Any) -> bool:
        if meta is None or meta.error is not None or not meta.partitions:
            return False
        if len(meta.partitions) != partitions:
            got = len(meta.partitions)
            raise LocalKafkaError(
                f"topic {name!r} has {got} partitions, not {partitions}"
            )
        return all(p.leader >= 0 and p.error is None for p in meta.partitions.values())

    _wait_topic(admin, name, timeout, ready)


def delete_topic(bootstrap: str, name: str, *, timeout: float = 30) -> None:
    """Deletes a topic (a missing one is fine); waits until its metadata is gone."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **_QUIET})
    futures = admin.delete_topics(
        [name], request_timeout=timeout, operation_timeout=timeout
    )
    try:
        futures[name].result(timeout=timeout)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise
    _wait_topic(admin, name, timeout, lambda m: m is None or m.error is not None)


def _read_state(data_dir: Path) -> dict[str, Any] | None:
    """Returns the state of the CLI broker in ``data_dir`` if it is still running."""
    try:
        state = json.loads((data_dir / STATE_FILE).read_text())
        pid = int(state["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    with contextlib.suppress(OSError):  # a recycled pid is not our broker
        if b"kafka.Kafka" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return None
    return dict(state) if pid_alive(pid) else None


def _start(args: argparse.Namespace) -> int:
    data_dir: Path = args.data_dir.resolve()
    if (running := _read_state(data_dir)) is not None:
        print(f"localkafka: already running, pid {running['pid']}", file=sys.stderr)
        print(running["bootstrap"], flush=True)
        return 0
    kafka = LocalKafka(
        data_dir,
        args.port,
        partitions_default=args.partitions,
        heap=args.heap,
        detached=not args.foreground,
    )
    if (
        args.foreground
    ):  # before anything is printed: a prompt SIGTERM must stop cleanly

        def on_sigterm(signum: int, frame: FrameType | None) -> None:
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, on_sigterm)
    try:
        bootstrap = kafka.start(timeout=args.timeout)
    except KeyboardInterrupt:
        kafka.stop()
        return 0
    state = {"pid": kafka.pid, "bootstrap": bootstrap, "version": kafka_version()}
    (data_dir / STATE_FILE).write_text(json.dumps(state) + "\n")
    if not args.foreground:
        print(bootstrap, flush=True)
        return 0
    try:
        print(bootstrap, flush=True)
        code = kafka.wait()
        print(f"localkafka: broker exited with code {code}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        kafka.stop()
        (data_dir / STATE_FILE).unlink(missing_ok=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m localkafka``; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m localkafka",
        description="Run a local single-node KRaft Kafka broker without Docker.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("resolve", help="resolve the broker jars with Maven, then exit")
    sub.add_parser("version", help="print the pinned Kafka version")
    start = sub.add_parser("start", help="start a broker, print its bootstrap address")
    stop = sub.add_parser("stop", help="stop the broker started by 'start'")
    for cmd in (start, stop):
        cmd.add_argument(
            "--data-dir",
            type=Path,
            default=Path(DEFAULT_DATA_DIR),
            help=f"data, config, logs and {STATE_FILE} (default: {DEFAULT_DATA_DIR}/)",
        )
    start.add_argument("--port", type=int, default=None, help="broker port")
    start.add_argument("--partitions", type=int, default=4, help="num.partitions")
    start.add_argument("--heap", default="1g", help="JVM heap, e.g. 1g")
    start.add_argument("--timeout", type=float, default=60.0, help="start deadline (s)")
    start.add_argument(
        "--foreground", action="store_true", help="run until SIGINT/SIGTERM, then stop"
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "resolve":
            jars = resolve_classpath(force=True).split(os.pathsep)
            print(f"kafka {kafka_version()}: {len(jars)} jars resolved")
        elif args.command == "version":
            print(kafka_version())
        elif args.command == "stop":
            if (state := _read_state(args.data_dir.resolve())) is not None:
                stop_process_group(int(state["pid"]))
            else:
                print("localkafka: no broker running", file=sys.stderr)
            (args.data_dir / STATE_FILE).unlink(missing_ok=True)
        else:
            return _start(args)
    except (LocalKafkaError, TimeoutError) as exc:
        print(f"localkafka: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
