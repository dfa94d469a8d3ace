"""The control plane on a real socket: its answers, one thread, stuck clients."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter

from service.telemetry import control_server as control
from service.telemetry.control_server import ControlPlane
from tests.unit.test_app import http_status


@pytest.fixture
def plane(monkeypatch: pytest.MonkeyPatch) -> Iterator[ControlPlane]:
    monkeypatch.setattr(control, "REQUEST_DEADLINE_S", 0.2)
    registry = CollectorRegistry()
    Counter("probe", "A metric to find.", registry=registry).inc()
    Counter("other", "A metric to leave out.", registry=registry).inc()
    plane = ControlPlane(
        registry, "127.0.0.1", 0, ready=lambda: "no partitions assigned", healthy=bool
    )
    plane.start()
    yield plane
    plane.stop()


class TestControlPlane:
    """`/metrics`, `/healthz` and `/readyz` are served from the one control thread."""

    def test_answers(self, plane: ControlPlane) -> None:
        assert http_status(plane.port, "/metrics") == 200
        assert http_status(plane.port, "/healthz") == 503  # healthy=bool(): False
        assert http_status(plane.port, "/readyz") == 503
        assert http_status(plane.port, "/nothing") == 404

    @pytest.mark.parametrize("query", ["name[]=probe_total", "name%5B%5D=probe_total"])
    def test_names_select_series(self, plane: ControlPlane, query: str) -> None:
        url = f"http://127.0.0.1:{plane.port}/metrics?{query}"
        with urllib.request.urlopen(url, timeout=5) as r:
            text = r.read().decode()
        assert "probe_total 1.0" in text and "other" not in text

    def test_no_thread_per_request(self, plane: ControlPlane) -> None:
        before = threading.active_count()
        for _ in range(5):
            assert http_status(plane.port, "/metrics") == 200
        assert threading.active_count() == before

    def test_a_silent_client_is_dropped(self, plane: ControlPlane) -> None:
        """A connection that never sends a request is closed after the client
        timeout, and the probes are answered after it."""
        with socket.create_connection(("127.0.0.1", plane.port), timeout=10) as silent:
            assert http_status(plane.port, "/metrics") == 200
            assert silent.recv(1) == b""  # closed by the server, not by us


@pytest.fixture
def default_plane() -> Iterator[ControlPlane]:
    """A control plane with the shipped limits (no timeout shortened)."""
    registry = CollectorRegistry()
    Counter("probe", "A metric to find.", registry=registry).inc()
    plane = ControlPlane(
        registry, "127.0.0.1", 0, ready=lambda: None, healthy=lambda: True
    )
    plane.start()
    yield plane
    plane.stop()


def _probe(port: int, path: str = "/healthz") -> int | str:
    """GET `path` with a 3 s client timeout (a liveness probe allows 2 s x 3)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as r:
            r.read()
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError as exc:
        return type(exc).__name__


class TestAbuse:
    """Idle, slow and many connections never keep the probes and scrapes waiting."""

    def test_one_idle_connection(self, default_plane: ControlPlane) -> None:
        with socket.create_connection(("127.0.0.1", default_plane.port), timeout=10):
            for _ in range(3):
                assert _probe(default_plane.port) == 200
                assert _probe(default_plane.port, "/metrics") == 200

    def test_many_idle_connections(self, default_plane: ControlPlane) -> None:
        with contextlib.ExitStack() as stack:
            for _ in range(300):
                stack.enter_context(
                    socket.create_connection(
                        ("127.0.0.1", default_plane.port), timeout=10
                    )
                )
            for _ in range(3):
                assert _probe(default_plane.port) == 200
                assert _probe(default_plane.port, "/metrics") == 200

    def test_slowloris_is_cut_at_the_request_deadline(
        self, default_plane: ControlPlane
    ) -> None:
        """A client sending a byte at a time is closed once its whole request has
        taken `REQUEST_DEADLINE_S`, however often it sends; probes go on meanwhile."""
        slow = socket.create_connection(("127.0.0.1", default_plane.port), timeout=10)
        with slow:
            request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"X-A: b\r\n" * 1000
            closed = False
            for byte in request:
                try:
                    slow.send(bytes([byte]))
                except OSError:
                    closed = True
                    break
                assert _probe(default_plane.port) == 200
                time.sleep(0.2)
                if select.select([slow], [], [], 0)[0] and slow.recv(1) == b"":
                    closed = True
                    break
            assert closed, "the slow client was never cut off"

    def test_request_too_large(self, default_plane: ControlPlane) -> None:
        with socket.create_connection(
            ("127.0.0.1", default_plane.port), timeout=10
        ) as s:
            s.sendall(b"GET / HTTP/1.1\r\n" + b"X-A: " + b"b" * 20_000)
            assert s.recv(100).startswith(b"HTTP/1.1 431")

    def test_head_and_other_methods(self, default_plane: ControlPlane) -> None:
        for method, status in ((b"HEAD", b"200"), (b"POST", b"405")):
            with socket.create_connection(
                ("127.0.0.1", default_plane.port), timeout=10
            ) as s:
                s.sendall(method + b" /healthz HTTP/1.0\r\n\r\n")
                answer = b""
                while chunk := s.recv(4096):
                    answer += chunk
                assert answer.split(b" ")[1] == status
                if method == b"HEAD":
                    assert answer.endswith(b"\r\n\r\n")
