"""The fault suite's harness: a broker to break, workers to kill, a scenario's result.

A `Run` is one scenario's topics (input; output with LogAppendTime, so a record's
timestamp says when it landed; DLQ), its workers (each incarnation with its own
log), the verifying producer and the commit monitor. `Run.finish` stops what still
runs, reads everything back and hands it to the checker.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Self

from abrunner.lab import worker_probe
from localkafka import LocalKafka, create_topic, delete_topic
from service.lifecycle.child_processes import die_with_parent, free_port
from tests.faults.model import Verdict
from tests.faults.observe import RewindWatch
from tests.support import WorkerProcess

COMMIT_INTERVAL_S: Final = 5.0
"""librdkafka's `auto.commit.interval.ms` default, which the worker keeps."""
BATCH_SIZE: Final = 500
"""The worker's default `--batch-size`: the most it has in flight."""
SESSION_TIMEOUT_MS: Final = 10_000
"""RELIABILITY 6.1's default under test (the worker's own is 45 s): a killed
member's partitions move within 10 s, which keeps each kill short."""
LOG_APPEND: Final = {"message.timestamp.type": "LogAppendTime"}
WAIT_S: Final = 180.0
"""The longest wait for a worker to start or to make progress. Generous: each wait
returns as soon as its condition holds, and at load 36 on the 2 shared cores a
worker took 43 s from its spawn to its first message."""


@dataclass
class Outcome:
    """One scenario's result: a row of the report."""

    id: str
    title: str
    status: str = "PASSED"
    figures: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def fail(self, reason: str) -> None:
        """Record a failed assertion (the scenario is FAILED)."""
        self.failures.append(reason)
        self.status = "FAILED"

    def skip(self, reason: str) -> None:
        """Mark the scenario SKIPPED with the reason."""
        self.status = "SKIPPED"
        self.notes.append(reason)

    def absorb(self, verdict: Verdict) -> None:
        """Take the checker's figures and failures."""
        self.figures.update(verdict.figures)
        for failure in verdict.failures:
            self.fail(failure)


@dataclass
class Env:
    """Where scenarios run: the shared broker and a folder for logs."""

    bootstrap: str
    root: Path
    fast: bool = True


class FaultBroker:
    """A broker of the scenario's own, to stop, kill, pause and restart in place.

    Restarts reuse the data dir and the port, so clients reconnect to the same
    address and find their topics and committed offsets.
    """

    def __init__(
        self,
        root: Path,
        *,
        port: int | None = None,
        overrides: Mapping[str, str] | None = None,
    ) -> None:
        self.dir = root / "broker"
        self.port = port or free_port()
        self._overrides = dict(overrides or {})
        self.kafka: LocalKafka | None = None

    @property
    def bootstrap(self) -> str:
        """The broker's address (the same across restarts)."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start (or restart) the broker on its data dir and port."""
        self.kafka = LocalKafka(self.dir, self.port, overrides=self._overrides)
        self.kafka.start(timeout=90)

    def send(self, sig: int) -> None:
        """Send `sig` to the broker's process group (SIGSTOP, SIGCONT...)."""
        if self.kafka is not None and self.kafka.pid is not None:
            os.killpg(self.kafka.pid, sig)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop the broker with `sig` (SIGKILL: no shutdown at all) and reap it."""
        if self.kafka is None:
            return
        if sig != signal.SIGTERM:
            with contextlib.suppress(ProcessLookupError):
                self.send(sig)
        self.kafka.stop(timeout=60)
        self.kafka = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.send(signal.SIGCONT)  # a paused JVM would not hear SIGTERM
        self.stop()
        # Keep the broker's own log beside the workers' (the data can go).
        with contextlib.suppress(OSError):
            shutil.copy(
                self.dir / "logs" / "server.log", self.dir.parent / "broker.log"
            )
        shutil.rmtree(self.dir, ignore_errors=True)


class FaultWorker(WorkerProcess):
    """A worker incarnation: its own log, environment, metrics address and prefix.

    Args:
        bootstrap: the broker.
        topic: the input topic.
        *args: further worker arguments.
        group: the consumer group.
        log: this incarnation's log (stdout and stderr).
        env: variables added to the environment (a secret, for Sec2).
        prefix: a command the worker runs under (`ip netns exec NS`).
        host: where its metrics are served and scraped (None: the worker's
            default, 127.0.0.1, left to the worker to choose).
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        *args: str,
        group: str,
        log: Path,
        env: Mapping[str, str] | None = None,
        prefix: Sequence[str] = (),
        host: str | None = None,
    ) -> None:
        super().__init__(bootstrap, topic, *args, group=group, log=log)
        if host is not None:
            self.cmd += ["--metrics-host", host]
        self.log_path, self.host = log, host or "127.0.0.1"
        self._env, self._prefix = dict(env or {}), list(prefix)
        self.samples: list[tuple[float, int]] = []
        """(monotonic time, messages finished) every monitor period."""
        self.rewinds = RewindWatch()
        """Its failed writes and the batches it rewound for them."""
        self.written_from: int | None = None
        """Records in the output and DLQ when it started, if no other worker of
        its run was alive then (`Run.kill`); else None."""

    def start(self) -> Self:
        """Start the worker; it dies with this process."""
        self._out = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [*self._prefix, *self.cmd],
            stdout=self._out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **self._env},
            preexec_fn=die_with_parent(),
            process_group=0,
        )
        return self

    def scrape(self) -> worker_probe.Metrics | None:
        """The worker's /metrics now (None if it does not answer)."""
        try:
            return worker_probe.scrape(self.port, self.host, timeout=2)
        except OSError:
            return None

    def messages(self, outcome: str = "ok") -> int:
        """Messages finished with `outcome` (0 if it does not answer)."""
        scraped = self.scrape()
        if scraped is None:
            return 0
        return int(scraped.total("worker_messages_total", outcome=outcome))

    def processed(self) -> int:
        """Messages finished with any outcome (0 if it does not answer)."""
        scraped = self.scrape()
        return 0 if scraped is None else int(scraped.total("worker_messages_total"))

    def wait_ready(self, timeout: float = 60) -> None:
        """Wait until /readyz answers on the worker's metrics address.

        Raises:
            TimeoutError: not ready within `timeout` s, or the worker exited.
        """

        def ready() -> bool:
            if not self.alive():
                raise TimeoutError(f"the worker exited with {self.exit_code()}")
            answer = self.readyz()
            return answer is not None and answer[0] == 200

        wait_until(ready, timeout, what="worker ready")

    def readyz(self) -> tuple[int, str] | None:
        """/readyz's status and body now (None if nothing answers)."""
        return http_get(self.host, self.port, "/readyz")

    def exit_code(self) -> int | None:
        """The exit status, None while it runs."""
        return None if self.proc is None else self.proc.poll()

    def alive(self) -> bool:
        """Whether the process still runs."""
        return self.proc is not None and self.proc.poll() is None

    def processed_between(self, start: float, end: float) -> int:
        """Messages finished between two monotonic instants, from the samples."""

        def at(t: float) -> int:
            before = [n for when, n in self.samples if when <= t]
            return before[-1] if before else 0

        return max(0, at(end) - at(start))


def http_get(
    host: str, port: int, path: str, timeout: float = 1.0
) -> tuple[int, str] | None:
    """`GET http://host:port/path`: status and body, 503s included (None if
    nothing answers).

    An `HTTPError` holds the response's socket open until closed: under pytest's
    `filterwarnings = error` a leaked one is a ResourceWarning, hence the close.
    """
    try:
        url = f"http://{host}:{port}{path}"
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return int(response.status), response.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read().decode(errors="replace")
    except (OSError, http.client.HTTPException):
        return None


def write_config(path: Path, sections: Mapping[str, Mapping[str, Any]]) -> Path:
    """A worker TOML file: `{"worker.consumer": {"session_timeout_ms": 10000}}`."""

    def literal(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | float):
            return repr(value)
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'

    text = "".join(
        f"[{name}]\n" + "".join(f"{k} = {literal(v)}\n" for k, v in values.items())
        for name, values in sections.items()
    )
    path.write_text(text)
    return path


def new_topics(
    bootstrap: str, partitions: int, *, dlq_config: Mapping[str, str] | None = None
) -> tuple[str, str, str]:
    """Fresh input, output (1 partition, LogAppendTime) and DLQ topics."""
    name = f"faults-{uuid.uuid4().hex[:10]}"
    source, output, dlq = name, f"{name}.out", f"{name}.dlq"
    create_topic(bootstrap, source, partitions)
    create_topic(bootstrap, output, 1, config=dict(LOG_APPEND))
    create_topic(bootstrap, dlq, partitions, config=dict(dlq_config or {}))
    return source, output, dlq


def drop_topics(bootstrap: str, *names: str) -> None:
    """Delete a run's topics (best effort: the broker may be gone)."""
    for name in names:
        with contextlib.suppress(Exception):
            delete_topic(bootstrap, name, timeout=10)


def wait_until(
    predicate: Callable[[], bool],
    timeout: float,
    every: float = 0.25,
    what: str = "condition",
) -> float:
    """Poll `predicate()` until true; return the seconds it took.

    Raises:
        TimeoutError: naming `what`, when it stays false for `timeout` s.
    """
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate():
            return time.monotonic() - start
        time.sleep(every)
    raise TimeoutError(f"{what}: not reached in {timeout:.0f} s")
