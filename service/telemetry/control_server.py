"""The control plane: `/metrics`, `/healthz`, `/readyz` from one small server thread.

One daemon thread multiplexes every connection with `selectors` (epoll), so no
client can hold another's answer: an idle connection, a slowloris sending a byte
at a time or hundreds of connections at once leave the probes answered at once.
Each connection has one deadline for its whole request, read and answer
(`REQUEST_DEADLINE_S`, not a timeout per read that a slow client renews with every
byte), a request is at most `MAX_REQUEST_BYTES`, and at most `MAX_CONNECTIONS` are
kept: a new one closes the oldest, so a probe, the newest, is never the one
dropped. Every answer closes its connection.

Performance note: the server must leave the consume loop alone between scrapes.
An asyncio (uvloop + aiohttp) server in a thread cost the loop 0.5-1.1 us a
message on this machine (msgspec-json, 300k-message drains), 7-15 % of the whole
per-message cost; stdlib `http.server`, which this replaced, slept in `select` and
woke twice a second. This thread sleeps in `select` with no timeout while no
connection is open, so it does not wake at all between scrapes; with connections
open it wakes only for their bytes and deadlines. Requests are served in this
thread rather than in a thread each: a scrape takes ~2 ms, starting a thread for
it costs more than waiting, and all the control plane's CPU stays on one thread a
profiler or a benchmark can see.
"""

from __future__ import annotations

import contextlib
import errno
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Final
from urllib.parse import parse_qs

import structlog
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from schemas.errors import ConfigError

log = structlog.get_logger(__name__)

REQUEST_DEADLINE_S: Final = 2.0
"""The longest a connection may take from accept to its answer sent; then it is
closed, however steadily it trickles bytes (a slowloris)."""
MAX_CONNECTIONS: Final = 64
"""Connections kept open at once; one more closes the oldest."""
MAX_REQUEST_BYTES: Final = 8192
"""A request line and headers longer than this are answered 431 and closed."""
BACKLOG: Final = 128
"""The listen queue: a burst of connections waits there to be accepted (and
evicted), not dropped by the kernel, which would make the probe retry its SYN."""
_TEXT: Final = "text/plain; charset=utf-8"
_REASONS: Final = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


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


class _Connection:
    """One client: what it sent so far, what is left to send, its deadline."""

    __slots__ = ("deadline", "inbox", "outbox", "sock")

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.deadline = deadline
        self.inbox = b""
        self.outbox: memoryview | None = None


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
        self._listener: socket.socket | None = None
        self._selector: selectors.BaseSelector | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._conns: dict[socket.socket, _Connection] = {}
        self._stopping = False
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 10.0) -> int:
        """Start serving; return the bound port.

        Raises:
            ConfigError: it cannot listen there (port in use, foreign address).
        """
        try:
            family = socket.getaddrinfo(
                self._host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )[0][0]
            listener = socket.create_server(
                (self._host, self.port), family=family, backlog=BACKLOG
            )
        except OSError as exc:
            raise bind_error(exc, self._host, self.port) from None
        listener.setblocking(False)
        self._listener = listener
        self.port = int(listener.getsockname()[1])
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        selector = self._selector = selectors.DefaultSelector()
        selector.register(listener, selectors.EVENT_READ, None)
        selector.register(self._wake_r, selectors.EVENT_READ, self._wake_r)
        self._thread = threading.Thread(
            target=self._serve, name="control-plane", daemon=True
        )
        self._thread.start()
        return self.port

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the server, close every connection and join its thread (idempotent)."""
        if self._thread is None or self._stopping:
            return
        self._stopping = True
        if self._wake_w is not None:
            with contextlib.suppress(OSError):
                self._wake_w.send(b"x")
        self._thread.join(timeout)
        for conn in list(self._conns.values()):
            self._close(conn)
        for sock in (self._listener, self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()
        if self._selector is not None:
            self._selector.close()

    def exposition(self, query: str = "") -> bytes:
        """The metrics in Prometheus' text format; `name[]=N` (repeatable) keeps
        only those series, as prometheus_client's own handlers do: a tool polling
        one counter costs the worker ~0.2 ms of CPU instead of a full scrape's ~2 ms."""
        names = parse_qs(query).get("name[]")
        registry = self._registry
        return generate_latest(
            registry.restricted_registry(names) if names else registry
        )

    # -- the server thread ---------------------------------------------------------------

    def _serve(self) -> None:
        selector, conns = self._selector, self._conns
        assert selector is not None  # noqa: S101 (set by start)
        while not self._stopping:
            timeout = None
            if conns:
                first = min(c.deadline for c in conns.values())
                timeout = max(0.0, first - time.monotonic())
            for key, mask in selector.select(timeout):
                if key.data is None:
                    self._accept()
                elif isinstance(key.data, _Connection):
                    self._ready_io(key.data, mask)
                # else: the wake-up socket; the loop tests `_stopping`
            now = time.monotonic()
            for conn in [c for c in conns.values() if c.deadline <= now]:
                self._close(conn)

    def _accept(self) -> None:
        assert self._listener is not None and self._selector is not None  # noqa: S101
        for _ in range(BACKLOG):
            try:
                sock, _addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of descriptors, a connection reset before accept
                return
            while len(self._conns) >= MAX_CONNECTIONS:
                self._close(next(iter(self._conns.values())))  # the oldest
            sock.setblocking(False)
            conn = _Connection(sock, time.monotonic() + REQUEST_DEADLINE_S)
            self._conns[sock] = conn
            self._selector.register(sock, selectors.EVENT_READ, conn)
            self._read(conn)  # a probe's request is usually there already

    def _ready_io(self, conn: _Connection, mask: int) -> None:
        try:
            if mask & selectors.EVENT_READ and conn.outbox is None:
                self._read(conn)
            elif mask & selectors.EVENT_WRITE:
                self._write(conn)
        except Exception as exc:  # never let one client stop the control plane
            log.warning("control_plane_error", error=repr(exc))
            self._close(conn)

    def _read(self, conn: _Connection) -> None:
        try:
            data = conn.sock.recv(MAX_REQUEST_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if not data:
            self._close(conn)
            return
        conn.inbox += data
        end = conn.inbox.find(b"\r\n\r\n")
        if end < 0:
            end = conn.inbox.find(b"\n\n")
        if 0 <= end <= MAX_REQUEST_BYTES:
            self._answer(conn, *self._handle(conn.inbox[:end]))
        elif len(conn.inbox) > MAX_REQUEST_BYTES:
            self._answer(conn, 431, _TEXT, b"request too large\n")

    def _handle(self, head: bytes) -> tuple[int, str, bytes, bool]:
        """Status, content type, body and whether to send it, for a request head."""
        parts = head.split(b"\r\n", 1)[0].split(b"\n", 1)[0].split()
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
            return 400, _TEXT, b"bad request\n", True
        method, target = parts[0], parts[1].decode("latin-1")
        if method not in (b"GET", b"HEAD"):
            return 405, _TEXT, b"method not allowed\n", True
        path, _, query = target.partition("?")
        if path == "/metrics":
            body, status, kind = self.exposition(query), 200, CONTENT_TYPE_LATEST
        elif path in ("/healthz", "/readyz"):
            if path == "/healthz":
                why = None if self._healthy() else "stalled"
            else:
                why = self._ready()
            ok_text = "ok" if path == "/healthz" else "ready"
            body, status, kind = (
                (why or ok_text).encode() + b"\n",
                503 if why else 200,
                _TEXT,
            )
        else:
            body, status, kind = b"not found\n", 404, _TEXT
        return status, kind, body, method == b"GET"

    def _answer(
        self,
        conn: _Connection,
        status: int,
        kind: str,
        body: bytes,
        send_body: bool = True,
    ) -> None:
        head = (
            f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\n"
            f"Content-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode("latin-1")
        conn.outbox = memoryview(head + body if send_body else head)
        conn.inbox = b""
        assert self._selector is not None  # noqa: S101
        self._selector.modify(conn.sock, selectors.EVENT_WRITE, conn)
        self._write(conn)

    def _write(self, conn: _Connection) -> None:
        if conn.outbox is None:
            return
        try:
            sent = conn.sock.send(conn.outbox)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        conn.outbox = conn.outbox[sent:]
        if not conn.outbox:
            self._close(conn)

    def _close(self, conn: _Connection) -> None:
        if self._conns.pop(conn.sock, None) is None:
            return
        try:
            if self._selector is not None:
                self._selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()
