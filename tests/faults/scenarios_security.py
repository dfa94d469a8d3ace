"""Security: Sec1 TLS fails closed; Sec2 a sentinel password never printed; Sec4
/metrics exposure."""

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

from abrunner.lab import worker_probe
from codec import CODEC_NAMES, CodecName
from localkafka import LocalKafka
from localkafka.security import make_material
from schemas.registry import SCHEMA_NAMES
from service.telemetry.metrics import DEAD_LETTER_REASONS, E2E_INVALID_REASONS
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
    secret_env = {
        "KAFKA_SASL_PASSWORD": secret,
        "KAFKA_SASL_USERNAME": "faults",
        "KAFKA_SSL_KEY_PASSWORD": secret,
        "KAFKA_SSL_KEYSTORE_PASSWORD": secret,
    }
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
        places.update(_other_tools(run.bootstrap, secret_env))
        bad = ["--bootstrap-servers", run.bootstrap, "--batch-size", "abc"]
        places["config error"] = _command(bad, secret_env)
        places["auth failure + double SIGINT"] = _auth_failure(run, secret_env)
        found = [name for name, text in places.items() if secret in text]
        outcome.figures.update(places_searched=len(places), sentinel_found=len(found))
        if found:
            outcome.fail(f"the sentinel password was printed in: {', '.join(found)}")
    return outcome


def _tool(module: str, *args: str, env: dict[str, str]) -> tuple[int, str, float]:
    """Run a tool to its end: its exit status, output and seconds taken."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=_SIDE_TIMEOUT_S,
        env={**clean, **env},
        check=False,
    )
    took = round(time.monotonic() - started, 1)
    return done.returncode, done.stdout + done.stderr, took


def sec1_tls_fail_closed(env: Env) -> Outcome:
    """TLS fails closed: the right CA works, a wrong CA or host name is refused.

    A broker of the scenario's own with a SASL_SSL client listener (a throw-away
    CA, SCRAM-SHA-512); a worker with (a) its client settings consumes the load
    generator's messages over it; (b) another CA, (c) the broker's address under a
    name its certificate does not hold, and (d) a sentinel as the password end in
    one line naming the cause, exit status 1, having handled nothing; the sentinel
    is in none of the outputs.
    """
    outcome = Outcome("Sec1", "TLS fails closed: wrong CA, host name or password")
    root = env.root / f"sec1-{uuid.uuid4().hex[:6]}"
    secret = SENTINEL_PREFIX + uuid.uuid4().hex
    other = make_material(root / "other-ca", client=False)
    with LocalKafka(root / "broker", heap="384m", security="sasl_ssl") as kafka:
        client = str(kafka.client_file)
        topic = f"sec1-{uuid.uuid4().hex[:8]}"
        count = 500
        loadgen = ["--topic", topic, "--create-topics", "--count", str(count)]
        code, text, _ = _tool("loadgen", "--config", client, *loadgen, env={})
        if code != 0:
            outcome.fail(
                f"the load generator over SASL_SSL exited {code}: {text[-300:]}"
            )
            return outcome
        worker = FaultWorker(
            kafka.bootstrap_servers,
            topic,
            *("--config", client, "--create-topics"),
            group=f"sec1-{uuid.uuid4().hex[:6]}",
            log=root / "worker-right-ca.log",
        )
        with worker:
            worker.wait_ready(60)
            handled = worker.wait_for(count, timeout=60)
        outcome.figures["right CA: handled"] = handled
        if handled != count:
            outcome.fail(f"with the right CA the worker handled {handled} of {count}")
        address = kafka.bootstrap_servers
        wrong = {
            "wrong CA": (
                {"KAFKA_SSL_CA_LOCATION": str(other.ca_pem)},
                address,
                "not trusted",
            ),
            "hostname mismatch": (
                {},
                address.replace("127.0.0.1", "localhost"),
                "hostname mismatch",
            ),
            "wrong password": (
                {"KAFKA_SASL_PASSWORD": secret},
                address,
                "wrong password",
            ),
        }
        for case, (extra, where, cause) in wrong.items():
            argv = ["--config", client, "--bootstrap-servers", where, "--topic", topic]
            code, text, took = _tool("service", *argv, "--metrics-port", "0", env=extra)
            lines = [line for line in text.splitlines() if line.strip()]
            outcome.figures[f"{case}: exit"] = code
            outcome.figures[f"{case}: seconds"] = took
            if code != 1 or len(lines) != 1 or cause not in lines[0]:
                outcome.fail(
                    f"{case}: exit {code}, not one line naming {cause!r}: {lines[:3]}"
                )
            if secret in text:
                outcome.fail(f"{case}: the sentinel password was printed")
    return outcome


def _other_tools(bootstrap: str, secrets: dict[str, str]) -> dict[str, str]:
    """The load generator (a run, `record`, `--print-config`), codec-ab's
    `--print-config` and `codec-kafka topics`, each with the secrets set."""
    topic = f"sec2-{uuid.uuid4().hex[:8]}"
    where = ["--bootstrap-servers", bootstrap]
    env = {**secrets, "KAFKA_EXTRA": '{"sasl.oauthbearer.client.secret": "%s"}'}
    env["KAFKA_EXTRA"] %= secrets["KAFKA_SASL_PASSWORD"]
    runs = {
        "codec-loadgen run": [
            "loadgen",
            *where,
            "--topic",
            topic,
            "--create-topics",
            "--count",
            "50",
            "--log-level",
            "debug",
        ],
        "codec-loadgen record": [
            "loadgen",
            "record",
            *where,
            "--topic",
            topic,
            "--out",
            os.devnull,
            "--max",
            "50",
            "--timeout",
            "3",
        ],
        "codec-loadgen --print-config": ["loadgen", "--print-config"],
        "codec-ab --print-config": ["abrunner", "--print-config"],
        "codec-kafka topics": ["localkafka", "topics", "delete", topic, *where],
    }
    out = {}
    for name, argv in runs.items():
        code, text, _ = _tool(*argv, env=env if "print-config" in name else secrets)
        out[name] = f"exit {code}\n{text}"
    return out


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
    "reason": frozenset(DEAD_LETTER_REASONS + E2E_INVALID_REASONS),  # both declared
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
        samples = worker_probe.parse(text).samples
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
