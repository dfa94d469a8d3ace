"""A team's own framed traffic, written with confluent-kafka's serializers into the
session's real registry, read by the framed codecs and the worker; and the other
way, what the framed codecs write read by confluent-kafka's deserializers.

The team's schemas differ from the derived ones and from test_registry_interop's:
a hand-written Avro schema with logical types, an enum, a fixed, nested records in
another namespace, an older version and the three subject strategies; a Protobuf
file whose value is not its first message, with a Timestamp import (a well-known
type the serializer leaves to the registry), a nested message, an enum, a map; a
JSON Schema with `$defs`/`$ref`, formats and `additionalProperties`
(tests/fixtures/usermodels/registry_team.py and .proto)."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import (
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import (
    ProtobufDeserializer,
    ProtobufSerializer,
)
from confluent_kafka.serialization import MessageField, SerializationContext

from codec import CodecName, get_codec
from codec.registry import RegistryAccess, RegistryClient, frame_codec
from loadgen.generator import run
from loadgen.recording import record
from schemas.errors import DecodeError
from schemas.user.loader import load_schema
from tests.fixtures.usermodels.registry_team import (
    ORDER_AVRO,
    ORDER_AVRO_V1,
    SHIPMENT_SCHEMA,
    order_record,
    shipment_value,
)
from tests.integration.test_loadgen import settings
from tests.support import WorkerProcess, consume_all, produce

MODULE = "tests.fixtures.usermodels.registry_team"
PROTO = str(Path(__file__).parents[1] / "fixtures/usermodels/registry_team.proto")
AVRO_FORMS = load_schema(f"{MODULE}:Order")
JSON_FORMS = load_schema(f"{MODULE}:Shipment")
PROTO_FORMS = load_schema(f"{PROTO}:Order")
STRATEGIES = [
    {},
    {"subject.name.strategy": record_subject_name_strategy},
    {"subject.name.strategy": topic_record_subject_name_strategy},
]


def _ctx() -> SerializationContext:
    return SerializationContext(f"team-{uuid.uuid4().hex[:8]}", MessageField.VALUE)


def _ours(name: CodecName, forms: Any, registry_url: str) -> Any:
    return frame_codec(
        get_codec(name, forms), RegistryClient(RegistryAccess(registry_url))
    )


def _team_avro(sr: SchemaRegistryClient, topic: str, count: int) -> list[bytes]:
    """Values as the team writes them: versions 1 and 2, every subject strategy."""
    serializers = [
        AvroSerializer(sr, json.dumps(schema), conf=conf)
        for schema in (ORDER_AVRO_V1, ORDER_AVRO)
        for conf in STRATEGIES
    ]
    ctx = SerializationContext(topic, MessageField.VALUE)
    out = []
    for i in range(count):
        record = order_record(i)
        if i % 2 == 0:  # version 1 has neither field
            record = {
                k: v for k, v in record.items() if k not in ("attributes", "coupon")
            }
        out.append(serializers[(i % 2) * 3 + i % 3](record, ctx))
    return out


@pytest.fixture(scope="module")
def sr(registry_url: str) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": registry_url}) as client:
        yield client


class TestTheirsDecodeInOurs:
    """Every value the team's serializers write decodes to an equal value."""

    def test_avro_versions_and_strategies(
        self, sr: SchemaRegistryClient, registry_url: str
    ) -> None:
        ctx = _ctx()
        ours, plain = (
            _ours("avro", AVRO_FORMS, registry_url),
            get_codec("avro", AVRO_FORMS),
        )
        values = _team_avro(sr, ctx.topic, 12)
        assert len({v[1:5] for v in values}) == 2  # one id per version
        name = "com.shop.events.OrderPlaced"
        subjects = {f"{ctx.topic}-value", name, f"{ctx.topic}-{name}"}
        assert subjects <= set(sr.get_subjects())
        for i, data in enumerate(values):
            record = order_record(i)
            if i % 2 == 0:
                record = {
                    k: v for k, v in record.items() if k not in ("attributes", "coupon")
                }
            assert ours.decode(data) == plain.from_builtins(record)

    def test_protobuf_message_index_other_than_first(
        self, sr: SchemaRegistryClient, registry_url: str
    ) -> None:
        cls: Any = PROTO_FORMS.proto
        conf = {"use.deprecated.format": False}
        serializers = [  # the Timestamp import left to the registry, or a reference
            ProtobufSerializer(cls, sr, conf),
            ProtobufSerializer(cls, sr, conf | {"skip.known.types": False}),
        ]
        ours, contexts = _ours("protobuf", PROTO_FORMS, registry_url), [_ctx(), _ctx()]
        for i in range(6):
            serializer, ctx = serializers[i % 2], contexts[i % 2]
            message = cls(order_id=f"o-{i}", status=i % 3, attributes={"n": str(i)})
            message.placed_at.FromMicroseconds(1714566615123456 + i)
            if i % 2:
                message.coupon = ""  # present, and distinct from absent
            for k in range(i % 3):
                message.lines.add(sku=f"s{k}", qty=k, price=k * 1.5)
            data = serializer(message, ctx)
            assert data[5:7] == b"\x02\x02"  # message indexes [1]
            got = ours.decode(data)
            assert got == message
            assert got.HasField("coupon") == bool(i % 2)
        line = ProtobufSerializer(cls.Line, sr, {"use.deprecated.format": False})
        data = line(cls.Line(sku="x"), _ctx())
        with pytest.raises(
            DecodeError, match=r"message indexes \[1, 0\] name Order.Line"
        ):
            ours.decode(data)
        lines = _ours("protobuf", load_schema(f"{PROTO}:Order.Line"), registry_url)
        assert data[5:8] == b"\x04\x02\x00"  # message indexes [1, 0]
        got = lines.decode(data)  # another load of the file: another class
        assert got.SerializeToString() == cls.Line(sku="x").SerializeToString()

    @pytest.mark.parametrize(
        "name", ["msgspec-json", "json+pydantic", "orjson+pydantic"]
    )
    def test_json_schema(
        self, name: CodecName, sr: SchemaRegistryClient, registry_url: str
    ) -> None:
        serializer = JSONSerializer(json.dumps(SHIPMENT_SCHEMA), sr)
        ours, plain, ctx = (
            _ours(name, JSON_FORMS, registry_url),
            get_codec(name, JSON_FORMS),
            _ctx(),
        )
        for i in range(6):
            value = shipment_value(i)
            got = ours.decode(serializer(value, ctx))
            assert plain.to_builtins(got) == plain.to_builtins(
                plain.decode(json.dumps(value).encode())
            )


class TestOursDecodeInTheirs:
    """What the framed codecs (the load generator's writers) write for the team's
    models decodes with confluent-kafka's deserializers."""

    def test_avro(self, sr: SchemaRegistryClient, registry_url: str) -> None:
        ours, ctx = _ours("avro", AVRO_FORMS, registry_url), _ctx()
        ours.register(f"{ctx.topic}-value")
        deserializer, plain = AvroDeserializer(sr), get_codec("avro", AVRO_FORMS)
        for i in range(4):
            value = plain.from_builtins(order_record(i))
            assert plain.from_builtins(deserializer(ours.encode(value), ctx)) == value

    def test_protobuf(self, sr: SchemaRegistryClient, registry_url: str) -> None:
        ours, ctx = _ours("protobuf", PROTO_FORMS, registry_url), _ctx()
        ours.register(f"{ctx.topic}-value")
        cls: Any = PROTO_FORMS.proto
        deserializer = ProtobufDeserializer(cls, {"use.deprecated.format": False})
        message = cls(order_id="o", status=2, attributes={"a": "b"}, coupon="c")
        message.placed_at.FromSeconds(1714566615)
        message.lines.add(sku="s", qty=2, price=0.5)
        assert deserializer(ours.encode(message), ctx) == message

    def test_json_schema_validates_against_the_teams(
        self, sr: SchemaRegistryClient, registry_url: str
    ) -> None:
        ours, ctx = _ours("msgspec-json", JSON_FORMS, registry_url), _ctx()
        ours.register(f"{ctx.topic}-value")
        deserializer = JSONDeserializer(json.dumps(SHIPMENT_SCHEMA))
        plain = get_codec("msgspec-json", JSON_FORMS)
        for i in range(4):
            value = plain.decode(json.dumps(shipment_value(i)).encode())
            got = deserializer(ours.encode(value), ctx)
            assert plain.from_builtins(got) == value


def test_worker_reads_the_teams_avro(
    sr: SchemaRegistryClient,
    registry_url: str,
    kafka_bootstrap: str,
    topic_factory: Any,
    tmp_path: Path,
) -> None:
    topic, dlq = topic_factory(2), topic_factory(1, prefix="dlq")
    values = _team_avro(sr, topic, 60)
    records = [{"key": str(i).encode(), "value": v} for i, v in enumerate(values)]
    n = produce(kafka_bootstrap, topic, records)
    args = ["--codec", "avro", "--schema", f"{MODULE}:Order", "--framing", "confluent"]
    args += ["--registry-url", registry_url, "--dlq-topic", dlq]
    with WorkerProcess(kafka_bootstrap, topic, *args, log=tmp_path / "w.log") as w:
        assert w.wait_for(n) == n
        assert w.messages("decode_error") == 0
        assert w.stop() == 0


@pytest.mark.parametrize("case", ["avro", "msgspec-json"])
def test_framed_replay_per_case(
    case: CodecName,
    sr: SchemaRegistryClient,
    registry_url: str,
    kafka_bootstrap: str,
    topic_factory: Any,
    tmp_path: Path,
) -> None:
    """A recording of the team's framed Avro, replayed as `codec-ab --framing
    confluent --replay` has each case's load generator replay it: the avro case
    sends the recorded bytes, frames and all; another case's values are the same
    records transcoded into its own framed form (registered by the load generator)."""
    source, target = topic_factory(1), topic_factory(1)
    values = _team_avro(sr, source, 20)
    produce(kafka_bootstrap, source, [{"value": v} for v in values])
    out = tmp_path / "team.rec"
    record(settings(kafka_bootstrap, source, record_out=out, record_timeout_s=2))
    s = settings(
        kafka_bootstrap,
        target,
        replay=out,
        rate=2000,
        count=20,
        transcode=case,
        framing="confluent",
        registry={"url": registry_url},
        schema=f"{MODULE}:Order",
    )
    assert run(s).acked == 20
    sent = [m.value() for m in consume_all(kafka_bootstrap, target, 20)]
    team = _ours("avro", AVRO_FORMS, registry_url)
    if case == "avro":
        assert sorted(sent) == sorted(values)
        return
    ours, plain = _ours(case, AVRO_FORMS, registry_url), get_codec(case, AVRO_FORMS)
    assert all(v[0] == 0 for v in sent)  # framed, with the case's own schema id

    def by_id(natives: list[Any]) -> list[Any]:
        return sorted(natives, key=lambda n: n.order_id)

    got = by_id([ours.decode(v) for v in sent])
    want = by_id(
        [plain.from_builtins(team.to_builtins(team.decode(v))) for v in values]
    )
    assert got == want


def test_avro_schema_references(sr: SchemaRegistryClient, registry_url: str) -> None:
    """A writer's schema that names a type registered under another subject (a
    schema reference) is read with that type."""
    address = ORDER_AVRO["fields"][7]["type"]
    subject = f"address-{uuid.uuid4().hex[:8]}"
    sr.register_schema(subject, Schema(json.dumps(address), "AVRO"))
    writer = copy.deepcopy(ORDER_AVRO)
    writer["fields"][7]["type"] = "com.shop.common.Address"
    version = sr.get_latest_version(subject).version
    references = [SchemaReference("com.shop.common.Address", subject, version)]
    serializer = AvroSerializer(sr, Schema(json.dumps(writer), "AVRO", references))
    ours, plain = _ours("avro", AVRO_FORMS, registry_url), get_codec("avro", AVRO_FORMS)
    ctx = _ctx()
    for i in range(3):
        assert ours.decode(serializer(order_record(i), ctx)) == plain.from_builtins(
            order_record(i)
        )
