"""`service.kafka.admin_topics`: a request Kafka never answered says what and where."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError

from service.kafka.admin_topics import TopicAdmin
from service.lifecycle.child_processes import free_port


def test_an_unanswered_request_names_itself_the_cluster_and_the_last_error() -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens: no answer ever comes
    admin = TopicAdmin({"bootstrap.servers": address, "log_level": 0})
    never: Future[Any] = Future()
    with pytest.raises(TimeoutError) as caught:
        admin._answer("create topic 't'", never, 0.2, KafkaError.TOPIC_ALREADY_EXISTS)
    assert str(caught.value).startswith(
        f"no answer from Kafka at {address} to create topic 't' within 0.2 s"
    )
