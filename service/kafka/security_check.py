"""Whether the cluster accepts this client's security settings, asked once at start.

librdkafka treats a refused login or TLS handshake like a lost connection: it retries
for ever, reports `_ALL_BROKERS_DOWN` and logs a line per attempt. A wrong password,
an untrusted CA or a client of another security protocol than the listener's never
heals by retrying, so every tool asks first (`check_access`): one client connects, and
a refusal becomes one line naming the broker, the protocol and mechanism and the cause
(`AccessRefused`, exit status 1 in every tool). A connection dropped after TCP
connected has the listener asked what it speaks (`service.kafka.listener`): a TLS
client on a SASL_SSL or plaintext port is named so, with the `security_protocol` to
set. A broker that does not answer at all is left to each tool's own "cannot reach
Kafka" handling; a key or keystore the client cannot open is a `ConfigError`.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import ssl
import time
from collections.abc import Mapping
from typing import Any, Final

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from schemas.errors import ConfigError
from service.kafka.connection import client_error
from service.kafka.listener import Listener, identify

CHECK_S: Final = 5.0
"""How long the check waits for a verdict (a refusal comes within milliseconds)."""
_REPEATS: Final = 2
"""A connection closed at the first request counts once it happened this often."""
_CLOSED_AT_FIRST: Final = re.compile(
    r"Disconnected.*(closed by peer|receive 0).*APIVERSION_QUERY"
)
_ALERT: Final = re.compile(r"alert ([a-z ]+?)(:|$| \()")
_OFFERED: Final = re.compile(r"supported mechanisms: ([A-Z0-9_, -]+)")
_NOT_SASL: Final = re.compile(
    r"Request not valid in current SASL state: broker's supported mechanisms: *(\(|$)"
)
"""The SASL handshake's ILLEGAL_SASL_STATE with no mechanism offered: a listener
without SASL (PLAINTEXT or SSL) met a SASL client."""
_BAD_CREDENTIALS: Final = re.compile(
    r"invalid credentials|invalid username or password", re.IGNORECASE
)
"""SCRAM's and PLAIN's refusal of a user or password."""
_NO_LISTENER: Final = ("Connection refused", "Name or service not known")
_TROUBLE: Final = re.compile(r"Disconnected|handshake failed|closed by peer")
"""librdkafka's lines of a connection dropped after TCP connected."""


class AccessRefused(Exception):
    """The cluster refused this client's security settings (the one line)."""


class _Seen(logging.Handler):
    """Keeps librdkafka's log lines of the check (they say what error_cb does not)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def check_access(
    conf: Mapping[str, Any],
    timeout: float = CHECK_S,
    *,
    refused: type[Exception] = AccessRefused,
) -> None:
    """Connect once with `conf`; raise `refused` if the broker refuses it.

    Returns at once when a broker answers, when none listens (the caller's own
    unreachable handling takes over), or after `timeout` seconds without a verdict.

    Raises:
        AccessRefused: (or `refused`, the caller's own error type) one line: the
            broker, the protocol, mechanism and user, and the cause (wrong
            credentials, mechanism not offered, untrusted or mismatched certificate,
            a client certificate refused, a listener of another security protocol).
        ConfigError: librdkafka cannot open the client's key or keystore (a wrong
            or missing password), before any connection.
    """
    errors: list[KafkaError] = []
    seen = _Seen()
    logger = logging.getLogger(f"{__name__}.check")
    logger.handlers[:] = [seen]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    probe = {k: v for k, v in conf.items() if k not in ("error_cb", "logger")}
    hooks: dict[str, Any] = {"error_cb": errors.append, "logger": logger}
    try:
        admin = AdminClient({**probe, **hooks, "log_level": 6})
    except KafkaException as exc:  # a key or keystore it cannot open: no network yet
        raise ConfigError(f"config error: {client_error(exc, conf)}") from None
    deadline = time.monotonic() + timeout
    listener: Listener | None = None
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=0.5)
            return
        except KafkaException:
            pass
        admin.poll(0.1)
        nobody = _no_listener(errors)
        if listener is None and not nobody and _trouble(errors, seen.lines):
            listener = identify(*_first_host(conf)) or Listener(None, None)
        cause = _cause(errors, seen.lines, conf, listener)
        if cause is not None:
            raise refused(_line(conf, cause))
        if nobody:
            return


def _no_listener(errors: list[KafkaError]) -> bool:
    return any(any(n in e.str() for n in _NO_LISTENER) for e in errors)


def _trouble(errors: list[KafkaError], lines: list[str]) -> bool:
    """Whether a connection failed past TCP: the listener may speak another protocol."""
    return bool(errors) or any(_TROUBLE.search(line) for line in lines)


def _cause(
    errors: list[KafkaError],
    lines: list[str],
    conf: Mapping[str, Any],
    listener: Listener | None = None,
) -> str | None:
    """The cause of a refusal among the errors and log lines so far, if any.

    Args:
        errors: the check client's errors (`error_cb`).
        lines: its log lines.
        conf: its settings.
        listener: what the first bootstrap broker's listener speaks, once asked.
    """
    protocol = str(conf.get("security.protocol", "PLAINTEXT")).upper()
    for err in errors:
        if err.code() != KafkaError._AUTHENTICATION:
            continue
        if _NOT_SASL.search(err.str()):  # the listener answers: it has no SASL
            return _mismatch(protocol, Listener(protocol.endswith("SSL"), False))
        return _authentication(err.str(), conf)
    if listener is not None and listener.mismatch(protocol):
        return _mismatch(protocol, listener)
    for err in errors:
        text, code = err.str(), err.code()
        if code == KafkaError._SSL or "certificate verify failed" in text:
            return _tls(text, conf)
        if (alert := _ALERT.search(text)) is not None:
            return (
                f"the broker refused this client's TLS handshake (alert: "
                f"{alert[1]}): its client certificate is missing, expired or not "
                "signed by a CA the broker trusts (check ssl_keystore_location or "
                "ssl_certificate_location)"
            )
    closed = [
        line
        for line in lines + [e.str() for e in errors]
        if _CLOSED_AT_FIRST.search(line)
    ]
    if len(closed) >= _REPEATS:
        return (
            "the broker closes the connection at the first request: its listener "
            f"expects another security protocol than {protocol} (TLS or SASL?); "
            "check security_protocol"
        )
    return None


def _mismatch(protocol: str, listener: Listener) -> str:
    """The line for a listener that speaks another security protocol than ours."""
    speaks = listener.protocol
    if listener.mechanisms:
        speaks += f" with SASL mechanisms {', '.join(listener.mechanisms)}"
    fix = f"set security_protocol = {listener.protocol!r}"
    if listener.sasl is None:
        fix = "check security_protocol"
    elif listener.sasl and not protocol.startswith("SASL"):
        fix += " and sasl_mechanism, sasl_username, sasl_password"
    elif listener.tls and not protocol.endswith("SSL"):
        fix += " (and ssl_ca_location if its CA is not a system one)"
    return (
        f"its listener expects another security protocol than {protocol}: it "
        f"speaks {speaks}; {fix}"
    )


def _authentication(text: str, conf: Mapping[str, Any]) -> str:
    mechanism = conf.get("sasl.mechanism") or conf.get("sasl.mechanisms") or "GSSAPI"
    if "Unsupported SASL mechanism" in text:
        offered = _OFFERED.search(text)
        also = f" (it offers {offered[1].strip()})" if offered else ""
        return (
            f"the broker does not offer SASL mechanism {mechanism}{also}: "
            "check sasl_mechanism"
        )
    if _BAD_CREDENTIALS.search(text):
        return (
            "authentication failed: unknown user or wrong password (check "
            "sasl_username and sasl_password / KAFKA_SASL_PASSWORD)"
        )
    return f"authentication failed: {_short(text)}"


def _tls(text: str, conf: Mapping[str, Any]) -> str:
    verdict = _verify(conf)
    ca = conf.get("ssl.ca.location") or "the system's CAs"
    if verdict.startswith("Hostname mismatch"):
        host = _first_host(conf)[0]
        return (
            f"hostname mismatch: the broker's certificate is not valid for {host!r} "
            "(connect by a name or address the certificate holds)"
        )
    if "expired" in verdict:
        return "the broker's certificate has expired"
    if verdict:
        return (
            f"the broker's certificate is not trusted ({verdict}): it is not signed "
            f"by a CA in {ca} (check ssl_ca_location)"
        )
    return f"TLS handshake failed: {_short(text)} (check ssl_ca_location: {ca})"


def _first_host(conf: Mapping[str, Any]) -> tuple[str, int]:
    first = str(conf.get("bootstrap.servers", "")).split(",")[0].strip()
    first = first.split("://")[-1]
    host, _, port = first.rpartition(":")
    return host.strip("[]"), int(port or 9092)


def _verify(conf: Mapping[str, Any]) -> str:
    """OpenSSL's reason for not trusting the broker's certificate, from Python's
    own TLS client with the same CA and host name ("" if it cannot tell)."""
    ca = conf.get("ssl.ca.location")
    try:
        host, port = _first_host(conf)
        context = ssl.create_default_context(
            cafile=ca if isinstance(ca, str) and os.path.isfile(ca) else None,
            capath=ca if isinstance(ca, str) and os.path.isdir(ca) else None,
        )
        if conf.get("ssl.endpoint.identification.algorithm", "https") == "none":
            context.check_hostname = False
        with (
            socket.create_connection((host, port), timeout=3) as sock,
            context.wrap_socket(sock, server_hostname=host),
        ):
            return ""
    except ssl.SSLCertVerificationError as exc:
        return str(exc.verify_message)
    except (OSError, ValueError, ssl.SSLError):
        return ""


def _short(text: str) -> str:
    """librdkafka's text without the broker prefix and the state suffix."""
    text = re.sub(r"^\S+://\S+: ", "", text)
    return re.sub(r" \(after \d+ms in state \w+\)$", "", text)


def _line(conf: Mapping[str, Any], cause: str) -> str:
    bootstrap = conf.get("bootstrap.servers", "?")
    protocol = str(conf.get("security.protocol", "PLAINTEXT")).upper()
    how = [protocol]
    if protocol.startswith("SASL"):
        how.append(str(conf.get("sasl.mechanism") or "GSSAPI"))
        if user := conf.get("sasl.username"):
            how.append(f"user {user!r}")
    return f"Kafka at {bootstrap} refused this client ({', '.join(how)}): {cause}"
