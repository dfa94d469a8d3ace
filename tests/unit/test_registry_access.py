"""A registry set up wrong is found at start: one line naming the setting.

The registry is served as a team's is (`tests.registry_proxy`: real TLS with a
private CA and real basic auth in front of an in-process stub): the right settings
pass; a wrong password, no login, a CA that did not sign the certificate, the
system's CAs, a CA file missing, a directory or not PEM, a wrong path, an http URL
for the https port, an https URL for an http port, a port nobody listens on, each
one line that names the setting to check and holds no secret. The client itself
tells a refused login (`RegistryRefused`: the worker waits) from an unknown id.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from codec import get_codec
from codec.registry import RegistryAccess, RegistryClient, frame_codec
from codec.registry.access_check import RegistryAccessError, check_registry
from codec.registry.client import (
    CaFileUnusable,
    RegistryRefused,
    RegistryUnavailable,
    SchemaNotFound,
    lookup_error,
)
from codec.registry.frame import id_header
from schemas.errors import DecodeError
from tests.registry_proxy import USERNAME, SecuredRegistry, StubRegistry

SECRET = "S3NT1NEL-registry-secret"  # noqa: S105 (a test value, searched for)
WRONG_PASSWORD = "wrong"  # noqa: S105 (a test value)
LOGIN = "REGISTRY_USERNAME, REGISTRY_PASSWORD"
CA = "REGISTRY_CA_FILE"
URL = "REGISTRY_URL"


@pytest.fixture(scope="module")
def stub() -> Iterator[StubRegistry]:
    with StubRegistry() as registry:
        yield registry


@pytest.fixture(scope="module")
def secured(
    stub: StubRegistry, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SecuredRegistry]:
    with SecuredRegistry(stub.url, tmp_path_factory.mktemp("ca"), SECRET) as proxy:
        yield proxy


def access(proxy: SecuredRegistry, **changes: Any) -> RegistryAccess:
    given: dict[str, Any] = {
        "url": proxy.url,
        "username": USERNAME,
        "password": SECRET,
        "ca_file": str(proxy.ca_file),
        "attempts": 2,
        "timeout_s": 2.0,
        "backoff_s": 0.05,
    }
    return RegistryAccess(**(given | changes))


def _junk(tmp: Path) -> str:
    (tmp / "junk.pem").write_text("not a certificate\n")
    return str(tmp / "junk.pem")


Change = Callable[[SecuredRegistry, Path], dict[str, Any]]
WRONG: list[tuple[str, Change, tuple[str, ...]]] = [
    (
        "wrong-password",
        lambda p, t: {"password": "wrong"},
        ("HTTP 401", "wrong password", LOGIN, f"user {USERNAME!r}"),
    ),
    (
        "no-login",
        lambda p, t: {"username": None, "password": None},
        ("HTTP 401", "none is set", LOGIN),
    ),
    (
        "another-ca",
        lambda p, t: {"ca_file": str(p.other_ca_file)},
        ("not trusted", "unable to get local issuer certificate", CA),
    ),
    (
        "system-cas",
        lambda p, t: {"ca_file": None},
        ("not trusted", "the system's CAs", CA),
    ),
    (
        "missing-ca-file",
        lambda p, t: {"ca_file": str(t / "nowhere.pem")},
        ("nowhere.pem", "cannot be read (no such file", CA),
    ),
    (
        "ca-file-a-directory",
        lambda p, t: {"ca_file": str(t)},
        ("cannot be read", CA),
    ),
    (
        "ca-file-not-pem",
        lambda p, t: {"ca_file": _junk(t)},
        ("no PEM certificate", "NO_CERTIFICATE_OR_CRL_FOUND", CA),
    ),
    (
        "wrong-path",
        lambda p, t: {"url": p.url.removesuffix("/apis/ccompat/v7")},
        ("no Confluent-compatible API", "HTTP 404", "/apis/ccompat/v7", URL),
    ),
    (
        "http-for-https",
        lambda p, t: {"url": p.url.replace("https:", "http:"), "ca_file": None},
        ("closed the connection", "an http URL for an https one", URL),
    ),
    (
        "nobody-listens",
        lambda p, t: {"url": "https://127.0.0.1:1/apis/ccompat/v7"},
        ("no answer", "Connection refused", "2 attempts", URL),
    ),
]


class TestCheckAtStart:
    """`check_registry`: the one request every tool makes before anything else."""

    def test_the_right_settings_pass(self, secured: SecuredRegistry) -> None:
        check_registry(access(secured))
        check_registry(
            access(secured, url=secured.url.replace("127.0.0.1", "localhost"))
        )

    @pytest.mark.parametrize(
        ("change", "expected"),
        [(c, e) for _, c, e in WRONG],
        ids=[name for name, _, _ in WRONG],
    )
    def test_one_line_naming_the_setting(
        self,
        secured: SecuredRegistry,
        tmp_path: Path,
        change: Change,
        expected: tuple[str, ...],
    ) -> None:
        with pytest.raises(RegistryAccessError) as caught:
            check_registry(access(secured, **change(secured, tmp_path)))
        line = str(caught.value)
        assert line.startswith("schema registry at ") and "\n" not in line
        for part in expected:
            assert part in line
        assert SECRET not in line

    def test_a_certificate_for_another_name(
        self, stub: StubRegistry, tmp_path: Path
    ) -> None:
        other = SecuredRegistry(stub.url, tmp_path, SECRET, names=("localhost",))
        with other, pytest.raises(RegistryAccessError) as caught:
            check_registry(access(other))
        line = str(caught.value)
        assert "not valid for the URL's host" in line and "REGISTRY_URL" in line

    def test_an_https_url_for_an_http_registry(self, stub: StubRegistry) -> None:
        https = stub.url.replace("http:", "https:")
        with pytest.raises(RegistryAccessError, match="does not speak TLS"):
            check_registry(RegistryAccess(https, attempts=1))


class TestClientFaults:
    """Only a 404 is about the id; the rest is the registry's or the client's."""

    def test_a_refused_login_is_not_an_unknown_id(
        self, secured: SecuredRegistry
    ) -> None:
        client = RegistryClient(access(secured, password=WRONG_PASSWORD))
        with pytest.raises(RegistryRefused) as caught:
            client.schema_by_id(1)
        assert caught.value.status == 401
        assert lookup_error("avro", 1, caught.value).reason == "registry_unavailable"

    def test_a_refused_lookup_is_not_asked_again_at_once(
        self, secured: SecuredRegistry
    ) -> None:
        codec = frame_codec(
            get_codec("avro", "small"),
            RegistryClient(access(secured, password=WRONG_PASSWORD, cooldown_s=60.0)),
        )
        before = secured.refused
        for _ in range(3):
            with pytest.raises(DecodeError, match="HTTP 401") as caught:
                codec.decode(id_header(7) + b"\x02")
            assert caught.value.reason == "registry_unavailable"
        assert secured.refused - before == 1

    def test_an_unknown_id_is_an_answer(self, secured: SecuredRegistry) -> None:
        client = RegistryClient(access(secured))
        assert client.schema_by_id(1).text == '"string"'
        with pytest.raises(SchemaNotFound):
            client.schema_by_id(2)

    def test_a_registry_answering_503_is_asked_again(
        self, secured: SecuredRegistry
    ) -> None:
        secured.set_mode("503")
        try:
            with pytest.raises(RegistryUnavailable, match=r"2 attempts \(HTTP 503\)"):
                RegistryClient(access(secured)).schema_by_id(1)
        finally:
            secured.set_mode("up")

    def test_a_ca_file_that_cannot_be_read_fails_every_call(
        self, secured: SecuredRegistry, tmp_path: Path
    ) -> None:
        client = RegistryClient(access(secured, ca_file=str(tmp_path / "no.pem")))
        for _ in range(2):
            with pytest.raises(CaFileUnusable, match=r"no\.pem"):
                client.schema_by_id(1)


class _Page(BaseHTTPRequestHandler):
    """A web server that is not a registry: a page, or a JSON object."""

    def do_GET(self) -> None:
        body = b"<html>a console</html>" if "page" in self.path else b"{}"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        """Silent."""


@pytest.fixture(scope="module")
def not_registries() -> Iterator[tuple[str, str]]:
    """An http server answering pages, and a port that speaks another protocol."""
    pages = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    banner = socket.create_server(("127.0.0.1", 0))

    def greet() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = banner.accept()
                with conn:
                    conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")

    threading.Thread(target=pages.serve_forever, daemon=True).start()
    threading.Thread(target=greet, daemon=True).start()
    yield (
        f"http://127.0.0.1:{pages.server_address[1]}",
        f"http://127.0.0.1:{banner.getsockname()[1]}",
    )
    pages.shutdown()
    pages.server_close()
    banner.close()


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("page", "answered what is not JSON"),
        ("json", "answered {}, not a list of schema types"),
        ("banner", "does not answer HTTP (BadStatusLine: SSH-2.0-OpenSSH_9.2)"),
    ],
)
def test_a_url_that_is_not_a_registry(
    not_registries: tuple[str, str], where: str, expected: str
) -> None:
    pages, banner = not_registries
    url = {"page": pages + "/page", "json": pages + "/api", "banner": banner}[where]
    with pytest.raises(RegistryAccessError) as caught:
        check_registry(RegistryAccess(url, attempts=1))
    line = str(caught.value)
    assert expected in line and "REGISTRY_URL" in line and "\n" not in line
