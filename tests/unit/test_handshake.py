"""`service.kafka.security_check`: librdkafka's refusals (texts taken from a real broker) named."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

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
