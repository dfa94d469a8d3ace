"""More mismatched clients, on the session's brokers: a SASL client on a listener
without SASL, and a keystore given without its password; and a worker that never
reaches any broker.

A SASL client whose listener has no SASL gets its TCP (and TLS) connection, then the
broker answers its SASL handshake with no mechanism at all: librdkafka calls that an
authentication failure; every tool must name the security protocol to set instead.
The listeners of every other kind (SASL_PLAINTEXT with SCRAM, SSL, SASL_SSL with
PLAIN), and a SASL_SSL client on an SSL one, are the fault suite's Sec5
(tests/faults/scenarios_listeners.py): a broker of their own, too slow for every
commit.
"""

from __future__ import annotations

import json
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from localkafka import LocalKafka
from service.lifecycle.child_processes import free_port
from tests.integration.test_security import (
    MISMATCH,
    SENTINEL,
    _as_env,
    _one_line,
    _tools,
    tool,
)

TIMEOUT_S = 90
"""Each tool ends within seconds on its own; five side by side on a loaded 2-core
machine took up to 30 s (mostly their imports), test_security's own limit."""


def _run_tools(
    tools: dict[str, list[str]],
    address: str,
    config: list[str],
    env: dict[str, str],
    topics_env: dict[str, str],
) -> dict[str, tuple[subprocess.CompletedProcess[str], float]]:
    """test_security's `_run_tools` with a longer limit per tool."""
    where = ["--bootstrap-servers", address]

    def run(name: str) -> tuple[subprocess.CompletedProcess[str], float]:
        started = time.monotonic()
        if name == "codec-kafka topics":  # no --config: the client.toml as KAFKA_*
            done = tool(*tools[name], *where, timeout=TIMEOUT_S, env=topics_env | env)
        else:
            done = tool(*tools[name], *config, *where, timeout=TIMEOUT_S, env=env)
        return done, time.monotonic() - started

    with ThreadPoolExecutor(len(tools)) as pool:
        return dict(zip(tools, pool.map(run, tools), strict=True))


SCRAM = {
    "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
    "KAFKA_SASL_USERNAME": "codec-ab",
    "KAFKA_SASL_PASSWORD": SENTINEL,
}


def test_sasl_on_a_plaintext_listener_names_the_protocol(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    env = {"KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", **SCRAM}
    runs = _run_tools(_tools("no-sasl", tmp_path), kafka_bootstrap, [], env, {})
    for name, (done, took) in runs.items():
        print(
            f"SASL_PLAINTEXT on PLAINTEXT: {name}: exit {done.returncode} {took:.1f} s"
        )
        line = _one_line(name, done, 1)
        assert (
            f"{MISMATCH} SASL_PLAINTEXT: it speaks PLAINTEXT; set security_protocol "
            "= 'PLAINTEXT'"
        ) in line, (name, line)


def test_a_keystore_without_its_password_names_the_setting(
    mtls_kafka: LocalKafka, tmp_path: Path
) -> None:
    """No `ssl_keystore_password`: exit 2 before Kafka, one line naming it (not
    librdkafka's key and `-X`)."""
    settings = mtls_kafka.client_settings
    toml = tmp_path / "client.toml"
    kept = {
        k: v
        for k, v in settings.items()
        if k not in ("ssl_keystore_password", "bootstrap_servers")
    }
    toml.write_text("[kafka]\n" + "".join(f'{k} = "{v}"\n' for k, v in kept.items()))
    every = _tools("ks", tmp_path)
    tools = {name: every[name] for name in ("codec-worker", "codec-kafka topics")}
    given = {
        k: v for k, v in _as_env(mtls_kafka).items() if "KEYSTORE_PASSWORD" not in k
    }
    address = mtls_kafka.bootstrap_servers
    runs = _run_tools(tools, address, ["--config", str(toml)], {}, given)
    for name, (done, _took) in runs.items():
        line = _one_line(name, done, 2)
        assert "ssl_keystore_password (KAFKA_SSL_KEYSTORE_PASSWORD) is mandatory" in (
            line
        ), (name, line)
        assert "-X" not in line, (name, line)


def test_a_worker_that_never_reaches_a_broker_gives_up_in_one_line() -> None:
    """Nothing listens: after `--startup-timeout-s` the worker's last line is one
    `worker_failed` naming the address, the refused connection and the settings."""
    address = f"127.0.0.1:{free_port()}"
    argv = ["--bootstrap-servers", address, "--metrics-port", "0"]
    done = tool("service", *argv, "--startup-timeout-s", "2", timeout=TIMEOUT_S)
    assert done.returncode == 1, done.stderr[-1500:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    failed = [line for line in lines if line["event"] == "worker_failed"]
    assert len(failed) == 1 and lines[-1] == failed[0], lines[-3:]
    error = failed[0]["error"]
    assert error.startswith(f"cannot reach Kafka at {address}: "), error
    assert "Connection refused" in error and "check --bootstrap-servers" in error
    assert error.endswith(
        "no broker answered in 2 s (worker.processing.startup_timeout_s)"
    ), error
