"""The processes an A/B case runs: a `codec-worker` and the `codec-loadgen` runs.

`WorkerProcess` is also the tests' worker (`tests.support`): one way to start a
worker on a free metrics port, wait for it, read its /metrics and stop it.

Both run in a process group of their own: a Ctrl-C at the terminal reaches the
runner alone, which decides how its children stop; they still die with it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping, Sequence
from contextlib import suppress
from pathlib import Path
from typing import IO, ClassVar, Final, Self

import msgspec

from abrunner.lab import payload_sizing, worker_probe
from abrunner.plan import POOL_SIZE, Profile
from loadgen.report import Summary
from schemas.errors import RunnerError
from schemas.registry import user_schema
from service.lifecycle.child_processes import die_with_parent, free_port

_POLL_S: Final = 0.2
"""How often a waiting caller asks the worker again: 5 cheap HTTP GETs a second."""


def child_env(schema: str, logic: str | None = None) -> dict[str, str]:
    """The environment of a case's processes, for `schema` (a key or a user's spec)
    and a team's handler (`--logic MODULE:CALLABLE`, None for a built-in logic).

    A user's module was found by this process, on its `sys.path` or in the current
    directory; the children get the directory it was found in at the front of
    `PYTHONPATH` (they share the current directory, so a `.proto` path holds), and
    so the handler's module's.
    `LOADGEN_PROFILE` is left out: the load generator gets `--schema`, which the
    older name must not contradict.

    Raises:
        ConfigError: `schema` cannot be loaded (the settings loaded it already).
    """
    env = dict(os.environ)
    if logic is not None and ":" in logic:
        _put_on_path(env, logic.rpartition(":")[0])
    user = user_schema(schema)
    if user is None:
        return env
    env.pop("LOADGEN_PROFILE", None)
    own = user.model if user.source == "pydantic" else user.struct
    if user.source != "proto":
        _put_on_path(env, own.__module__)
    return env


def _put_on_path(env: dict[str, str], module_name: str) -> None:
    """Put the directory `module_name` was imported from at the front of
    `env`'s `PYTHONPATH` (nothing for a module not imported from a file)."""
    file = getattr(sys.modules.get(module_name), "__file__", None)
    if file is None:
        return
    root = Path(file).resolve().parent
    depth = module_name.count(".") + (Path(file).name == "__init__.py")
    for _ in range(depth):
        root = root.parent
    paths = [str(root), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))


class WorkerProcess:
    """`python -m service` as a subprocess with its own free metrics port.

    Args:
        bootstrap: the Kafka bootstrap servers.
        topic: the input topic.
        *args: further `codec-worker` arguments (`--codec`, `--schema`, ...).
        group: the consumer group (default: a fresh one).
        log: a file the worker's output is appended to (default: discarded).
        env: the worker's environment (default: this process's).
        port: its metrics port (default: a free one).
    """

    DEFAULT_ARGS: ClassVar[tuple[str, ...]] = ()
    """`codec-worker` arguments a subclass gives every worker, before `args`."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        *args: str,
        group: str | None = None,
        log: Path | None = None,
        env: Mapping[str, str] | None = None,
        port: int | None = None,
    ) -> None:
        self.port = free_port() if port is None else port
        self._environ = None if env is None else dict(env)
        self.group = group or f"g-{uuid.uuid4().hex[:8]}"
        self.cmd: list[str] = [
            *(sys.executable, "-m", "service", "--bootstrap-servers", bootstrap),
            *("--topic", topic, "--group", self.group),
            *("--metrics-port", str(self.port), *self.DEFAULT_ARGS, *args),
        ]
        self.proc: subprocess.Popen[bytes] | None = None
        self._log = log
        self._out: IO[bytes] | None = None

    def start(self) -> Self:
        """Start the worker; it dies with this process."""
        self._out = self._log.open("ab") if self._log else None
        self.proc = subprocess.Popen(  # noqa: S603 (the project's own command)
            self.cmd,
            stdout=self._out or subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            env=self._environ,
            preexec_fn=die_with_parent(),
            process_group=0,
        )
        return self

    def _running(self) -> subprocess.Popen[bytes]:
        if self.proc is None:
            raise RunnerError("the worker was not started")
        if self.proc.poll() is not None:
            raise RunnerError(f"the worker exited with {self.proc.returncode}")
        return self.proc

    def wait_ready(self, timeout: float = 60) -> None:
        """Wait until /readyz answers: the worker has its partitions.

        Raises:
            RunnerError: the worker exited, or was not ready within `timeout` s.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._running()
            try:
                url = f"http://127.0.0.1:{self.port}/readyz"
                with urllib.request.urlopen(url, timeout=1):
                    return
            except urllib.error.HTTPError as exc:  # 503: not assigned yet
                exc.close()  # it holds the response's socket
                time.sleep(_POLL_S)
            except OSError:
                time.sleep(_POLL_S)
        raise RunnerError(f"the worker got no partitions in {timeout:.0f} s")

    def snapshot(self) -> worker_probe.Snapshot:
        """The worker's CPU, RSS and metrics now.

        Raises:
            RunnerError: the worker is not running.
            OSError: its /metrics does not answer (yet).
        """
        return worker_probe.snapshot(self._running().pid, self.port)

    def metrics(self) -> dict[str, float]:
        """The worker's /metrics as `{'name{labels}': value}` (empty if not up)."""
        try:
            return worker_probe.scrape(self.port, timeout=2).flat()
        except OSError:
            return {}

    def messages(self, outcome: str = "ok") -> int:
        """Messages the worker finished with `outcome` (0 if it does not answer)."""
        try:
            scraped = worker_probe.scrape(self.port, timeout=2)
        except OSError:
            return 0
        return int(scraped.total("worker_messages_total", outcome=outcome))

    def wait_for(self, count: int, outcome: str = "ok", timeout: float = 60) -> int:
        """Wait until the worker finished `count` messages with `outcome`.

        Returns:
            How many it had finished when the count was reached.

        Raises:
            RunnerError: the worker exited, or fell short within `timeout` s.
        """
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            self._running()
            seen = self.messages(outcome)
            if seen >= count:
                return seen
            time.sleep(_POLL_S)
        raise RunnerError(f"worker handled {seen} {outcome} messages, wanted {count}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        """Send `sig` (unless it has exited) and wait; return the exit status.

        Raises:
            RunnerError: the worker was not started, or outlived `timeout` s.
        """
        if self.proc is None:
            raise RunnerError("the worker was not started")
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise RunnerError(
                f"the worker still ran {timeout:.0f} s after signal {sig}"
            ) from None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Kill the worker if it still runs; close its log."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self._out is not None:
            self._out.close()
            self._out = None


class LoadgenProcess:
    """One `python -m loadgen --json` run: paced load or a fixed count.

    Args:
        bootstrap: the Kafka bootstrap servers.
        topic: the topic to write.
        codec: the wire codec.
        profile: the payload profile.
        run_id: the run's `x-run-id`.
        rate: messages per second (0: as fast as it goes).
        duration: seconds to send for; else `count` messages are sent.
        count: messages to send when no `duration` is given.
        seed: the payload generator's seed.
        replay: a recording to replay instead, transcoded into `codec`.
        args: further `codec-loadgen` arguments.
        env: the run's environment (default: this process's).
        log: a file the run's stderr is appended to (default: kept in memory).
    """

    MODULE: ClassVar[str] = "loadgen"
    """The module run with `python -m` (`loadgen.fanout` writes several topics)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        codec: str,
        profile: Profile,
        run_id: str,
        *,
        rate: float,
        duration: float | None = None,
        count: int | None = None,
        seed: int = 0,
        replay: str | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        log: Path | None = None,
    ) -> None:
        # A user's spec goes to --schema; --profile (its older name) takes built-ins.
        schema = "--schema" if profile.user else "--profile"
        cmd = [
            *(sys.executable, "-m", self.MODULE, "--bootstrap-servers", bootstrap),
            *("--topic", topic, "--codec", codec, schema, profile.schema),
            *("--rate", str(rate), "--run-id", run_id, "--seed", str(seed), "--json"),
        ]
        if profile.large_bytes:
            cmd += ["--large-bytes", str(profile.large_bytes)]
        if replay is not None:
            cmd += ["--replay", replay, "--transcode", codec]
        elif (pool := payload_sizing.pool_size(profile)) < POOL_SIZE:
            cmd += ["--pool-size", str(pool)]  # bounded by bytes: large payloads
        cmd += ["--duration", str(duration)] if duration else ["--count", str(count)]
        self.log = log
        self.lines: list[str] = []
        self._err: IO[bytes] | None = None
        if log is not None:
            self._err = log.open("ab")
            self._err.write(f"$ {' '.join([*cmd, *args])}\n".encode())
            self._err.flush()
        self.proc = subprocess.Popen(  # noqa: S603 (the project's own command)
            [*cmd, *args],
            env=None if env is None else dict(env),
            stdout=subprocess.PIPE,
            stderr=self._err or subprocess.PIPE,
            preexec_fn=die_with_parent(),
            process_group=0,
        )

    def running(self) -> bool:
        """Whether the run is still sending."""
        return self.proc.poll() is None

    def summary(self, timeout: float) -> Summary:
        """Wait for the run to end; its `--json` summary.

        Exit status 1 (some deliveries failed) still yields a summary: the
        failures are a figure of the case.

        Raises:
            RunnerError: the run failed, printed no summary, or ran past `timeout` s.
        """
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise RunnerError(
                f"codec-loadgen ran past {timeout:.0f} s{self._where()}"
            ) from None
        finally:
            self._close_log()
        lines = self.lines = out.decode().strip().splitlines()
        summary = None
        if self.proc.returncode in (0, 1) and lines:
            with suppress(msgspec.DecodeError):
                summary = msgspec.json.decode(lines[-1], type=Summary)
        if summary is None:
            raise RunnerError(
                f"codec-loadgen exited with {self.proc.returncode} and no summary: "
                f"{self._why(err)}{self._where()}"
            )
        return summary

    def _why(self, err: bytes | None) -> str:
        """The run's last words on stderr: the error line that ended it."""
        if err is None and self.log is not None:
            with self.log.open("rb") as f:
                f.seek(max(0, self.log.stat().st_size - 8192))
                err = f.read()
        text = (err or b"").decode(errors="replace").strip().splitlines()
        return text[-1].strip() if text else "(nothing on stderr)"

    def _where(self) -> str:
        return "" if self.log is None else f" (log: {self.log})"

    def _close_log(self) -> None:
        if self._err is not None:
            self._err.close()
            self._err = None

    def close(self) -> None:
        """Kill the run if it still sends (its case was stopped); reap it."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()  # reaps it and closes the pipes
        self._close_log()
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
