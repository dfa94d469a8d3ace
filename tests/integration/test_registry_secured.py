"""A team's registry as Confluent Cloud serves one: HTTPS with a private CA and
basic auth (`tests.registry_proxy` in front of the session's real registry), with
the worker on a real broker.

Set up right, framed values decode and the worker's framed output reads back with
confluent-kafka's own deserializers; set up wrong, the worker exits 1 at start with
one line naming the setting, nothing consumed or committed; failing after start,
the partition waits (`/readyz` 503), no dead letter, and goes on when the registry
answers again.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from codec import CodecName, get_codec
from codec.registry import RegistryAccess, RegistryClient
from codec.registry.frame import id_header
from loadgen.payloads import make_payloads
from tests.integration.test_registry_framing import _framed_records
from tests.registry_proxy import USERNAME, SecuredRegistry
from tests.support import WorkerProcess, consume_all, produce

SECRET = "S3NT1NEL-team-registry"  # noqa: S105 (a test value, searched for)


@pytest.fixture(scope="module")
def secured(
    registry_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SecuredRegistry]:
    with SecuredRegistry(registry_url, tmp_path_factory.mktemp("ca"), SECRET) as proxy:
        yield proxy


def _env(secured: SecuredRegistry, **changes: str | None) -> dict[str, str]:
    """This process's environment with the team's registry settings (``changes``
    applied) in place of any `REGISTRY_*` it has."""
    own = {k: v for k, v in os.environ.items() if not k.startswith("REGISTRY_")}
    return {**own, **secured.environment(**changes)}


def _framed_args(name: str) -> list[str]:
    return ["--codec", name, "--framing", "confluent"]


def _ready(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read().decode()


def _committed(bootstrap: str, group: str, topic: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        return [tp.offset for tp in found if tp.offset >= 0]
    finally:
        consumer.close()


@pytest.mark.parametrize("name", ["avro", "protobuf"])
def test_framed_output_reads_back_with_confluent_deserializers(
    name: CodecName,
    secured: SecuredRegistry,
    kafka_bootstrap: str,
    topic_factory: Any,
    tmp_path: Path,
) -> None:
    """The worker registers its output schema at start (subject `<output>-value`)
    and frames what it writes: confluent-kafka's deserializer, given the team's
    registry settings, reads each value back equal to the one sent. The protobuf
    worker gets its credentials in the URL (`https://KEY:SECRET@host`): used, and
    not in its log."""
    topic, out = topic_factory(1), topic_factory(1, prefix="out")
    dlq = topic_factory(1, prefix="dlq")
    records = _framed_records(name, secured.upstream_url, topic, 30)
    produce(kafka_bootstrap, topic, records)
    args = [*_framed_args(name), "--output-topic", out, "--dlq-topic", dlq]
    env = _env(secured)
    if name == "protobuf":
        env = _env(secured, username=None, password=None)
        env["REGISTRY_URL"] = secured.url_with_credentials()
    with WorkerProcess(
        kafka_bootstrap, topic, *args, env=env, log=tmp_path / "w.log"
    ) as w:
        assert w.wait_for(30) == 30
        assert w.messages("decode_error") == 0
        assert w.stop() == 0
    conf = {
        "url": secured.url,
        "basic.auth.user.info": f"{USERNAME}:{SECRET}",
        "ssl.ca.location": str(secured.ca_file),
    }
    plain = get_codec(name, "medium")
    payloads = make_payloads("medium", 30)
    ctx = SerializationContext(out, MessageField.VALUE)
    with SchemaRegistryClient(conf) as sr:  # closes its connections
        assert f"{out}-value" in sr.get_subjects()
        theirs: Any = (
            AvroDeserializer(sr)
            if name == "avro"
            else ProtobufDeserializer(
                plain.native_type, {"use.deprecated.format": False}
            )
        )
        for m in consume_all(kafka_bootstrap, out, 30):
            seq = int(dict(m.headers())["x-seq"])
            got = theirs(m.value(), ctx)
            want = plain.from_builtins(payloads[seq])
            assert (plain.from_builtins(got) if name == "avro" else got) == want
    assert SECRET not in (tmp_path / "w.log").read_text()


def test_a_wrong_password_stops_the_worker_before_kafka(
    secured: SecuredRegistry,
    kafka_bootstrap: str,
    topic_factory: Any,
    tmp_path: Path,
) -> None:
    """Exit 1, one line naming the setting; nothing consumed or committed."""
    topic, dlq = topic_factory(1), topic_factory(1, prefix="dlq")
    produce(
        kafka_bootstrap, topic, _framed_records("avro", secured.upstream_url, topic, 10)
    )
    log = tmp_path / "w.log"
    env = _env(secured, password="wrong")  # noqa: S106 (a test value)
    with WorkerProcess(
        kafka_bootstrap,
        topic,
        *_framed_args("avro"),
        "--dlq-topic",
        dlq,
        env=env,
        log=log,
    ) as w:
        assert w.proc is not None and w.proc.wait(60) == 1
    (line,) = log.read_text().splitlines()
    assert json.loads(line)["event"] == "worker_failed"
    assert "HTTP 401" in line and "REGISTRY_PASSWORD" in line
    assert SECRET not in line and "wrong" not in line.split("user")[0]
    assert _committed(kafka_bootstrap, w.group, topic) == []


def test_a_registry_failing_after_start_pauses_the_partition(
    secured: SecuredRegistry,
    kafka_bootstrap: str,
    topic_factory: Any,
    tmp_path: Path,
) -> None:
    """Known ids keep decoding; the first message of a new id waits with its
    partition (`/readyz` 503 naming the registry, no dead letter, nothing stored
    past it); once the registry answers, it and the rest are handled."""
    topic, dlq = topic_factory(1), topic_factory(1, prefix="dlq")
    first = _framed_records("avro", secured.upstream_url, topic, 40)
    client = RegistryClient(RegistryAccess(secured.upstream_url))
    evolved = json.loads(json.dumps(get_codec("avro", "medium").schema))  # type: ignore[attr-defined]
    evolved["fields"].append({"name": "added_later", "type": "string", "default": ""})
    new_id = client.register(f"{topic}-other", "AVRO", json.dumps(evolved))
    new_value = id_header(new_id) + first[0]["value"][5:] + b"\x00"  # "" for the field
    config = tmp_path / "registry.toml"
    config.write_text("[registry]\nattempts = 2\ncooldown_s = 1.0\n")  # refused at once
    args = [*_framed_args("avro"), "--dlq-topic", dlq, "--config", str(config)]
    produce(kafka_bootstrap, topic, first[:20])
    log = tmp_path / "w.log"
    env = _env(secured)
    try:
        with WorkerProcess(kafka_bootstrap, topic, *args, env=env, log=log) as w:
            assert w.wait_for(20) == 20  # id learnt while the registry answered
            secured.set_mode("down")
            new = {"key": b"new-id", "value": new_value, "headers": []}
            produce(kafka_bootstrap, topic, [*first[20:30], new, *first[30:]])
            assert w.wait_for(30) == 30  # the known id decodes on, up to the new one
            deadline = time.monotonic() + 30
            while _ready(w.port)[0] != 503 and time.monotonic() < deadline:
                time.sleep(0.2)
            status, reason = _ready(w.port)
            assert status == 503 and "schema registry" in reason
            time.sleep(2)  # retries while down: still waiting, nothing dead-lettered
            assert w.messages("ok") == 30
            assert w.messages("decode_error") == 0
            assert w.metrics().get("worker_registry_waits_total", 0) >= 1
            secured.set_mode("up")
            assert w.wait_for(41) == 41  # the new id's message and the ten after it
            assert w.messages("decode_error") == 0
            assert _ready(w.port)[0] == 200
            assert w.stop() == 0
    finally:
        secured.set_mode("up")
    assert _committed(kafka_bootstrap, w.group, topic) == [41]
