"""The local schema registry, for real: `codec-kafka registry start|stop` and the
session's registry fixture answering the Confluent-compatible API."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

from localkafka.process import stop_process_group
from localkafka.registry.server import registry_answers
from service.kafka.registry_record import REGISTRY_STATE_FILE, read_registry_state
from service.lifecycle.child_processes import pid_alive

_AVRO = {"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]}
_CONTENT = "application/vnd.schemaregistry.v1+json"


def _post(url: str, body: dict[str, object]) -> dict[str, object]:
    data = json.dumps(body).encode()
    headers = {"Content-Type": _CONTENT}
    request = urllib.request.Request(url, data, headers)  # noqa: S310 (loopback)
    with urllib.request.urlopen(request, timeout=10) as reply:  # noqa: S310 (loopback)
        return dict(json.loads(reply.read()))


def _get(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url, timeout=10) as reply:  # noqa: S310 (loopback)
        return dict(json.loads(reply.read()))


class TestSessionRegistry:
    """The fixture's registry registers a schema and returns it by id."""

    def test_register_then_fetch_by_id(self, registry_url: str) -> None:
        subject = "test-local-registry-value"
        registered = _post(
            f"{registry_url}/subjects/{subject}/versions",
            {"schema": json.dumps(_AVRO)},
        )
        fetched = _get(f"{registry_url}/schemas/ids/{registered['id']}")
        assert json.loads(str(fetched["schema"])) == _AVRO
        assert fetched.get("schemaType", "AVRO") == "AVRO"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "localkafka", "registry", *args]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=120, check=False
    )


class TestRegistryCommands:
    """`codec-kafka registry start` records a URL that answers; `stop` ends it."""

    def test_start_records_the_url_then_stop_ends_it(self, tmp_path: Path) -> None:
        start = _cli("start", "--data-dir", str(tmp_path), "--heap", "256m")
        assert start.returncode == 0, start.stderr
        url = start.stdout.strip()
        pid = int(json.loads((tmp_path / REGISTRY_STATE_FILE).read_text())["pid"])
        try:
            state = read_registry_state(tmp_path)
            assert state is not None and state["url"] == url
            assert url.endswith("/apis/ccompat/v7")
            assert registry_answers(url)
            again = _cli("start", "--data-dir", str(tmp_path))  # finds the first
            assert again.returncode == 0 and again.stdout.strip() == url
        finally:
            stop = _cli("stop", "--data-dir", str(tmp_path))
            if pid_alive(pid):  # never leak the JVM, even if 'stop' is broken
                stop_process_group(pid, timeout=5)
        assert stop.returncode == 0, stop.stderr
        assert stop.stdout == f"stopped the registry at {url} (pid {pid}, {tmp_path})\n"
        assert not (tmp_path / REGISTRY_STATE_FILE).exists()
        assert not registry_answers(url)
        assert _cli("stop", "--data-dir", str(tmp_path)).returncode == 0
