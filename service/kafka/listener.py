"""What a Kafka listener speaks (TLS or not, SASL or not), asked in its own protocol.

librdkafka reports a client whose security protocol does not match the listener as
a broker that is down or disconnects: a TLS client on a SASL_SSL port completes its
handshake and is then dropped at its first request, a TLS client on a plaintext
port is dropped mid-handshake. `identify` asks the listener itself, once, when the
security check has seen such trouble: a TLS handshake without verification (does
it speak TLS?), then a SaslHandshake request (Kafka's API 17, version 1: a SASL
listener answers with its mechanisms, any other one with ILLEGAL_SASL_STATE).
"""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Final, NamedTuple

PROBE_S: Final = 2.0
"""Each connect, handshake and answer waits at most this long: a broker answers in
milliseconds; a listener that stays silent leaves the question open."""

_SASL_HANDSHAKE: Final = 17
_ILLEGAL_SASL_STATE: Final = 34
_CLIENT_ID: Final = b"codec-ab-probe"
_MAX_ANSWER: Final = 64 * 1024
"""A SaslHandshake answer is a few dozen bytes; anything larger is not one."""


class Listener(NamedTuple):
    """What one listener speaks; None where the probe could not tell."""

    tls: bool | None
    sasl: bool | None
    mechanisms: tuple[str, ...] = ()

    @property
    def protocol(self) -> str:
        """Its `security_protocol`, or a description of what is known."""
        if self.tls is None:
            return "?"
        if self.sasl is None:
            return "TLS (SSL or SASL_SSL)" if self.tls else "no TLS"
        return ("SASL_" if self.sasl else "") + ("SSL" if self.tls else "PLAINTEXT")

    def mismatch(self, protocol: str) -> bool:
        """Whether a client of `security.protocol` `protocol` can never talk to it."""
        protocol = protocol.upper()
        tls, sasl = protocol.endswith("SSL"), protocol.startswith("SASL")
        return (self.tls is not None and self.tls != tls) or (
            self.sasl is not None and self.sasl != sasl
        )


def identify(host: str, port: int, timeout: float = PROBE_S) -> Listener | None:
    """What the listener at `host:port` speaks; None if nothing answers there."""
    try:
        raw = socket.create_connection((host, port), timeout=timeout)
    except OSError:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False  # only "does it speak TLS?" is asked here
    context.verify_mode = ssl.CERT_NONE
    try:
        with context.wrap_socket(raw, server_hostname=host) as wrapped:
            sasl, mechanisms = _sasl(wrapped)
            return Listener(True, sasl, mechanisms)
    except ssl.SSLError as exc:
        # An alert is a TLS listener refusing us (a client certificate required);
        # a connection closed at our ClientHello is a listener that read it as a
        # Kafka request of ~369 MB and dropped it: it does not speak TLS.
        tls = "ALERT" in str(exc).upper()
    except (ConnectionError, TimeoutError):
        tls = False
    except OSError:
        return Listener(None, None)
    finally:
        raw.close()
    if tls:
        return Listener(True, None)
    try:
        with socket.create_connection((host, port), timeout=timeout) as plain:
            sasl, mechanisms = _sasl(plain)
    except OSError:
        return Listener(False, None)
    return Listener(False, sasl, mechanisms)


def _sasl(sock: socket.socket) -> tuple[bool | None, tuple[str, ...]]:
    """Send a SaslHandshake v1; whether the listener asks for SASL, and its
    mechanisms (None, () if it did not answer as a Kafka broker does)."""
    body = struct.pack(">hhih", _SASL_HANDSHAKE, 1, 1, len(_CLIENT_ID)) + _CLIENT_ID
    body += struct.pack(">h", 5) + b"PLAIN"
    try:
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _read(sock, 4))[0]
        if not 10 <= size <= _MAX_ANSWER:
            return None, ()
        answer = _read(sock, size)
    except (OSError, struct.error):
        return None, ()
    try:
        correlation, error, count = struct.unpack_from(">ihi", answer)
        mechanisms: list[str] = []
        at = 10
        for _ in range(max(0, min(count, 64))):
            (length,) = struct.unpack_from(">h", answer, at)
            name = answer[at + 2 : at + 2 + length].decode(errors="replace")
            mechanisms.append(name)
            at += 2 + length
    except struct.error:
        return None, ()
    if correlation != 1:
        return None, ()
    if error == _ILLEGAL_SASL_STATE and not mechanisms:
        return False, ()
    return True, tuple(mechanisms)


def _read(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out
