"""Refusals met on the listeners tests/listeners.py builds (SASL_PLAINTEXT with
SCRAM-SHA-512, SSL, mutual TLS, SASL_SSL with PLAIN): librdkafka's texts, taken from
that broker, each named with the setting to check."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from service.kafka.connection import client_error
from service.kafka.security_check import _cause

PREFIX = "sasl_plaintext://127.0.0.1:1/bootstrap: "
NOT_SASL = (
    "SASL {mechanism} mechanism handshake failed: Broker: Request not valid in "
    "current SASL state: broker's supported mechanisms:  (after 2ms in state "
    "AUTH_HANDSHAKE)"
)


@pytest.mark.parametrize(
    ("protocol", "mechanism", "speaks"),
    [("SASL_PLAINTEXT", "SCRAM-SHA-512", "PLAINTEXT"), ("SASL_SSL", "PLAIN", "SSL")],
)
def test_sasl_on_a_listener_without_sasl_names_the_protocol_to_set(
    protocol: str, mechanism: str, speaks: str
) -> None:
    """A SASL client on a PLAINTEXT (or SSL) listener: the broker answers the SASL
    handshake with ILLEGAL_SASL_STATE and no mechanisms."""
    conf = {"security.protocol": protocol, "sasl.mechanism": mechanism}
    text = PREFIX + NOT_SASL.format(mechanism=mechanism)
    found = _cause([KafkaError(KafkaError._AUTHENTICATION, text)], [], conf)
    assert found == (
        f"its listener expects another security protocol than {protocol}: it "
        f"speaks {speaks}; set security_protocol = '{speaks}'"
    )


def test_a_wrong_plain_password_names_the_credentials() -> None:
    conf = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}
    text = PREFIX + (
        "SASL authentication error: Authentication failed: Invalid username or "
        "password (after 4ms in state AUTH_REQ)"
    )
    found = _cause([KafkaError(KafkaError._AUTHENTICATION, text)], [], conf)
    assert found is not None
    assert "unknown user or wrong password" in found and "sasl_password" in found


def test_a_missing_keystore_password_names_the_setting() -> None:
    conf = {"ssl.keystore.location": "/k.p12", "security.protocol": "SSL"}
    text = (
        "Failed to create consumer: `ssl.keystore.password` is mandatory when "
        "`ssl.keystore.location` is set"
    )
    line = client_error(KafkaException(KafkaError(KafkaError._INVALID_ARG, text)), conf)
    assert line == (
        "kafka: Failed to create consumer: ssl_keystore_password "
        "(KAFKA_SSL_KEYSTORE_PASSWORD) is mandatory when ssl_keystore_location "
        "(KAFKA_SSL_KEYSTORE_LOCATION) is set"
    )


def test_an_extra_key_still_points_at_extra() -> None:
    text = 'Invalid value "x" for configuration property "session.timeout.ms"'
    conf = {"session.timeout.ms": "x"}
    line = client_error(KafkaException(KafkaError(KafkaError._INVALID_ARG, text)), conf)
    assert line.endswith("(check -X and [kafka] extra)"), line
