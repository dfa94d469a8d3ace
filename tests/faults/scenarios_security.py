"""Security: Sec2 a sentinel password never printed; Sec4 /metrics exposure."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Final

from abrunner import measure
from codec import CODEC_NAMES, CodecName
from schemas.registry import SCHEMA_NAMES
from tests.faults.harness import Env, FaultWorker, Outcome
from tests.faults.poison import MARKER, cases, interleaved
from tests.faults.producer import good_traffic
from tests.faults.run import Run

SENTINEL_PREFIX: Final = "S3NT1NEL-"
_SIDE_TIMEOUT_S: Final = 30
_TCP_TABLES: Final = {
    "/proc/net/tcp": socket.AF_INET,
    "/proc/net/tcp6": socket.AF_INET6,
}


def _metrics_text(worker: FaultWorker) -> str:
    url = f"http://{worker.host}:{worker.port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())


def _command(args: list[str], env: dict[str, str]) -> str:
    """Run a `codec-worker` command to its end; its exit status and output."""
    done = subprocess.run(
        [sys.executable, "-m", "service", *args],
        capture_output=True,
        text=True,
        timeout=_SIDE_TIMEOUT_S,
        env={**os.environ, **env},
        check=False,
    )
    return f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"


def _auth_failure(run: Run, env: dict[str, str]) -> str:
    """A worker that tries SASL PLAIN on the PLAINTEXT broker, then gets two SIGINTs.

    The handshake fails; after 8 s of retries a first SIGINT asks for a clean
    stop and a second one exits at once (a KeyboardInterrupt: its traceback, if
    any, is searched as well).
    """
    log = run.dir / "auth-failure.log"
    worker = FaultWorker(
        run.bootstrap,
        run.topic,
        *run.args,
        *("--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "PLAIN"),
        *("--log-level", "debug", "-X", "debug=security,broker"),
        group=f"{run.group}-auth",
        log=log,
        env=env,
    )
    with worker:  # starts it
        time.sleep(8)
        if worker.proc is not None and worker.alive():
            worker.proc.send_signal(signal.SIGINT)
            time.sleep(0.2)
            worker.proc.send_signal(signal.SIGINT)
            worker.proc.wait(30)
    return log.read_text(errors="replace")


def sec2_secret_hygiene(env: Env) -> Outcome:
    """A sentinel `KAFKA_SASL_PASSWORD` is in no log, metric, DLQ record or traceback.

    The broker is PLAINTEXT, so librdkafka ignores the password; the worker must
    still never print it: not with librdkafka's config debug on, not in
    `--print-config`, a configuration error, an authentication failure or an
    interrupted run's traceback, and not in its dead letters or /metrics.
    """
    outcome = Outcome(
        "Sec2", "Secret hygiene: a sentinel SASL password is never printed"
    )
    secret = SENTINEL_PREFIX + uuid.uuid4().hex
    secret_env = {"KAFKA_SASL_PASSWORD": secret, "KAFKA_SASL_USERNAME": "faults"}
    codec: CodecName = "msgspec-msgpack"
    kinds = [k for k in cases(codec) if k.value is None or len(k.value) < 1 << 20]
    with Run(env, outcome) as run:
        debug = ("--log-level", "debug", "-X", "debug=conf,security,generic")
        worker = run.worker(*debug, env=secret_env)
        plan = interleaved(good_traffic(codec), kinds, 20)
        run.produce(plan, rate=200, count=20 * (len(kinds) + 1))
        run.wait_drained(45)
        places = {"/metrics": _metrics_text(worker)}
        run.finish()
        for log in run.logs():
            places[f"log {log.name}"] = log.read_text(errors="replace")
        dlq = run.data.dlq if run.data else []
        places["DLQ records"] = repr([(r.headers, r.value, r.key) for r in dlq])
        places["--print-config"] = _command(["--print-config"], secret_env)
        bad = ["--bootstrap-servers", run.bootstrap, "--batch-size", "abc"]
        places["config error"] = _command(bad, secret_env)
        places["auth failure + double SIGINT"] = _auth_failure(run, secret_env)
        found = [name for name, text in places.items() if secret in text]
        outcome.figures.update(places_searched=len(places), sentinel_found=len(found))
        if found:
            outcome.fail(f"the sentinel password was printed in: {', '.join(found)}")
    return outcome


def _listening(pid: int, port: int) -> list[str]:
    """The addresses process `pid` listens on at TCP `port` (from /proc)."""
    owned = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            owned.add(os.readlink(fd))
        except OSError:
            continue
    found = []
    for table, family in _TCP_TABLES.items():
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, _, hex_port = fields[1].partition(":")
            if fields[3] != "0A" or int(hex_port, 16) != port:
                continue
            if f"socket:[{fields[9]}]" not in owned:
                continue
            raw = bytes.fromhex(address)
            # /proc prints each 32-bit word in host (little-endian) order.
            words = [raw[i : i + 4][::-1] for i in range(0, len(raw), 4)]
            found.append(socket.inet_ntop(family, b"".join(words)))
    return found


_ALLOWED: Final[dict[str, frozenset[str]]] = {
    "codec": frozenset(CODEC_NAMES),
    "outcome": frozenset({"ok", "decode_error", "logic_error"}),
    "reason": frozenset(
        {"decode", "empty", "oversize", "content_type", "logic", "encode"}
        | {"unparsable", "negative", "too_large"}  # worker_e2e_latency_invalid_total
    ),
    "generation": frozenset({"0", "1", "2"}),
    "schema": frozenset(SCHEMA_NAMES),
}
_PATTERNS: Final = {
    "le": re.compile(r"^(\+Inf|[0-9.e+-]+)$"),
    "version": re.compile(r"^[0-9A-Za-z.+-]{1,40}$"),
    "code": re.compile(r"^[A-Za-z_:]{1,64}$"),
    "partition": re.compile(r"^[0-9]{1,5}$"),
}


def sec4_metrics_exposure(env: Env) -> Outcome:
    """Defaults: /metrics on loopback only; after poison, only bounded label values."""
    outcome = Outcome("Sec4", "/metrics on loopback only; bounded labels after poison")
    codec: CodecName = "msgspec-json"
    kinds = [k for k in cases(codec) if k.value is None or len(k.value) < 1 << 20]
    with Run(env, outcome, codec=codec) as run:
        worker = run.worker()  # no --metrics-host: the default is under test
        assert worker.proc is not None
        bound = _listening(worker.proc.pid, worker.port)
        plan = interleaved(good_traffic(codec), kinds * 3, 10)
        run.produce(plan, rate=200, count=10 * (3 * len(kinds) + 1))
        run.wait_drained(45)
        text = _metrics_text(worker)
        run.finish()
        samples = measure.parse(text).samples
        bad = sorted(
            {
                f"{s.name}{{{key}={value!r}}}"
                for s in samples
                for key, value in s.labels.items()
                if not _label_ok(key, value, run.topic)
            }
        )
        outcome.figures.update(
            bound_to=",".join(bound) or "nothing", series=len(samples)
        )
        if not bound or any(a not in {"127.0.0.1", "::1"} for a in bound):
            outcome.fail(f"/metrics listens on {bound or 'nothing'}, not loopback only")
        if bad:
            outcome.fail(f"unbounded or unexpected label values: {', '.join(bad[:5])}")
        if MARKER in text:
            outcome.fail("a payload value reached /metrics")
    return outcome


def _label_ok(key: str, value: str, topic: str) -> bool:
    if key == "topic":
        return value == topic
    if key in _ALLOWED:
        return value in _ALLOWED[key]
    pattern = _PATTERNS.get(key)
    return pattern is not None and bool(pattern.match(value))
