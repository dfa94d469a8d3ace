"""The broker itself: ``LocalKafka`` runs one KRaft node as a JVM and stops it.

``LocalKafka`` formats a data dir, starts ``kafka.Kafka`` in its own process group
on 127.0.0.1, waits until it answers, and then checks that the answer came from
that JVM and not from another server already on the port.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Final

from confluent_kafka import KafkaException

from localkafka.classpath import java_executable, pom_path, resolve_classpath
from localkafka.process import (
    ensure_port_free,
    owns_listener,
    port_open,
    stop_process_group,
)
from localkafka.topics import admin_client
from schemas.errors import LocalKafkaError
from service.children import die_with_parent, free_ports

MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
"""The benchmark's largest payloads (1.5 MB) fit with room to spare."""
_JVM_PERFORMANCE_OPTS: Final = (  # bin/kafka-server-start.sh's defaults
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
)
_START_ATTEMPTS: Final = 3
"""A free port chosen by us can be taken before the JVM binds it: retry twice."""
_HOST: Final = "127.0.0.1"


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
    admin = None  # kept referenced while its requests run
    while (left := deadline - time.monotonic()) > 0:
        if alive is not None and not alive():
            raise LocalKafkaError("broker process exited during start")
        if port_open(int(port), host):
            admin = admin or admin_client(bootstrap)
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
        "controller.quorum.voters": f"1@{_HOST}:{controller_port}",
        "listeners": f"PLAINTEXT://{_HOST}:{port},CONTROLLER://{_HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{_HOST}:{port}",
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


def new_cluster_id() -> str:
    """Returns a random Kafka cluster id (base64url UUID, never starting with '-')."""
    while True:  # like Kafka's Uuid.randomUuid: a leading '-' would parse as a flag
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"({path.name}: no log)"


class LocalKafka:
    """A single-node KRaft broker in a subprocess; also a context manager.

    Args:
        data_dir: Data, config and logs; a temp dir (removed on stop) if None.
        port: Broker listener port on 127.0.0.1; a free one if None. A port
            another process listens on is refused (no JVM is started).
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
            LocalKafkaError: The port is taken, tools are missing, or the broker
                died or timed out (the message's first line says which and where
                the logs are; the lines after it are the log's tail).
        """
        if self._proc is not None:
            return self.bootstrap_servers
        if self._port:
            ensure_port_free(self._port, _HOST)
        if not self._detached:
            atexit.register(self.stop)
        try:
            return self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout: float) -> str:
        java = java_executable()
        if self.data_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix="local-kafka-"))
            self._owns_dir = True
        logs = self.data_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        cmd = [
            java,
            "-Djava.awt.headless=true",
            "-Dlog4j2.shutdownHookEnabled=false",
            f"-Dlog4j2.configurationFile={pom_path().parent / 'log4j2.yaml'}",
            f"-Dkafka.logs.dir={logs}",
            "-cp",
            resolve_classpath(),
        ]
        for attempt in range(1, _START_ATTEMPTS + 1):
            port = self._launch(cmd, self.data_dir)
            retry = not self._port and attempt < _START_ATTEMPTS
            try:
                wait_until_ready(f"{_HOST}:{port}", timeout, alive=self._running)
            except (LocalKafkaError, TimeoutError) as exc:
                log = _tail(logs / "broker.out", 15) + "\n" + _tail(logs / "server.log")
                self._kill(timeout=5.0)
                if retry and "Address already in use" in log:
                    continue  # lost a race for a free port: retry with others
                raise LocalKafkaError(
                    f"Kafka broker failed to start ({exc}); data dir {self.data_dir}, "
                    f"logs in {logs}; log tail:\n{log}"
                ) from exc
            if self._serves(port):
                self._bootstrap = f"{_HOST}:{port}"
                return self._bootstrap
            pid = self.pid
            self._kill(timeout=5.0)
            if not retry:
                raise LocalKafkaError(
                    f"port {port} on {_HOST} answered, but not from the broker just "
                    f"started (pid {pid}): another process listens there"
                )
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _serves(self, port: int) -> bool:
        """Whether the broker that answered on ``port`` is our JVM.

        The readiness probe only proves that *a* broker answers; if another one
        took the port, our JVM dies a second later with "Address already in use".
        """
        if self._proc is None or not self._running():
            return False
        owned = owns_listener(self._proc.pid, port)
        return owned is None or owned  # no procfs: being alive is all we can check

    def _launch(self, java: list[str], data_dir: Path) -> int:
        port, controller_port = free_ports(2, _HOST)
        if self._port:
            controller_port = next(p for p in free_ports(2, _HOST) if p != self._port)
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
