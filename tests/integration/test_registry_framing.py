"""Framed values (`--framing confluent`) through the worker, against a real broker
and the session's real schema registry: decoded, or dead-lettered naming the id."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from codec import CodecName, get_codec
from codec.registry import RegistryAccess, RegistryClient, frame_codec
from codec.registry.frame import id_header
from loadgen.payloads import make_payloads
from tests.support import Record, WorkerProcess, consume_all, produce


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    return tmp_path / "worker.log"


def _framed_records(
    name: CodecName, registry_url: str, topic: str, count: int
) -> list[Record]:
    client = RegistryClient(RegistryAccess(registry_url))
    codec = frame_codec(get_codec(name, "medium"), client)
    codec.register(f"{topic}-value")
    return [
        {
            "key": str(seq).encode(),
            "value": codec.encode(codec.from_builtins(payload)),
            "headers": [("x-seq", str(seq).encode())],
        }
        for seq, payload in enumerate(make_payloads("medium", count))
    ]


class TestFramedWorker:
    """Good framed values decode; each kind of bad frame is a dead letter naming the id."""

    def test_framed_avro_with_poison(
        self,
        kafka_bootstrap: str,
        registry_url: str,
        topic_factory: Any,
        log_file: Path,
    ) -> None:
        topic = topic_factory(2)
        dlq = topic_factory(1, prefix="dlq")
        good = _framed_records("avro", registry_url, topic, 30)
        protobuf = _framed_records("protobuf", registry_url, f"{topic}-pb", 1)[0]
        body = good[0]["value"][5:]
        poison = {
            b"p-unknown-id": (
                id_header(2**31 - 7) + body,
                "schema_unknown",
                b"2147483641",
            ),
            b"p-short": (b"\x00\x00\x01", "frame", b"too short"),
            b"p-magic": (b"\x05" + body, "frame", b"wrong magic byte 5"),
            b"p-protobuf-id": (protobuf["value"], "schema_mismatch", b"not AVRO"),
        }
        batch = good[:10]
        for key, (value, _, _) in poison.items():
            batch.append({"key": key, "value": value, "headers": [("x-seq", b"p")]})
        batch += good[10:]
        produce(kafka_bootstrap, topic, batch)
        args = [
            "--codec",
            "avro",
            "--framing",
            "confluent",
            "--registry-url",
            registry_url,
        ]
        args += ["--dlq-topic", dlq]
        with WorkerProcess(kafka_bootstrap, topic, *args, log=log_file) as w:
            assert w.wait_for(len(good)) == len(good)
            w.wait_for(len(poison), outcome="decode_error")
            dead = consume_all(kafka_bootstrap, dlq, len(poison))
            time.sleep(0.5)
            assert w.messages("ok") == len(good)
            assert w.stop() == 0
        assert sorted(m.key() for m in dead) == sorted(poison)
        for m in dead:
            value, reason, named = poison[m.key()]
            headers = dict(m.headers())
            assert m.value() == value  # the original bytes, frame and all
            assert headers["x-dlq-reason"] == reason.encode()
            assert named in headers["x-dlq-exception-message"]
            assert headers["x-dlq-codec"] == b"avro"  # the configured key


@pytest.mark.parametrize("name", ["protobuf"])  # the JSON codecs: unit tests
def test_framed_codecs_decode_in_the_worker(
    name: CodecName,
    kafka_bootstrap: str,
    registry_url: str,
    topic_factory: Any,
    log_file: Path,
) -> None:
    topic = topic_factory(1)
    dlq = topic_factory(1, prefix="dlq")
    n = produce(kafka_bootstrap, topic, _framed_records(name, registry_url, topic, 50))
    args = ["--codec", name, "--framing", "confluent", "--registry-url", registry_url]
    with WorkerProcess(
        kafka_bootstrap, topic, *args, "--dlq-topic", dlq, log=log_file
    ) as w:
        assert w.wait_for(n) == n
        assert w.messages("decode_error") == 0
        assert w.stop() == 0


def test_auto_reads_a_mixed_topic(
    kafka_bootstrap: str, registry_url: str, topic_factory: Any, log_file: Path
) -> None:
    """`--codec auto --framing confluent` on framed Avro, framed protobuf and plain
    MessagePack on one topic: every message decodes."""
    topic = topic_factory(1)
    dlq = topic_factory(1, prefix="dlq")
    mixed = _framed_records("avro", registry_url, topic, 10)
    mixed += _framed_records("protobuf", registry_url, f"{topic}-pb", 10)
    plain = get_codec("msgspec-msgpack", "medium")
    for seq, payload in enumerate(make_payloads("medium", 10)):
        value = plain.encode(plain.from_builtins(payload))
        headers = [("content-type", plain.content_type.encode())]
        mixed.append({"key": str(seq).encode(), "value": value, "headers": headers})
    n = produce(kafka_bootstrap, topic, mixed)
    args = ["--codec", "auto", "--framing", "confluent", "--registry-url", registry_url]
    with WorkerProcess(
        kafka_bootstrap, topic, *args, "--dlq-topic", dlq, log=log_file
    ) as w:
        assert w.wait_for(n) == n
        assert w.messages("decode_error") == 0
        assert w.stop() == 0
