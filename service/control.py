"""The control plane: `/metrics`, `/healthz`, `/readyz` from a small server thread.

It serves from one daemon thread, one request at a time, so the consume loop keeps
the main thread to itself. Performance note: the server must leave the loop alone
between scrapes. An asyncio (uvloop + aiohttp) server in a thread cost the loop
0.5-1.1 us a message on this machine (msgspec-json, 300k-message drains), 7-15 % of
the whole per-message cost; stdlib `http.server` sleeps in `select` and wakes twice
a second, which is free. Requests are served in that thread rather than in a thread
each: a scrape takes ~2 ms, starting a thread for it costs more than waiting, and
all the control plane's CPU stays on one thread a profiler or a benchmark can see.
A client that stops talking is dropped after `CLIENT_TIMEOUT_S`.
"""

from __future__ import annotations

import errno
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Final
from urllib.parse import parse_qs

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from schemas.errors import ConfigError

CLIENT_TIMEOUT_S: Final = 5.0
"""A connection idle this long is closed, so a stuck client cannot hold the probes."""


def bind_error(
    exc: OSError, host: str, port: int, flags: str = "--metrics-host/--metrics-port"
) -> ConfigError:
    """One line for a metrics endpoint that cannot listen: where, why, the fix.

    Args:
        exc: what binding raised.
        host: the configured bind address.
        port: the configured port.
        flags: the settings to change, as the command spells them.
    """
    if exc.errno == errno.EADDRINUSE:
        why = "the port is in use (another worker or load generator?)"
        fix = "choose a free port, or 0 for any free one"
    elif exc.errno == errno.EADDRNOTAVAIL or isinstance(exc, socket.gaierror):
        why = "not an address of this machine"
        fix = "use one of its addresses, 127.0.0.1 or 0.0.0.0"
    else:
        why = exc.strerror or str(exc)
        fix = "choose another port or address"
    return ConfigError(
        f"config error: cannot serve metrics on {host}:{port}: {why}: {fix} ({flags})"
    )


class ControlPlane:
    """Serves metrics and health on `host:port` from a background thread.

    Args:
        registry: the metrics registry to expose.
        host: bind address (127.0.0.1 unless configured: metrics are not public).
        port: TCP port; 0 picks a free one (see `port` after `start`).
        ready: None when the worker is ready (partitions assigned, writes
            confirmed), else why not: the 503 body of `/readyz`.
        healthy: True while the consume loop is making progress.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        host: str,
        port: int,
        *,
        ready: Callable[[], str | None],
        healthy: Callable[[], bool],
    ) -> None:
        self._registry = registry
        self._host, self.port = host, port
        self._ready, self._healthy = ready, healthy
        self._server: HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 10.0) -> int:
        """Start serving; return the bound port.

        Raises:
            ConfigError: it cannot listen there (port in use, foreign address).
        """
        try:
            self._server = HTTPServer((self._host, self.port), self._handler())
        except OSError as exc:
            raise bind_error(exc, self._host, self.port) from None
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.5},
            name="control-plane",
            daemon=True,
        )
        self._thread.start()
        return self.port

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the server and join its thread (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout)

    def exposition(self, query: str = "") -> bytes:
        """The metrics in Prometheus' text format; `name[]=N` (repeatable) keeps
        only those series, as prometheus_client's own handlers do: a tool polling
        one counter costs the worker ~0.2 ms of CPU instead of a full scrape's ~2 ms."""
        names = parse_qs(query).get("name[]")
        registry = self._registry
        return generate_latest(
            registry.restricted_registry(names) if names else registry
        )

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        plane = self

        class Handler(BaseHTTPRequestHandler):
            timeout = CLIENT_TIMEOUT_S

            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                if path == "/metrics":
                    body, status = plane.exposition(query), 200
                    kind = CONTENT_TYPE_LATEST
                elif path in ("/healthz", "/readyz"):
                    if path == "/healthz":
                        why = None if plane._healthy() else "stalled"
                    else:
                        why = plane._ready()
                    status, kind = (503 if why else 200), "text/plain; charset=utf-8"
                    ok_text = "ok" if path == "/healthz" else "ready"
                    body = (why or ok_text).encode() + b"\n"
                else:
                    body, status, kind = (
                        b"not found\n",
                        404,
                        "text/plain; charset=utf-8",
                    )
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                """No access log: scrapes every few seconds would drown the worker's."""

        return Handler
