"""The control plane: `/metrics`, `/healthz`, `/readyz` on an asyncio (uvloop) server.

It runs its event loop in a daemon thread, so the consume loop keeps the main thread
to itself: the hot loop never yields to an event loop and pays no hand-off per batch.
The server thread sleeps in epoll until a scrape arrives.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import threading
from collections.abc import Callable

import uvloop
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from service.errors import ConfigError


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
        ready: True when the worker has partitions assigned.
        healthy: True while the consume loop is making progress.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        host: str,
        port: int,
        *,
        ready: Callable[[], bool],
        healthy: Callable[[], bool],
    ) -> None:
        self._registry = registry
        self._host, self.port = host, port
        self._ready, self._healthy = ready, healthy
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None

    def start(self, timeout: float = 10.0) -> int:
        """Start serving; return the bound port.

        Raises:
            ConfigError: it cannot listen there (port in use, foreign address).
        """
        self._thread = threading.Thread(
            target=self._serve, name="control-plane", daemon=True
        )
        self._thread.start()
        self._started.wait(timeout)
        if isinstance(self._error, OSError):
            raise bind_error(self._error, self._host, self.port) from None
        if self._error is not None:
            raise self._error
        return self.port

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the server and join its thread (idempotent)."""
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stopped.set)
        if self._thread is not None:
            self._thread.join(timeout)

    def _serve(self) -> None:
        try:
            uvloop.run(self._main())
        except BaseException as exc:  # surfaced to start() or lost at shutdown
            self._error = exc
            self._started.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._health)
        app.router.add_get("/readyz", self._readiness)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self._host, self.port)
        try:
            await site.start()
            if self.port == 0:  # the port the kernel chose (uvloop or asyncio server)
                self.port = int(runner.addresses[0][1])
            self._started.set()
            await self._stopped.wait()
        finally:
            await runner.cleanup()

    async def _metrics(self, _request: web.Request) -> web.Response:
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _health(self, _request: web.Request) -> web.Response:
        ok = self._healthy()
        return web.Response(
            text="ok\n" if ok else "stalled\n", status=200 if ok else 503
        )

    async def _readiness(self, _request: web.Request) -> web.Response:
        ok = self._ready()
        return web.Response(
            text="ready\n" if ok else "no partitions assigned\n",
            status=200 if ok else 503,
        )
