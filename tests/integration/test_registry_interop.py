"""Interop with confluent-kafka's own schema-registry serializers, both ways, on the
session's real registry: what they write decodes in our framed codecs to equal
values, and what our framed codecs (the load generator's writers) write decodes
with their deserializers; an Avro evolution case each way."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import (
    ProtobufDeserializer,
    ProtobufSerializer,
)
from confluent_kafka.serialization import MessageField, SerializationContext

from codec import CodecName, get_codec
from codec.registry import RegistryAccess, RegistryClient, frame_codec
from loadgen.payloads import make_payloads
from schemas.registry import SCHEMAS

PAYLOADS = make_payloads("medium", 5, seed=11)


def _ctx() -> SerializationContext:
    return SerializationContext(f"interop-{uuid.uuid4().hex[:8]}", MessageField.VALUE)


def _ours(name: CodecName, registry_url: str) -> Any:
    return frame_codec(
        get_codec(name, "medium"), RegistryClient(RegistryAccess(registry_url))
    )


def _same(name: CodecName, got: Any, payload: dict[str, Any]) -> None:
    plain = get_codec(name, "medium")
    assert plain.to_builtins(got) == plain.to_builtins(plain.from_builtins(payload))


@pytest.fixture(scope="module")
def sr(registry_url: str) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": registry_url}) as client:  # closes its pool
        yield client


class TestTheirsDecodeInOurs:
    """Values confluent-kafka's serializers write decode in the framed codecs."""

    def test_avro(self, sr: SchemaRegistryClient, registry_url: str) -> None:
        schema = json.dumps(get_codec("avro", "medium").schema)  # type: ignore[attr-defined]
        serializer = AvroSerializer(sr, schema)
        ours, ctx = _ours("avro", registry_url), _ctx()
        for payload in PAYLOADS:
            record = get_codec("avro", "medium").to_builtins(
                get_codec("avro", "medium").from_builtins(payload)
            )
            _same("avro", ours.decode(serializer(record, ctx)), payload)

    def test_protobuf(self, sr: SchemaRegistryClient, registry_url: str) -> None:
        message = SCHEMAS["medium"].proto
        serializer = ProtobufSerializer(message, sr, {"use.deprecated.format": False})
        ours, ctx, plain = (
            _ours("protobuf", registry_url),
            _ctx(),
            get_codec("protobuf", "medium"),
        )
        for payload in PAYLOADS:
            data = serializer(plain.from_builtins(payload), ctx)
            _same("protobuf", ours.decode(data), payload)

    @pytest.mark.parametrize("name", ["msgspec-json", "json+pydantic"])
    def test_json_schema(
        self, name: CodecName, sr: SchemaRegistryClient, registry_url: str
    ) -> None:
        ours = _ours(name, registry_url)
        serializer = JSONSerializer(ours.schema_text(), sr)
        ctx = _ctx()
        for payload in PAYLOADS:
            _same(name, ours.decode(serializer(payload, ctx)), payload)


class TestOursDecodeInTheirs:
    """Values the framed codecs write decode with confluent-kafka's deserializers."""

    def test_avro(self, sr: SchemaRegistryClient, registry_url: str) -> None:
        ours, ctx = _ours("avro", registry_url), _ctx()
        ours.register(f"{ctx.topic}-value")
        deserializer = AvroDeserializer(sr)
        plain = get_codec("avro", "medium")
        for payload in PAYLOADS:
            got = deserializer(ours.encode(plain.from_builtins(payload)), ctx)
            _same("avro", plain.from_builtins(got), payload)

    def test_protobuf(self, sr: SchemaRegistryClient, registry_url: str) -> None:
        ours, ctx = _ours("protobuf", registry_url), _ctx()
        ours.register(f"{ctx.topic}-value")
        message = SCHEMAS["medium"].proto
        deserializer = ProtobufDeserializer(message, {"use.deprecated.format": False})
        plain = get_codec("protobuf", "medium")
        for payload in PAYLOADS:
            got = deserializer(ours.encode(plain.from_builtins(payload)), ctx)
            _same("protobuf", got, payload)

    def test_json_schema(self, sr: SchemaRegistryClient, registry_url: str) -> None:
        ours, ctx = _ours("msgspec-json", registry_url), _ctx()
        ours.register(f"{ctx.topic}-value")
        deserializer = JSONDeserializer(ours.schema_text())
        plain = get_codec("msgspec-json", "medium")
        for payload in PAYLOADS:
            got = deserializer(ours.encode(plain.from_builtins(payload)), ctx)
            _same("msgspec-json", plain.from_builtins(got), payload)


class TestAvroEvolution:
    """A new writer read by an old reader, and an old writer read by a new reader."""

    def _evolved(self) -> dict[str, Any]:
        schema = json.loads(json.dumps(get_codec("avro", "medium").schema))  # type: ignore[attr-defined]
        schema["fields"].append(
            {"name": "added_later", "type": "string", "default": "?"}
        )
        return dict(schema)

    def test_new_writer_old_reader(
        self, sr: SchemaRegistryClient, registry_url: str
    ) -> None:
        serializer = AvroSerializer(sr, json.dumps(self._evolved()))
        ours, ctx, plain = (
            _ours("avro", registry_url),
            _ctx(),
            get_codec("avro", "medium"),
        )
        for payload in PAYLOADS:
            record = plain.to_builtins(plain.from_builtins(payload)) | {
                "added_later": "x"
            }
            _same("avro", ours.decode(serializer(record, ctx)), payload)

    def test_old_writer_new_reader(
        self, sr: SchemaRegistryClient, registry_url: str
    ) -> None:
        ours, ctx, plain = (
            _ours("avro", registry_url),
            _ctx(),
            get_codec("avro", "medium"),
        )
        ours.register(f"{ctx.topic}-value")
        deserializer = AvroDeserializer(sr, json.dumps(self._evolved()))
        for payload in PAYLOADS:
            got = deserializer(ours.encode(plain.from_builtins(payload)), ctx)
            assert got["added_later"] == "?"  # the reader's default
            _same(
                "avro",
                plain.from_builtins(
                    {k: v for k, v in got.items() if k != "added_later"}
                ),
                payload,
            )
