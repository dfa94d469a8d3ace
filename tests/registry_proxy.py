"""A schema registry as a team's is served: HTTPS with a private CA and basic auth.

Confluent Cloud (and most self-run registries) sit behind TLS with a CA of their
own and HTTP basic auth (an API key and secret). The local Apicurio Registry speaks
plain HTTP with no login, so `SecuredRegistry` puts a TLS-terminating, basic-auth
proxy in front of it: each request is checked for the key and secret, then sent on
to the registry as is (same path, method, body), and the registry's answer comes
back. The CA and the server certificate (for 127.0.0.1) are made by trustme; a
second CA that signed nothing stands for "a CA file that is not the registry's".

The proxy can be made to fail after start, as a registry does in an outage
(`mode`): `down` closes its port (connection refused), `503` answers every request
with 503, `refusing` answers 401 (credentials rotated). `up` brings it back.
"""

from __future__ import annotations

import base64
import http.client
import ssl
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final, Literal

import trustme

Mode = Literal["up", "down", "503", "refusing"]
USERNAME: Final = "team-key"
_HOP_HEADERS: Final = {"connection", "transfer-encoding", "keep-alive", "host"}


class SecuredRegistry:
    """HTTPS and basic auth in front of the registry at ``upstream``.

    Args:
        upstream: the registry's URL (``http://127.0.0.1:P/apis/ccompat/v7``).
        directory: where the CA files are written.
        password: the secret the proxy takes with `USERNAME`.
        names: the host names and addresses its certificate is valid for.
    """

    def __init__(
        self,
        upstream: str,
        directory: Path,
        password: str,
        names: tuple[str, ...] = ("127.0.0.1", "localhost"),
    ) -> None:
        self.upstream = urllib.parse.urlsplit(upstream)
        self.password = password
        self.mode: Mode = "up"
        self.requests = 0
        """Requests that reached the registry (passed the login)."""
        self.refused = 0
        """Requests refused for their credentials."""
        directory.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA()
        self.ca_file = directory / "registry-ca.pem"
        ca.cert_pem.write_to_path(str(self.ca_file))
        self.other_ca_file = directory / "other-ca.pem"
        trustme.CA().cert_pem.write_to_path(str(self.other_ca_file))
        self._tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(*names).configure_cert(self._tls)
        self._server: ThreadingHTTPServer | None = None
        self._port = 0

    @property
    def upstream_url(self) -> str:
        """The registry's own URL (plain http, no login): for a test's set-up."""
        return self.upstream.geturl()

    @property
    def url(self) -> str:
        """The https URL, the registry's own path kept."""
        return f"https://127.0.0.1:{self._port}{self.upstream.path}"

    def url_with_credentials(self, password: str | None = None) -> str:
        """`url` with the key and secret in it (``https://KEY:SECRET@host/...``)."""
        secret = urllib.parse.quote(password or self.password, safe="")
        return self.url.replace("https://", f"https://{USERNAME}:{secret}@", 1)

    def environment(self, **changes: str | None) -> dict[str, str]:
        """The `REGISTRY_*` variables of a client with the right settings,
        ``changes`` applied (``password="wrong"``, ``ca_file="/nowhere"``; None
        leaves the variable out)."""
        env: dict[str, str | None] = {
            "REGISTRY_URL": self.url,
            "REGISTRY_USERNAME": USERNAME,
            "REGISTRY_PASSWORD": self.password,
            "REGISTRY_CA_FILE": str(self.ca_file),
        }
        env.update({f"REGISTRY_{k.upper()}": v for k, v in changes.items()})
        return {k: v for k, v in env.items() if v is not None}

    def set_mode(self, mode: Mode) -> None:
        """Fail (or recover) as a registry in an outage does; see the module."""
        if mode == "down" and self._server is not None:
            self._close()
        elif mode != "down" and self._server is None:
            self._listen(self._port)
        self.mode = mode

    def start(self) -> str:
        """Listens on a free port of 127.0.0.1; returns `url`."""
        self._listen(0)
        return self.url

    def _listen(self, port: int) -> None:
        handler = type("_Bound", (_Proxy,), {"proxy": self})
        server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        server.daemon_threads = True
        server.socket = self._tls.wrap_socket(server.socket, server_side=True)
        self._port = server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._server = server

    def _close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def __enter__(self) -> SecuredRegistry:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._close()


class _Proxy(BaseHTTPRequestHandler):
    """Checks the login, then sends the request on to the registry."""

    proxy: SecuredRegistry
    protocol_version = "HTTP/1.1"

    def _relay(self) -> None:
        proxy = self.proxy
        if proxy.mode == "503":
            self._answer(503, b'{"error_code":50302,"message":"unavailable"}')
            return
        if proxy.mode == "refusing" or not self._logged_in():
            proxy.refused += 1
            self._answer(401, b'{"error_code":401,"message":"Unauthorized"}')
            return
        proxy.requests += 1
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        up = proxy.upstream
        conn = http.client.HTTPConnection(up.hostname or "", up.port, timeout=10)
        try:
            headers = {
                k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS
            }
            headers.pop("Authorization", None)
            conn.request(self.command, self.path, body=body, headers=headers)
            reply = conn.getresponse()
            self._answer(reply.status, reply.read(), reply.getheader("Content-Type"))
        finally:
            conn.close()

    def _logged_in(self) -> bool:
        given = self.headers.get("Authorization", "")
        pair = f"{USERNAME}:{self.proxy.password}".encode()
        return given == "Basic " + base64.b64encode(pair).decode()

    def _answer(
        self, status: int, body: bytes, content_type: str | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type or "application/json")
        self.send_header("Content-Length", str(len(body)))
        if status == 401:
            self.send_header("WWW-Authenticate", 'Basic realm="registry"')
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = _relay

    def log_message(self, *args: Any) -> None:
        """Silent."""


class StubRegistry:
    """A registry's few answers, in-process, for tests without the JVM: the schema
    types, one Avro schema under id 1 (`"string"`), 404 for anything else; each
    request counted in `requests`."""

    def __init__(self) -> None:
        self.requests = 0
        handler = type("_Bound", (_Stub,), {"stub": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True

    @property
    def url(self) -> str:
        """Its plain http URL."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/apis/ccompat/v7"

    def __enter__(self) -> StubRegistry:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Stub(BaseHTTPRequestHandler):
    stub: StubRegistry
    protocol_version = "HTTP/1.1"
    _ANSWERS: Final = {
        "/apis/ccompat/v7/schemas/types": b'["AVRO","JSON","PROTOBUF"]',
        "/apis/ccompat/v7/schemas/ids/1": b'{"schema":"\\"string\\""}',
    }

    def do_GET(self) -> None:
        self.stub.requests += 1
        body = self._ANSWERS.get(self.path)
        status = 200 if body is not None else 404
        body = body or b'{"error_code":40403,"message":"not found"}'
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        """Silent."""
