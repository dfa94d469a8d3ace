"""Every tool reaches the registry first: a team's registry set up wrong is one line
naming the setting and exit status 1, before Kafka is touched.

The registry is HTTPS with a private CA and basic auth (`tests.registry_proxy`, a
stub behind it); the broker address is a port nobody listens on, so a tool that
went on to Kafka would wait for it instead of exiting at once.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import structlog

from abrunner.cli import main as ab_main
from loadgen.cli import main as loadgen_main
from tests.registry_proxy import SecuredRegistry, StubRegistry

SECRET = "S3NT1NEL-start-secret"  # noqa: S105 (a test value, searched for)
NOBODY = "127.0.0.1:1"


@pytest.fixture(autouse=True)
def _own_logging() -> Iterator[None]:
    """The tools configure logging onto this test's captured stream: put it back."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    yield
    structlog.reset_defaults()
    root.handlers, root.level = saved


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredRegistry]:
    with (
        StubRegistry() as stub,
        SecuredRegistry(stub.url, tmp_path_factory.mktemp("ca"), SECRET) as proxy,
    ):
        yield proxy


def worker_process(argv: list[str]) -> int:
    """`codec-worker` as its own process (its logger is bound to its stdout once)."""
    done = subprocess.run(
        [sys.executable, "-m", "service", *argv], env=dict(os.environ), check=False
    )
    return done.returncode


TOOLS: dict[str, tuple[Callable[[list[str]], int], list[str]]] = {
    "codec-worker": (
        worker_process,
        ["--topic", "t", "--codec", "avro", "--metrics-port", "0"],
    ),
    "codec-loadgen": (
        loadgen_main,
        ["--topic", "t", "--codec", "avro", "--count", "10"],
    ),
    "codec-ab": (ab_main, ["--codecs", "avro", "--duration", "1"]),
    "codec-ab-replay": (  # a framed recording: before its probe
        ab_main,
        ["--codecs", "avro", "--schema", "medium", "--replay", "framed.rec"],
    ),
}
WRONG = {
    "password": ({"password": "wrong"}, "REGISTRY_PASSWORD"),
    "ca": ({"ca_file": "OTHER"}, "REGISTRY_CA_FILE"),
    "ca-file": ({"ca_file": "/nowhere/ca.pem"}, "REGISTRY_CA_FILE"),
}


CASES = [
    (tool, wrong)
    for tool in sorted(TOOLS)
    for wrong in sorted(WRONG)
    if (tool, wrong) != ("codec-worker", "ca")  # a process each: the costly tool
    and (tool != "codec-ab-replay" or wrong == "password")
]


@pytest.mark.parametrize(("tool", "wrong"), CASES, ids=["-".join(c) for c in CASES])
def test_one_line_naming_the_setting_and_exit_1(
    tool: str,
    wrong: str,
    secured: SecuredRegistry,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.chdir(tmp_path)  # no recorded broker or registry
    (tmp_path / "framed.rec").write_bytes(b"")
    changes, setting = WRONG[wrong]
    changes = {
        k: str(secured.other_ca_file) if v == "OTHER" else v for k, v in changes.items()
    }
    for name, value in secured.environment(**changes).items():
        monkeypatch.setenv(name, value)
    main, args = TOOLS[tool]
    code = main([*args, "--framing", "confluent", "--bootstrap-servers", NOBODY])
    out = capfd.readouterr()
    lines = (out.out + out.err).strip().splitlines()
    assert code == 1
    assert len(lines) == 1, lines
    assert "schema registry at https://127.0.0.1:" in lines[0]
    assert setting in lines[0]
    assert SECRET not in lines[0] and "Traceback" not in lines[0]


def test_the_right_settings_go_on_to_kafka(
    secured: SecuredRegistry,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """With the right settings the load generator gets past the registry and
    stops at the broker nobody runs (its own one line)."""
    monkeypatch.chdir(tmp_path)
    for name, value in secured.environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("KAFKA_EXTRA", '{"socket.connection.setup.timeout.ms": 1000}')
    main, args = TOOLS["codec-loadgen"]
    code = main([*args, "--framing", "confluent", "--bootstrap-servers", NOBODY])
    err = capfd.readouterr().err
    assert code == 1 and "schema registry" not in err and "Kafka" in err
