"""Sec5: every tool against listeners of every kind, right and wrong settings.

A broker of the scenario's own (`tests.listeners.ManyListeners`): PLAINTEXT,
SASL_PLAINTEXT with SCRAM-SHA-512, SSL, mutual TLS, SASL_SSL with PLAIN. With each
listener's own settings (`--config FILE`) the load generator creates its topic
and sends, `record` reads it back and `codec-kafka topics list` lists it, and the
`codec-kafka topics create ...` a missing topic's error prints runs as printed.
Each mismatched client (a protocol, a mechanism or a password the listener does
not take) ends every tool (worker, load generator, `record`, `codec-kafka topics`,
codec-ab) with exit status 1 and one line naming the cause and the setting; a key,
keystore or TOML key the client cannot use ends it with exit status 2 and one line
naming the setting; a port where nothing listens ends each tool in one line, the
worker after its `--startup-timeout-s`.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final

from service.lifecycle.child_processes import free_port
from tests.faults.harness import Env, Outcome
from tests.listeners import KEY_PASSWORD, ManyListeners

SENTINEL: Final = "S3NT1NEL-" + uuid.uuid4().hex
_TIMEOUT_S: Final = 120
_MISMATCH: Final = "expects another security protocol than"


def _run(args: list[str], cwd: Path) -> tuple[int | str, str, float]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
    bin_dir = str(Path(sys.executable).parent)
    clean["PATH"] = bin_dir + os.pathsep + clean.get("PATH", "")
    started = time.monotonic()
    try:
        done = subprocess.run(
            args,
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            cwd=cwd,
            env=clean,
            check=False,
        )
        code: int | str = done.returncode
        text = done.stdout + done.stderr
    except subprocess.TimeoutExpired:
        code, text = "timeout", ""
    return code, text, round(time.monotonic() - started, 1)


def _tools(topic: str, out: Path) -> dict[str, list[str]]:
    return {
        "worker": ["codec-worker", "--topic", topic, "--metrics-port", "0"],
        "loadgen": ["codec-loadgen", "--topic", topic, "--count", "10"],
        "record": [
            "codec-loadgen",
            "record",
            "--topic",
            topic,
            "--out",
            str(out / "r.rec"),
            "--max",
            "1",
            "--timeout",
            "3",
        ],
        "topics": ["codec-kafka", "topics", "list"],
        "ab": [
            "codec-ab",
            "--codecs",
            "msgspec-json",
            "--no-bench",
            "--rate",
            "100",
            "--duration",
            "1",
            "--warmup",
            "1",
            "--partitions",
            "1",
            "--out",
            str(out / "ab"),
        ],
    }


def _toml(path: Path, kafka: dict[str, str]) -> str:
    path.write_text("[kafka]\n" + "".join(f'{k} = "{v}"\n' for k, v in kafka.items()))
    path.chmod(0o600)
    return str(path)


def _cases(c: ManyListeners, root: Path) -> dict[str, tuple[dict[str, str], int, str]]:
    """Each wrong client: its `[kafka]` settings, exit status and what its line says."""
    s = c.settings
    scram, ssl_, mtls, plain = s["scram"], s["ssl"], s["mtls"], s["plain"]
    ca = ssl_["ssl_ca_location"]
    pem = c.pem_client()
    nowhere = f"127.0.0.1:{free_port()}"
    wrong_pw = {"sasl_password": SENTINEL}
    no_ks_pw = {k: v for k, v in mtls.items() if k != "ssl_keystore_password"}
    typo = {k: v for k, v in scram.items() if k != "sasl_password"}
    typo["sasl_pasword"] = scram["sasl_password"]
    return {
        "PLAINTEXT on SASL_PLAINTEXT": (
            {"bootstrap_servers": c.address["scram"]},
            1,
            f"{_MISMATCH} PLAINTEXT: it speaks SASL_PLAINTEXT",
        ),
        "SSL on SASL_PLAINTEXT": (
            {**ssl_, "bootstrap_servers": c.address["scram"]},
            1,
            f"{_MISMATCH} SSL: it speaks SASL_PLAINTEXT",
        ),
        "SASL_SSL on SASL_PLAINTEXT": (
            {**scram, "security_protocol": "SASL_SSL", "ssl_ca_location": ca},
            1,
            "set security_protocol = 'SASL_PLAINTEXT'",
        ),
        "SASL_PLAINTEXT on PLAINTEXT": (
            {**scram, "bootstrap_servers": c.address["plaintext"]},
            1,
            "set security_protocol = 'PLAINTEXT'",
        ),
        "SASL_PLAINTEXT on SASL_SSL": (
            {**plain, "security_protocol": "SASL_PLAINTEXT"},
            1,
            "set security_protocol = 'SASL_SSL'",
        ),
        "SSL on SASL_SSL (PLAIN)": (
            {**ssl_, "bootstrap_servers": c.address["plain"]},
            1,
            "set security_protocol = 'SASL_SSL' and sasl_mechanism",
        ),
        "PLAINTEXT on SSL": (
            {"bootstrap_servers": c.address["ssl"]},
            1,
            "set security_protocol = 'SSL'",
        ),
        "SASL_SSL on SSL": (
            {**plain, "bootstrap_servers": c.address["ssl"]},
            1,
            "set security_protocol = 'SSL'",
        ),
        "no client certificate on mTLS": (
            {**ssl_, "bootstrap_servers": c.address["mtls"]},
            1,
            "check ssl_keystore_location or ssl_certificate_location",
        ),
        "SCRAM-SHA-256 on SCRAM-SHA-512": (
            {**scram, "sasl_mechanism": "SCRAM-SHA-256"},
            1,
            "check sasl_mechanism",
        ),
        "PLAIN on SCRAM": (
            {**scram, "sasl_mechanism": "PLAIN"},
            1,
            "check sasl_mechanism",
        ),
        "wrong SCRAM password": ({**scram, **wrong_pw}, 1, "sasl_password"),
        "wrong PLAIN password": ({**plain, **wrong_pw}, 1, "sasl_password"),
        "nothing listening (SASL_SSL)": (
            {**plain, "bootstrap_servers": nowhere},
            1,
            "check --bootstrap-servers",
        ),
        "PEM key, no password": (pem, 2, "ssl_key_password"),
        "PEM key, wrong password": (
            {**pem, "ssl_key_password": SENTINEL},
            2,
            "ssl_key_password",
        ),
        "keystore, wrong password": (
            {**mtls, "ssl_keystore_password": SENTINEL},
            2,
            "ssl_keystore_password",
        ),
        "keystore, no password": (no_ks_pw, 2, "ssl_keystore_password"),
        "misspelt TOML key": (typo, 2, "did you mean kafka.sasl_password"),
    }


def _right(c: ManyListeners, root: Path, outcome: Outcome) -> None:
    """Each listener's own settings: the printed fix, a run, record, list."""
    configs = {name: str(path) for name, path in c.files.items()}
    pem = {**c.pem_client(), "ssl_key_password": KEY_PASSWORD}
    configs["mtls (PEM)"] = _toml(root / "pem.toml", pem)
    for name, config in configs.items():
        topic = f"sec5-{uuid.uuid4().hex[:8]}"
        run = ["codec-loadgen", "--config", config, "--topic", topic, "--count", "50"]
        code, text, _ = _run(run, root)
        fixes = re.findall(r"`(codec-kafka topics create [^`]*)`", text)
        if code != 2 or len(fixes) != 1:
            outcome.fail(f"{name}: a missing topic: exit {code}, {text[-300:]}")
            continue
        steps = {
            "printed fix": shlex.split(fixes[0]),
            "loadgen": run,
            "record": [
                "codec-loadgen",
                "record",
                "--config",
                config,
                "--topic",
                topic,
                "--out",
                str(root / f"{topic}.rec"),
                "--max",
                "50",
                "--timeout",
                "10",
            ],
            "topics list": ["codec-kafka", "topics", "list", "--config", config],
        }
        for step, argv in steps.items():
            code, text, took = _run(argv, root)
            outcome.figures[f"right {name}: {step} seconds"] = took
            if code != 0 or (step == "topics list" and topic not in text.split()):
                outcome.fail(f"{name}: {step}: exit {code}: {text[-300:]}")


def _wrong(c: ManyListeners, root: Path, outcome: Outcome) -> None:
    for case, (kafka, status, says) in _cases(c, root).items():
        slug = re.sub(r"\W+", "-", case)
        config = _toml(root / f"{slug}.toml", kafka)
        out = root / slug
        out.mkdir()
        tools = _tools(f"sec5-{uuid.uuid4().hex[:6]}", out)
        tools["worker"] += ["--startup-timeout-s", "5"]
        argvs = [[*argv, "--config", config] for argv in tools.values()]
        with ThreadPoolExecutor(len(tools)) as pool:
            results = list(pool.map(_run, argvs, [root] * len(argvs)))
        runs = dict(zip(tools, results, strict=True))
        for name, (code, text, took) in runs.items():
            lines = [line for line in text.splitlines() if line.strip()]
            if name == "worker" and status == 1 and "nothing" in case:
                lines = [line for line in lines if "worker_failed" in line]
            outcome.figures[f"{case}: {name}"] = f"exit {code}, {took} s"
            if code != status or len(lines) != 1 or says not in lines[0]:
                outcome.fail(
                    f"{case}: {name}: exit {code} (not {status}) or not one line "
                    f"naming {says!r}: {[line[:300] for line in lines[:3]]}"
                )
            if SENTINEL in text or "Traceback" in text:
                outcome.fail(f"{case}: {name}: a secret or a traceback printed")


def sec5_every_listener(env: Env) -> Outcome:
    """Every listener kind: right settings work, wrong ones end in one line."""
    outcome = Outcome("Sec5", "Listeners of every kind: one line for each wrong client")
    root = env.root / f"sec5-{uuid.uuid4().hex[:6]}"
    with ManyListeners(root / "cluster") as cluster:
        _right(cluster, root, outcome)
        _wrong(cluster, root, outcome)
    return outcome
