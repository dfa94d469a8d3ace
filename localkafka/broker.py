"""The broker itself: ``LocalKafka`` runs one KRaft node as a JVM and stops it.

``LocalKafka`` formats a data dir, starts ``kafka.Kafka`` in its own process group
on 127.0.0.1, waits until it answers, and then checks that the answer came from
that JVM and not from another server already on the port.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from confluent_kafka import KafkaException

from localkafka import security as security_
from localkafka.classpath import java_executable, pom_path, resolve_classpath
from localkafka.process import (
    ensure_port_free,
    owns_listener,
    port_open,
    stop_process_group,
)
from localkafka.topics import admin_client
from schemas.errors import LocalKafkaError
from service.lifecycle.child_processes import die_with_parent, free_ports

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
    bootstrap: str,
    timeout: float = 60.0,
    alive: Callable[[], bool] | None = None,
    conf: Mapping[str, Any] | None = None,
) -> None:
    """Waits until a broker at ``bootstrap`` answers a metadata request.

    Args:
        bootstrap: ``host:port`` of the broker.
        timeout: Seconds before giving up.
        alive: Returns False once the broker process has died (stops the wait).
        conf: librdkafka settings of a secured listener (default: plaintext).

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
            admin = admin or admin_client(
                {**(conf or {}), "bootstrap.servers": bootstrap}
            )
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
        security: The client listener's mode (`security.SECURITY_MODES`); other
            than plaintext, `start` makes the TLS material and the SCRAM user, and
            writes `client.toml` in the data dir (`client_file`).
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
        security: str = "plaintext",
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
        if security not in security_.SECURITY_MODES:
            raise LocalKafkaError(f"unknown security mode {security!r}")
        self.security = security
        self._material: security_.Material | None = None
        self._password: str | None = None
        self.client_settings: dict[str, str] = {}
        """The `[kafka]` settings of a client (after start())."""

    @property
    def material(self) -> security_.Material | None:
        """The TLS material made at start (modes with TLS)."""
        return self._material

    @property
    def client_file(self) -> Path | None:
        """`<data-dir>/client.toml` (mode 0600): the `[kafka]` settings of a client
        of a secured listener; None for plaintext."""
        if self.security == "plaintext" or self.data_dir is None:
            return None
        return self.data_dir / security_.CLIENT_FILE

    def client_conf(self) -> dict[str, Any]:
        """librdkafka settings of a client (secrets in plain text): for tests."""
        from service.kafka.connection import KafkaConnection

        kafka = KafkaConnection.model_validate(self.client_settings)
        return kafka.librdkafka(plaintext_secrets=True)

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
        if self.security != "plaintext":
            self._material = security_.make_material(
                self.data_dir / "tls", client=self.security == "mtls"
            )
        for attempt in range(1, _START_ATTEMPTS + 1):
            port, probe = self._launch(cmd, self.data_dir)
            retry = not self._port and attempt < _START_ATTEMPTS
            try:
                wait_until_ready(f"{_HOST}:{probe}", timeout, alive=self._running)
                self._secure(f"{_HOST}:{port}", f"{_HOST}:{probe}", timeout)
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

    def _secure(self, bootstrap: str, internal: str, timeout: float) -> None:
        """The SCRAM user, `client.toml`, and a client's first answer on `bootstrap`."""
        if self.security == "plaintext":
            return
        if security_.uses_sasl(self.security):
            self._password = self._password or security_.new_password()
            security_.add_scram_user(internal, security_.USER, self._password)
        self.client_settings = security_.client_settings(
            self.security, bootstrap, self._material, self._password
        )
        if (path := self.client_file) is not None:
            security_.write_client_file(path, self.client_settings)
        conf = self.client_conf()
        wait_until_ready(bootstrap, timeout, alive=self._running, conf=conf)

    def _serves(self, port: int) -> bool:
        """Whether the broker that answered on ``port`` is our JVM.

        The readiness probe only proves that *a* broker answers; if another one
        took the port, our JVM dies a second later with "Address already in use".
        """
        if self._proc is None or not self._running():
            return False
        owned = owns_listener(self._proc.pid, port)
        return owned is None or owned  # no procfs: being alive is all we can check

    def _launch(self, java: list[str], data_dir: Path) -> tuple[int, int]:
        """Starts the JVM; returns the client port and the port to probe first."""
        port, controller_port, internal = free_ports(3, _HOST)
        if self._port:
            others = [p for p in free_ports(3, _HOST) if p != self._port]
            port, controller_port, internal = self._port, others[0], others[1]
        kraft = data_dir / "kraft-logs"
        props = data_dir / "server.properties"
        config = broker_properties(port, controller_port, kraft, self._partitions)
        probe = port
        if self.security != "plaintext":
            ports = (port, internal, controller_port)
            config |= security_.secured_properties(self.security, ports, self._material)
            probe = internal
        config.update(self._overrides)
        props.unlink(missing_ok=True)  # it holds the keystore password: owner only
        fd = os.open(props, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as props_file:
            props_file.write("".join(f"{k}={v}\n" for k, v in config.items()))
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
        return port, probe

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
