"""`service.kafka.security_check`: librdkafka's refusals (texts taken from a real broker) named."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from service.kafka.connection import client_error
from service.kafka.listener import Listener, identify
from service.kafka.security_check import _cause, _line, check_access
from service.lifecycle.child_processes import free_port

SASL = {
    "bootstrap.servers": "127.0.0.1:1",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "codec-ab",
    "sasl.password": "S3NT1NEL",
}
PREFIX = "sasl_ssl://127.0.0.1:1/bootstrap: "


@pytest.mark.parametrize(
    ("code", "text", "cause"),
    [
        (
            KafkaError._AUTHENTICATION,
            "SASL authentication error: Authentication failed during authentication "
            "due to invalid credentials with SASL mechanism SCRAM-SHA-512 (after "
            "325ms in state AUTH_REQ)",
            "unknown user or wrong password",
        ),
        (
            KafkaError._AUTHENTICATION,
            "SASL PLAIN mechanism handshake failed: Broker: Unsupported SASL "
            "mechanism: broker's supported mechanisms: SCRAM-SHA-512 (after 305ms "
            "in state AUTH_HANDSHAKE)",
            "does not offer SASL mechanism PLAIN (it offers SCRAM-SHA-512)",
        ),
        (
            KafkaError._TRANSPORT,
            "Receive failed: error:0A000412:SSL routines::ssl/tls alert bad "
            "certificate: SSL alert number 42 (after 3ms in state APIVERSION_QUERY)",
            "refused this client's TLS handshake (alert: bad certificate)",
        ),
    ],
)
def test_refusals_are_named(code: int, text: str, cause: str) -> None:
    mechanism = "PLAIN" if "PLAIN mechanism" in text else "SCRAM-SHA-512"
    conf = {**SASL, "sasl.mechanism": mechanism}
    found = _cause([KafkaError(code, PREFIX + text)], [], conf)
    assert found is not None and cause in found


def test_a_closed_first_request_counts_once_repeated() -> None:
    line = (
        "FAIL [rdkafka#producer-4] [thrd:x]: 127.0.0.1:1/bootstrap: Disconnected: "
        "connection closed by peer: receive 0 after POLLIN (after 4ms in state "
        "APIVERSION_QUERY)"
    )
    plain = {"bootstrap.servers": "127.0.0.1:1"}
    assert _cause([], [line], plain) is None  # once: a broker restarting, maybe
    found = _cause([], [line, line], plain)
    assert found is not None and "another security protocol than PLAINTEXT" in found


def test_the_line_names_broker_protocol_mechanism_user_never_the_secret() -> None:
    line = _line(SASL, "authentication failed")
    assert line == (
        "Kafka at 127.0.0.1:1 refused this client (SASL_SSL, SCRAM-SHA-512, "
        "user 'codec-ab'): authentication failed"
    )
    assert "S3NT1NEL" not in line


def test_no_listener_is_left_to_the_tool() -> None:
    check_access({"bootstrap.servers": f"127.0.0.1:{free_port()}"}, timeout=10)


@pytest.mark.parametrize(
    ("tls", "sasl", "protocol", "mismatch"),
    [
        (True, True, "SASL_SSL", False),
        (True, True, "SSL", True),  # TLS without SASL on a SASL_SSL port
        (False, False, "SSL", True),  # TLS on a plaintext port
        (True, False, "PLAINTEXT", True),  # plaintext on a TLS port
        (True, None, "SSL", False),  # client certificate asked first: SASL unknown
        (True, None, "SASL_SSL", False),
        (True, None, "SASL_PLAINTEXT", True),
        (None, None, "SSL", False),
    ],
)
def test_a_listener_is_matched_against_the_protocol(
    tls: bool | None, sasl: bool | None, protocol: str, mismatch: bool
) -> None:
    assert Listener(tls, sasl).mismatch(protocol) is mismatch


def test_a_mismatch_names_what_the_listener_speaks_and_the_setting() -> None:
    conf = {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SSL"}
    dropped = KafkaError(KafkaError._TRANSPORT, PREFIX + "Disconnected")
    listener = Listener(True, True, ("SCRAM-SHA-512",))
    found = _cause([dropped], [], conf, listener)
    assert found == (
        "its listener expects another security protocol than SSL: it speaks "
        "SASL_SSL with SASL mechanisms SCRAM-SHA-512; set security_protocol = "
        "'SASL_SSL' and sasl_mechanism, sasl_username, sasl_password"
    )
    assert _cause([dropped], [], conf, Listener(True, None)) is None


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (
            "Failed to create producer: ssl.key.location failed: "
            "error:0A080009:SSL routines::PEM lib",
            "ssl_key_location = '/k.pem': the private key cannot be read: a wrong or "
            "missing ssl_key_password (KAFKA_SSL_KEY_PASSWORD)",
        ),
        (
            "Failed to create consumer: Failed to parse ssl.keystore.location "
            "PKCS#12 file: /k.p12: error:11800071:PKCS12 routines::mac verify failure",
            "ssl_keystore_location = '/k.p12': the keystore cannot be opened: a "
            "wrong or missing ssl_keystore_password (KAFKA_SSL_KEYSTORE_PASSWORD)",
        ),
    ],
)
def test_an_unreadable_key_names_its_password_setting(text: str, named: str) -> None:
    conf = {
        "ssl.key.location": "/k.pem",
        "ssl.keystore.location": "/k.p12",
        "ssl.key.password": "S3NT1NEL",
    }
    line = client_error(KafkaException(KafkaError(KafkaError._INVALID_ARG, text)), conf)
    assert line.startswith(f"kafka: {named}"), line
    assert "S3NT1NEL" not in line


def test_a_port_where_nothing_listens_is_no_listener() -> None:
    assert identify("127.0.0.1", free_port()) is None
