"""The peers' path beside ours: confluent-kafka's schema-registry deserializers vs the
framed codecs, on the same framed messages, in one process and one run.

`make bench-registry`. Each row decodes the same pool of framed `medium` values
(written by confluent-kafka's serializers into confluent-kafka's in-memory registry,
`mock://`): once with confluent-kafka's deserializer (what Quix Streams and Bytewax
call when a registry is configured), once with the framed codec (`codec.registry`),
each after a warm-up that fetches the schema, best of 5 samples of CPU time
(`time.thread_time_ns`). The ratio is the figure to read: both run in the same
process on the same machine a moment apart.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import (
    ProtobufDeserializer,
    ProtobufSerializer,
)
from confluent_kafka.serialization import MessageField, SerializationContext

from abrunner.lab.peer_decode import best_us
from codec import CodecName, get_codec
from codec.registry import frame_codec
from codec.registry.client import RegisteredSchema, SchemaNotFound
from loadgen.payloads import make_payloads
from schemas.registry import SCHEMAS

_POOL = 200


class _TheirRegistry:
    """Our codecs' view of confluent-kafka's mock registry (fetch by id)."""

    def __init__(self, client: SchemaRegistryClient) -> None:
        self._client = client

    def schema_by_id(self, ref: int | str) -> RegisteredSchema:
        try:
            schema = self._client.get_schema(int(ref))
        except Exception as exc:
            raise SchemaNotFound(str(ref)) from exc
        return RegisteredSchema(schema.schema_type or "AVRO", schema.schema_str or "")

    def lookup(self, subject: str, schema_type: str, text: str) -> int | None:
        raise NotImplementedError

    def register(self, subject: str, schema_type: str, text: str) -> int:
        raise NotImplementedError


def _rows() -> list[tuple[str, float, float]]:
    client = SchemaRegistryClient.new_client({"url": "mock://bench"})
    ctx = SerializationContext("bench", MessageField.VALUE)
    payloads = make_payloads("medium", _POOL, seed=1)
    out = []
    cases: list[tuple[str, CodecName, Any, Any]] = []
    avro = get_codec("avro", "medium")
    avro_text = json.dumps(avro.schema)  # type: ignore[attr-defined]
    cases.append(
        ("avro", "avro", AvroSerializer(client, avro_text), AvroDeserializer(client))
    )
    proto = SCHEMAS["medium"].proto
    conf = {"use.deprecated.format": False}
    cases.append(
        (
            "protobuf",
            "protobuf",
            ProtobufSerializer(proto, client, conf),
            ProtobufDeserializer(proto, conf),
        )
    )
    msgspec_json = frame_codec(
        get_codec("msgspec-json", "medium"), _TheirRegistry(client)
    )
    json_text = msgspec_json.schema_text()
    cases.append(
        (
            "JSON Schema",
            "msgspec-json",
            JSONSerializer(json_text, client),
            JSONDeserializer(json_text),
        )
    )
    for label, name, serializer, deserializer in cases:
        plain = get_codec(name, "medium")
        natives = [plain.from_builtins(p) for p in payloads]
        if name == "protobuf":
            wire = [serializer(n, ctx) for n in natives]
        else:
            wire = [serializer(plain.to_builtins(n), ctx) for n in natives]
        ours = frame_codec(get_codec(name, "medium"), _TheirRegistry(client))
        theirs_us = best_us(functools.partial(deserializer, ctx=ctx), wire)
        ours_us = best_us(ours.decode_unchecked, wire)
        out.append((f"{label} ({name})", theirs_us, ours_us))
    return out


def main() -> None:
    """Print the table."""
    print(
        "| format | confluent-kafka deserializer us/msg | framed codec us/msg | ratio |"
    )
    print("| --- | --- | --- | --- |")
    for label, theirs, ours in _rows():
        print(f"| {label} | {theirs:.2f} | {ours:.2f} | {theirs / ours:.1f}x |")


if __name__ == "__main__":
    main()
