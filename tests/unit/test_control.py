"""The control plane on a real socket: its answers, one thread, stuck clients."""

from __future__ import annotations

import socket
import threading
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter

from service import control
from service.control import ControlPlane
from tests.unit.test_app import http_status


@pytest.fixture
def plane(monkeypatch: pytest.MonkeyPatch) -> Iterator[ControlPlane]:
    monkeypatch.setattr(control, "CLIENT_TIMEOUT_S", 0.2)
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
