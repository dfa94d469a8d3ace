"""``LocalRegistry``: one Apicurio Registry JVM on 127.0.0.1, in memory, and its stop.

Apicurio Registry 3.0.x is a Quarkus app: ``java -jar apicurio-registry-app-*-runner.jar``
with ``quarkus.http.host``/``port`` set, default in-memory storage (a stopped
registry forgets its schemas), ready in a few seconds at about 250 MB RSS. Its
Confluent-compatible API is under ``/apis/ccompat/v7``: the URL the tools get.
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Final

from localkafka.classpath import java_executable
from localkafka.process import ensure_port_free, owns_listener, stop_process_group
from localkafka.registry.distribution import resolve_registry
from schemas.errors import LocalKafkaError
from service.lifecycle.child_processes import die_with_parent, free_port

CCOMPAT_PATH: Final = "/apis/ccompat/v7"
"""The Confluent-compatible API's base path in Apicurio Registry 3."""
_HOST: Final = "127.0.0.1"
_PROBE_EVERY_S: Final = 0.25
_START_ATTEMPTS: Final = 3
"""A free port chosen by us can be taken before the JVM binds it: retry twice."""


def registry_answers(url: str, timeout: float = 2.0) -> bool:
    """Returns whether a Confluent-compatible registry at ``url`` lists its subjects."""
    try:
        with urllib.request.urlopen(f"{url}/subjects", timeout=timeout) as reply:  # noqa: S310 (our http URL)
            return int(reply.status) == 200
    except (OSError, urllib.error.URLError, ValueError):
        return False


def _tail(path: Path, lines: int = 30) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


class LocalRegistry:
    """A local Apicurio Registry (Confluent-compatible API) run as a child JVM.

    Args:
        data_dir: Where its log goes (``logs/registry.out``); default a temp dir,
            removed on stop.
        port: HTTP port on 127.0.0.1; default a free one.
        heap: The JVM's maximum heap.
        detached: Outlive this process (``codec-kafka registry start``); otherwise
            the JVM dies with it and is stopped at interpreter exit.
    """

    def __init__(
        self,
        data_dir: Path | None = None,
        port: int | None = None,
        *,
        heap: str = "512m",
        detached: bool = False,
    ) -> None:
        self._owns_dir = data_dir is None
        self.data_dir: Path | None = data_dir
        self._port = port
        self._heap = heap
        self._detached = detached
        self._proc: subprocess.Popen[bytes] | None = None
        self._url: str | None = None

    @property
    def url(self) -> str:
        """The Confluent-compatible base URL (``http://127.0.0.1:P/apis/ccompat/v7``)."""
        if self._url is None:
            raise LocalKafkaError("the registry is not running")
        return self._url

    @property
    def pid(self) -> int | None:
        """The JVM's pid while it runs."""
        return self._proc.pid if self._proc is not None else None

    def start(self, timeout: float = 90.0) -> str:
        """Starts the JVM and waits until its API answers; returns the URL.

        Raises:
            LocalKafkaError: Java or the distribution is missing, the port is taken,
                or it did not answer within ``timeout`` (the log's tail says why).
        """
        runner = resolve_registry()
        if self.data_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix="local-registry-"))
        (self.data_dir / "logs").mkdir(parents=True, exist_ok=True)
        if not self._detached:
            atexit.register(self.stop)
        for attempt in range(_START_ATTEMPTS):
            port = self._port or free_port(_HOST)
            if self._port:
                ensure_port_free(port, _HOST)
            self._launch(runner, port)
            url = f"http://{_HOST}:{port}{CCOMPAT_PATH}"
            if self._wait_ready(url, port, timeout):
                self._url = url
                return url
            log = self.data_dir / "logs" / "registry.out"
            self._kill(10.0)
            if self._port or attempt == _START_ATTEMPTS - 1:
                raise LocalKafkaError(
                    f"the registry did not answer at {url} within {timeout:g} s; "
                    f"log {log}:\n{_tail(log)}"
                )
        raise AssertionError("unreachable")  # pragma: no cover

    def _launch(self, runner: Path, port: int) -> None:
        if self.data_dir is None:
            raise LocalKafkaError("the registry has no data dir")
        java = [
            java_executable(),
            f"-Xmx{self._heap}",
            f"-Dquarkus.http.host={_HOST}",
            f"-Dquarkus.http.port={port}",
            "-jar",
            str(runner),
        ]
        with open(self.data_dir / "logs" / "registry.out", "ab") as out_file:
            self._proc = subprocess.Popen(  # noqa: S603
                java,
                stdin=subprocess.DEVNULL,
                stdout=out_file,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                start_new_session=True,
                preexec_fn=None if self._detached else die_with_parent(signal.SIGKILL),
            )

    def _wait_ready(self, url: str, port: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                return False
            if registry_answers(url):
                owned = owns_listener(self._proc.pid, port)
                return owned is None or owned
            time.sleep(_PROBE_EVERY_S)
        return False

    def _kill(self, timeout: float) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_process_group(proc.pid, timeout, wait=proc.wait)

    def wait(self) -> int:
        """Blocks until the JVM exits; returns its exit code."""
        return self._proc.wait() if self._proc is not None else 0

    def stop(self, timeout: float = 20.0) -> None:
        """Stops the JVM (SIGTERM, then SIGKILL); removes a temp data dir. Idempotent."""
        self._kill(timeout)
        self._url = None
        atexit.unregister(self.stop)
        if self._owns_dir and self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None

    def __enter__(self) -> LocalRegistry:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
