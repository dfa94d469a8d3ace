"""Every tool over a secured broker: SASL_SSL (SCRAM-SHA-512) and mutual TLS.

The brokers are the local broker started with `--security sasl_ssl` and `mtls`
(conftest: once per session, on first use); each tool is given the client settings
the broker wrote with `--config <data-dir>/client.toml`, as a user would.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import pytest

import abrunner.cli
import localkafka.cli
from abrunner.report.tables import read
from localkafka import LocalKafka
from service.kafka.connection import KafkaConnection
from service.lifecycle.child_processes import free_port
from tests.support import WorkerProcess, consume_all, produce

REPO = Path(__file__).resolve().parents[2]
MODES = ("sasl_ssl", "mtls")


@pytest.fixture(params=MODES)
def secured(request: pytest.FixtureRequest) -> LocalKafka:
    """The SASL_SSL broker, then the mTLS one."""
    kafka = request.getfixturevalue(f"{request.param}_kafka")
    assert isinstance(kafka, LocalKafka)
    return kafka


def _client_file(kafka: LocalKafka) -> str:
    assert kafka.client_file is not None
    return str(kafka.client_file)


def tool(
    module: str, *args: str, timeout: float = 90, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `python -m module args` to its end (no KAFKA_* of the caller's)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**clean, **(env or {})},
        check=False,
    )


def _wait_lag_zero(worker: WorkerProcess, timeout: float = 30) -> list[float]:
    deadline = time.monotonic() + timeout
    while True:
        metrics = worker.metrics()
        lag = [v for k, v in metrics.items() if k.startswith("worker_consumer_lag")]
        if (lag and max(lag) == 0) or time.monotonic() > deadline:
            return lag
        time.sleep(0.5)


def test_client_file_is_private_and_names_the_listener(secured: LocalKafka) -> None:
    path = secured.client_file
    assert path is not None and path.stat().st_mode & 0o777 == 0o600
    text = path.read_text()
    assert f'bootstrap_servers = "{secured.bootstrap_servers}"' in text
    if secured.security == "sasl_ssl":
        assert 'security_protocol = "SASL_SSL"' in text
        assert 'sasl_mechanism = "SCRAM-SHA-512"' in text
    else:
        assert 'security_protocol = "SSL"' in text and "ssl_keystore_location" in text


def test_worker_and_loadgen_over_a_secured_broker(
    secured: LocalKafka, tmp_path: Path
) -> None:
    """Produce (creating the topic), then a worker with DLQ, output and shadow
    topics it creates itself, then record and replay: every message arrives."""
    config = ["--config", _client_file(secured)]
    topic = f"sec-{uuid.uuid4().hex[:10]}"
    sent = tool(
        "loadgen",
        *config,
        *("--topic", topic, "--create-topics", "--partitions", "2"),
        *("--codec", "msgspec-json", "--count", "400", "--rate", "0", "--json"),
    )
    assert sent.returncode == 0, sent.stderr[-2000:]
    assert json.loads(sent.stdout)["acked"] == 400
    conf = secured.client_conf()
    poison = [{"key": b"p", "value": b"not json {"} for _ in range(3)]
    produce(conf, topic, poison)
    log = tmp_path / "worker.log"
    worker = WorkerProcess(
        secured.bootstrap_servers,
        topic,
        *config,
        *("--codec", "msgspec-json", "--create-topics"),
        *("--output-topic", f"{topic}.out", "--shadow-codec", "json+pydantic"),
        log=log,
    )
    with worker:
        worker.wait_ready(60)
        assert worker.wait_for(400, timeout=60) == 400, log.read_text()[-2000:]
        assert worker.wait_for(3, outcome="decode_error", timeout=30) == 3
        lag = _wait_lag_zero(worker)
    assert lag == [0.0, 0.0], lag  # the lag queries answered over this listener
    assert len(consume_all(conf, f"{topic}.dlq", 3, timeout=30)) == 3
    assert len(consume_all(conf, f"{topic}.out", 400, timeout=30)) == 400
    recording = tmp_path / "traffic.rec.gz"
    recorded = tool(
        "loadgen",
        *("record", *config, "--topic", topic, "--out", str(recording)),
        *("--max", "403", "--timeout", "5"),
    )
    assert recorded.returncode == 0, recorded.stderr[-2000:]
    replayed_topic = f"{topic}-replayed"
    replayed = tool(
        "loadgen",
        *config,
        *("--topic", replayed_topic, "--create-topics", "--partitions", "2"),
        *("--replay", str(recording), "--rate", "0", "--json"),
    )
    assert replayed.returncode == 0, replayed.stderr[-2000:]
    assert json.loads(replayed.stdout)["acked"] == 403
    assert len(consume_all(conf, replayed_topic, 403, timeout=30)) == 403


def test_tools_use_the_recorded_client_settings(
    sasl_ssl_kafka: LocalKafka, tmp_path: Path
) -> None:
    """With no address given, a tool takes the broker `codec-kafka start` recorded
    in `.local-kafka/` and, as it is secured, the client settings it recorded."""
    assert sasl_ssl_kafka.pid is not None
    state = {
        "pid": sasl_ssl_kafka.pid,
        "bootstrap": sasl_ssl_kafka.bootstrap_servers,
        "version": "4.1",
        "security": "sasl_ssl",
        "client_config": _client_file(sasl_ssl_kafka),
    }
    (tmp_path / ".local-kafka").mkdir()
    (tmp_path / ".local-kafka" / "broker.pid").write_text(json.dumps(state))
    topic = f"rec-{uuid.uuid4().hex[:10]}"
    root = {"PYTHONPATH": str(REPO)}

    def here(module: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", module, *args],
            capture_output=True,
            text=True,
            timeout=90,
            cwd=tmp_path,
            env={k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
            | root,
            check=False,
        )

    made = here("localkafka", "topics", "create", topic, "--partitions", "2")
    assert made.returncode == 0 and made.stdout == f"created {topic}\n", made.stderr
    sent = here("loadgen", "--topic", topic, "--count", "50", "--rate", "0", "--json")
    assert sent.returncode == 0, sent.stderr[-2000:]
    assert json.loads(sent.stdout)["acked"] == 50
    shown = here("service", "--print-config")
    assert '"security_protocol": "SASL_SSL"' in shown.stdout, shown.stdout
    assert sasl_ssl_kafka.client_settings["sasl_password"] not in shown.stdout
    out = tmp_path / "ab"
    ab = here(
        "abrunner",
        *("--codecs", "msgspec-json", "--rate", "300", "--duration", "2"),
        *("--warmup", "1", "--partitions", "1", "--no-bench", "--out", str(out)),
    )
    assert ab.returncode == 0, ab.stderr[-2000:]
    assert "using the broker `codec-kafka start` recorded" in ab.stderr
    (result,) = read(out / "report.json").results
    assert result.error is None and result.lost == 0 and result.seq_missing == 0


def _printed_fix(text: str) -> list[str]:
    """The `codec-kafka topics create ...` a missing topic's error prints, as argv."""
    (command,) = re.findall(r"`(codec-kafka topics create [^`]*)`", text)
    return shlex.split(command)


@pytest.mark.parametrize("given", ["config", "flags"])
def test_missing_topic_fixes_run_as_printed(
    sasl_ssl_kafka: LocalKafka,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    given: str,
) -> None:
    """On a SASL_SSL cluster given by `--config FILE` or by flags (the password
    from the environment): the `codec-kafka topics create ...` that codec-loadgen
    and codec-worker print for a missing topic creates it when run as printed
    (in-process, with the caller's environment), and the other fix printed, the
    same run with `--create-topics`, works too. `codec-kafka topics list` and
    `delete` take the same arguments."""
    settings = sasl_ssl_kafka.client_settings
    env: dict[str, str] = {}
    if given == "config":
        where = ["--config", _client_file(sasl_ssl_kafka)]
    else:
        where = [
            *("--bootstrap-servers", settings["bootstrap_servers"]),
            *("--security-protocol", settings["security_protocol"]),
            *("--sasl-mechanism", settings["sasl_mechanism"]),
            *("--sasl-username", settings["sasl_username"]),
            *("--ssl-ca-location", settings["ssl_ca_location"]),
        ]
        env["KAFKA_SASL_PASSWORD"] = settings["sasl_password"]
    for key in [k for k in os.environ if k.startswith("KAFKA_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    topic = f"fix-{uuid.uuid4().hex[:10]}"
    run = [*where, "--topic", topic, "--count", "20", "--rate", "0", "--json"]
    missing = tool("loadgen", *run, env=env)
    assert missing.returncode == 2, missing.stderr[-2000:]
    fix = _printed_fix(missing.stderr)
    assert fix[:4] == ["codec-kafka", "topics", "create", topic]
    assert settings["sasl_password"] not in " ".join(fix)
    assert localkafka.cli.main(fix[1:]) == 0  # as printed
    assert capsys.readouterr().out == f"created {topic}\n"
    sent = tool("loadgen", *run, env=env)
    assert sent.returncode == 0, sent.stderr[-2000:]
    assert json.loads(sent.stdout)["acked"] == 20

    other = f"{topic}-b"
    run[run.index(topic)] = other
    missing = tool("loadgen", *run, env=env)
    assert missing.returncode == 2 and "or start with --create-topics" in (
        missing.stderr
    ), missing.stderr[-2000:]
    sent = tool("loadgen", *run, "--create-topics", env=env)
    assert sent.returncode == 0, sent.stderr[-2000:]

    absent = f"{topic}-w"  # the worker: its input and dead-letter topics
    worker = tool("service", *where, "--topic", absent, "--metrics-port", "0", env=env)
    assert worker.returncode == 2, worker.stderr[-2000:]
    fix = _printed_fix(worker.stdout + worker.stderr)
    assert fix[:5] == ["codec-kafka", "topics", "create", absent, f"{absent}.dlq"]
    assert localkafka.cli.main(fix[1:]) == 0
    assert capsys.readouterr().out == f"created {absent}\ncreated {absent}.dlq\n"

    made = [topic, other, absent, f"{absent}.dlq"]
    assert localkafka.cli.main(["topics", "list", *where]) == 0
    assert set(made) <= set(capsys.readouterr().out.split())
    assert localkafka.cli.main(["topics", "delete", *made, *where]) == 0
    assert capsys.readouterr().out == "".join(f"deleted {t}\n" for t in made)


@pytest.mark.own_broker
@pytest.mark.parametrize("mode", ["sasl_plaintext", "ssl"])
def test_cli_start_security_records_it(tmp_path: Path, mode: str) -> None:
    """`codec-kafka start --security MODE`: the state file records the
    mode and client.toml, stderr names it, `topics` uses it, `stop` stops it."""
    data = tmp_path / "k"
    started = tool(
        "localkafka",
        *("start", "--data-dir", str(data), "--heap", "256m"),
        *("--security", mode),
    )
    assert started.returncode == 0, started.stderr
    state = json.loads((data / "broker.pid").read_text())
    try:
        client = data / "client.toml"
        assert started.stdout.strip() == state["bootstrap"]
        assert state["security"] == mode
        assert state["client_config"] == str(client)
        assert f"client settings: {client}" in started.stderr
        assert client.stat().st_mode & 0o777 == 0o600
        listed = tool("localkafka", "topics", "list", "--data-dir", str(data))
        assert listed.returncode == 0, listed.stderr
        other = tool("localkafka", "start", "--data-dir", str(data))  # plaintext
        assert other.returncode == 1 and other.stdout == ""
        assert other.stderr == (
            f"codec-kafka: error: a {mode} broker runs in {data}: stop it first\n"
        )
    finally:
        stopped = tool("localkafka", "stop", "--data-dir", str(data))
    assert stopped.returncode == 0 and stopped.stdout.startswith("stopped"), stopped


def test_codec_ab_over_a_secured_broker(
    secured: LocalKafka, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`codec-ab --config client.toml`: its own clients (topics, read-back) and
    the worker and load generator it starts reach the broker; nothing is lost;
    the secrets reach the children by environment, never by argument."""
    started: list[list[str]] = []

    class Recording(subprocess.Popen):  # type: ignore[type-arg]
        def __init__(self, args: list[str], **kwargs: object) -> None:
            started.append([str(a) for a in args])
            super().__init__(args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(subprocess, "Popen", Recording)  # what abrunner starts
    for key in [k for k in os.environ if k.startswith("KAFKA_")]:
        monkeypatch.delenv(key)
    out = tmp_path / "ab"
    code = abrunner.cli.main(
        [
            *("--config", _client_file(secured), "--codecs", "msgspec-msgpack"),
            *("--rate", "500", "--duration", "3", "--warmup", "1"),
            *("--profile", "small", "--partitions", "2", "--no-bench"),
            *("--out", str(out)),
        ]
    )
    report = read(out / "report.json")
    assert code == 0, report.results
    (result,) = report.results
    assert result.error is None and result.lost == 0 and result.seq_missing == 0
    assert result.acked == result.sent and (result.sent or 0) > 0
    assert result.offsets_committed_to_end
    assert {cmd[2] for cmd in started if cmd[1:2] == ["-m"]} >= {"service", "loadgen"}
    secrets = [
        v
        for k, v in secured.client_settings.items()
        if k in ("sasl_password", "ssl_keystore_password")
    ]
    assert secrets
    written = [
        p.read_text(errors="replace")
        for p in out.rglob("*")
        if p.is_file() and p.suffix in (".json", ".md", ".log")
    ]
    for secret in secrets:
        assert not any(secret in " ".join(cmd) for cmd in started)
        assert not any(secret in text for text in written)


SENTINEL = "S3NT1NEL-" + uuid.uuid4().hex
"""The wrong password: it must appear in no output of any tool."""


def _expired_keystore(kafka: LocalKafka) -> str:
    """A client keystore whose certificate, signed by the broker's CA, expired."""
    assert kafka.material is not None
    store = kafka.material.client_p12("expired")
    if not store.exists():
        kafka.material.signed(store, "client", "CN=expired", start="-3d", validity="1")
    return str(store)


class Bad(NamedTuple):
    """A client the broker of `mode` refuses: `env` over its client.toml (or
    alone, without `config`), at `host` instead of 127.0.0.1, and what the line
    must say."""

    mode: str
    config: bool
    env: dict[str, str]
    host: str | None
    cause: str


MISMATCH = "expects another security protocol than"
BAD: dict[str, Bad] = {
    "wrong password": Bad(
        "sasl_ssl",
        True,
        {"KAFKA_SASL_PASSWORD": SENTINEL},
        None,
        "unknown user or wrong password",
    ),
    "unknown user": Bad(
        "sasl_ssl",
        True,
        {"KAFKA_SASL_USERNAME": "nobody"},
        None,
        "unknown user or wrong password",
    ),
    "wrong mechanism": Bad(
        "sasl_ssl",
        True,
        {"KAFKA_SASL_MECHANISM": "PLAIN"},
        None,
        "does not offer SASL mechanism PLAIN (it offers SCRAM-SHA-512)",
    ),
    "untrusted CA": Bad(
        "sasl_ssl", True, {"KAFKA_SSL_CA_LOCATION": "OTHER_CA"}, None, "not trusted"
    ),
    "hostname mismatch": Bad("sasl_ssl", True, {}, "localhost", "hostname mismatch"),
    "plaintext on a SASL_SSL port": Bad(
        "sasl_ssl", False, {}, None, f"{MISMATCH} PLAINTEXT"
    ),
    "plaintext on a TLS port": Bad("mtls", False, {}, None, f"{MISMATCH} PLAINTEXT"),
    "TLS without SASL on a SASL_SSL port": Bad(
        "sasl_ssl",
        False,
        {"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CA_LOCATION": "OWN_CA"},
        None,
        f"{MISMATCH} SSL: it speaks SASL_SSL with SASL mechanisms SCRAM-SHA-512; "
        "set security_protocol = 'SASL_SSL' and sasl_mechanism",
    ),
    "TLS on a PLAINTEXT port": Bad(
        "plaintext",
        False,
        {"KAFKA_SECURITY_PROTOCOL": "SSL"},
        None,
        f"{MISMATCH} SSL: it speaks PLAINTEXT; set security_protocol = 'PLAINTEXT'",
    ),
    "SASL_SSL on a PLAINTEXT port": Bad(
        "plaintext",
        False,
        {
            "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
            "KAFKA_SASL_USERNAME": "codec-ab",
            "KAFKA_SASL_PASSWORD": SENTINEL,
        },
        None,
        f"{MISMATCH} SASL_SSL: it speaks PLAINTEXT; set security_protocol",
    ),
    "expired client certificate": Bad(
        "mtls",
        True,
        {"KAFKA_SSL_KEYSTORE_LOCATION": "EXPIRED"},
        None,
        "refused this client's TLS handshake",
    ),
}


def _as_env(kafka: LocalKafka) -> dict[str, str]:
    """A broker's client settings as KAFKA_* variables (but its address)."""
    env = KafkaConnection.model_validate(kafka.client_settings).environment()
    env.pop("KAFKA_BOOTSTRAP_SERVERS")
    return env


def _tools(topic: str, out: Path) -> dict[str, list[str]]:
    return {
        "codec-worker": ["service", "--topic", topic, "--metrics-port", "0"],
        "codec-loadgen": ["loadgen", "--topic", topic, "--count", "10"],
        "codec-loadgen record": [
            "loadgen",
            "record",
            "--topic",
            topic,
            "--out",
            str(out / "r.rec"),
        ],
        "codec-ab": [
            "abrunner",
            "--codecs",
            "msgspec-json",
            "--no-bench",
            "--out",
            str(out / "ab"),
        ],
        "codec-kafka topics": ["localkafka", "topics", "list"],
    }


def _broker(mode: str, request: pytest.FixtureRequest) -> tuple[str, LocalKafka | None]:
    """The address of the session's broker of `mode`, and its LocalKafka (None for
    the plaintext one, which may be an external broker)."""
    if mode == "plaintext":
        return str(request.getfixturevalue("kafka_bootstrap")), None
    kafka = request.getfixturevalue(f"{mode}_kafka")
    assert isinstance(kafka, LocalKafka)
    return kafka.bootstrap_servers, kafka


def _run_tools(
    tools: dict[str, list[str]],
    address: str,
    config: list[str],
    env: dict[str, str],
    topics_env: dict[str, str],
) -> dict[str, tuple[subprocess.CompletedProcess[str], float]]:
    """Every tool at `address`, side by side; each one's result and seconds."""
    where = ["--bootstrap-servers", address]

    def run(name: str) -> tuple[subprocess.CompletedProcess[str], float]:
        started = time.monotonic()
        argv = tools[name]
        if name == "codec-kafka topics":  # no --config: the client.toml as KAFKA_*
            done = tool(*argv, *where, timeout=30, env=topics_env | env)
        else:
            done = tool(*argv, *config, *where, timeout=30, env=env)
        return done, time.monotonic() - started

    with ThreadPoolExecutor(len(tools)) as pool:
        return dict(zip(tools, pool.map(run, tools), strict=True))


def _one_line(name: str, done: subprocess.CompletedProcess[str], status: int) -> str:
    """The one line a tool ended with (asserting the exit status and no other)."""
    assert done.returncode == status, (name, done.stdout[-1500:], done.stderr[-1500:])
    text = done.stdout + done.stderr
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, (name, lines[:6])
    assert SENTINEL not in text and "Traceback" not in text
    return lines[0]


@pytest.mark.parametrize("case", BAD)
def test_a_refused_client_ends_in_one_line(
    case: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Every tool: exit 1 within seconds with one line naming the broker, the
    protocol (and mechanism) and the cause, and for a listener that speaks another
    security protocol, the setting to change; no traceback, no librdkafka lines,
    no secret."""
    bad = BAD[case]
    address, kafka = _broker(bad.mode, request)
    env = dict(bad.env)
    for key, value in env.items():
        if value == "OTHER_CA":
            other = request.getfixturevalue(
                "mtls_kafka" if bad.mode == "sasl_ssl" else "sasl_ssl_kafka"
            )
            env[key] = str(other.material.ca_pem)
        elif value == "OWN_CA":
            assert kafka is not None and kafka.material is not None
            env[key] = str(kafka.material.ca_pem)
        elif value == "EXPIRED":
            assert kafka is not None
            env[key] = _expired_keystore(kafka)
    if bad.host is not None:
        address = address.replace("127.0.0.1", bad.host)
    config = ["--config", _client_file(kafka)] if bad.config and kafka else []
    given = _as_env(kafka) if bad.config and kafka else {}
    tools = _tools(f"refused-{uuid.uuid4().hex[:6]}", tmp_path)
    runs = _run_tools(tools, address, config, env, given)
    for name, (done, took) in runs.items():
        print(f"{case}: {name}: exit {done.returncode} after {took:.1f} s")
        line = _one_line(name, done, 1)
        assert f"Kafka at {address} refused this client (" in line, (name, line)
        assert bad.cause in line, (name, line)
        if MISMATCH in bad.cause:
            assert "security_protocol" in line, (name, line)
        if bad.mode == "sasl_ssl" and bad.config:
            assert "SASL_SSL, SCRAM-SHA-512" in line or "SASL_SSL, PLAIN" in line


def test_nothing_listening_ends_in_one_line(tmp_path: Path) -> None:
    """Every tool but the worker (a service waits for its brokers, one line every
    30 s: tests/integration/test_worker.py) ends with exit 1 in one line naming
    the refused connection and the setting to check."""
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    tools = _tools("nowhere", tmp_path)
    del tools["codec-worker"]
    runs = _run_tools(tools, address, [], {}, {})
    for name, (done, took) in runs.items():
        print(f"nothing listening: {name}: exit {done.returncode} after {took:.1f} s")
        line = _one_line(name, done, 1)
        assert address in line and "Connection refused" in line, (name, line)
        assert "check --bootstrap-servers" in line, (name, line)


def _pem_client(kafka: LocalKafka, tmp_path: Path, password: str) -> dict[str, str]:
    """The mTLS broker's client certificate as PEM files, the key encrypted with
    `password`: the KAFKA_* settings of a PEM client (no key password given)."""
    assert kafka.material is not None
    store, env = kafka.material.client_p12(), {**os.environ}
    env |= {"IN_PASS": kafka.material.password, "OUT_PASS": password}
    cert, key = tmp_path / "client.pem", tmp_path / "client.key"
    common = ["openssl", "pkcs12", "-in", str(store), "-passin", "env:IN_PASS"]
    for args in (
        ["-clcerts", "-nokeys", "-out", str(cert)],
        ["-nocerts", "-out", str(key), "-passout", "env:OUT_PASS"],
    ):
        subprocess.run([*common, *args], check=True, env=env, capture_output=True)
    return {
        "KAFKA_SECURITY_PROTOCOL": "SSL",
        "KAFKA_SSL_CA_LOCATION": str(kafka.material.ca_pem),
        "KAFKA_SSL_CERTIFICATE_LOCATION": str(cert),
        "KAFKA_SSL_KEY_LOCATION": str(key),
    }


@pytest.mark.parametrize("case", ["wrong key password", "no key password", "keystore"])
def test_a_wrong_key_password_names_its_setting(
    case: str, mtls_kafka: LocalKafka, tmp_path: Path
) -> None:
    """A key or keystore the client cannot open: every tool exits 2 (a bad setting,
    found before Kafka is contacted) in one line naming the password setting."""
    address = mtls_kafka.bootstrap_servers
    pem = _pem_client(mtls_kafka, tmp_path, "the-right-one")
    if case == "keystore":
        config, given = ["--config", _client_file(mtls_kafka)], _as_env(mtls_kafka)
        env, setting = (
            {"KAFKA_SSL_KEYSTORE_PASSWORD": SENTINEL},
            "ssl_keystore_password",
        )
    else:
        config, given, env, setting = [], {}, dict(pem), "ssl_key_password"
        if case == "wrong key password":
            env["KAFKA_SSL_KEY_PASSWORD"] = SENTINEL
    # The PEM client with its right password is let in: the password is the cause.
    right = tool(
        "localkafka",
        *("topics", "list", "--bootstrap-servers", address),
        env=pem | {"KAFKA_SSL_KEY_PASSWORD": "the-right-one"},
    )
    assert right.returncode == 0, right.stderr
    runs = _run_tools(_tools("pw", tmp_path), address, config, env, given)
    for name, (done, took) in runs.items():
        print(f"{case}: {name}: exit {done.returncode} after {took:.1f} s")
        line = _one_line(name, done, 2)
        assert f"{setting} (KAFKA_{setting.upper()})" in line, (name, line)
