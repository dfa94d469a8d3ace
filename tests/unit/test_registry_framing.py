"""Framed values (the Confluent wire frame) decoded with a schema cached per id.

No network: a fake registry client stands in for the registry;
tests/integration/test_registry_framing.py runs the same codecs on a real one.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from codec import get_codec
from codec.registry import REGISTRY_TYPES, framing_refusal
from codec.registry.client import RegisteredSchema, RegistryUnavailable, SchemaNotFound
from codec.registry.decoders import message_names
from codec.registry.frame import id_header, indexes_bytes, message_indexes, schema_ref
from codec.registry.framed import FramedCodec
from loadgen.payloads import small
from schemas.errors import DecodeError, EncodeError


class FakeClient:
    """A registry of schemas by id; counts lookups; can be 'down'."""

    def __init__(self) -> None:
        self.schemas: dict[int | str, RegisteredSchema] = {}
        self.lookups: list[int | str] = []
        self.down = False

    def schema_by_id(self, ref: int | str) -> RegisteredSchema:
        self.lookups.append(ref)
        if self.down:
            raise RegistryUnavailable(
                "registry unavailable after 3 attempts (URLError)"
            )
        if ref not in self.schemas:
            raise SchemaNotFound(str(ref))
        return self.schemas[ref]

    def lookup(self, subject: str, schema_type: str, text: str) -> int | None:
        return None

    def register(self, subject: str, schema_type: str, text: str) -> int:
        for known, schema in self.schemas.items():
            if schema.text == text and isinstance(known, int):
                return known
        new = len(self.schemas) + 1
        self.schemas[new] = RegisteredSchema(schema_type, text)
        return new


def _framed(name: str, client: FakeClient, **kw: Any) -> FramedCodec:
    inner = get_codec(name, "small")  # type: ignore[arg-type]
    return FramedCodec(inner, REGISTRY_TYPES[name], client, **kw)


def _value(codec: FramedCodec) -> Any:
    return codec.inner.from_builtins(small(random.Random(7), 1))


class TestFrame:
    """The header and the message indexes, byte for byte."""

    @pytest.mark.parametrize(
        ("data", "ref", "pos"),
        [
            (b"\x00\x00\x00\x00\x2a{}", 42, 5),
            (b"\x00\xff\xff\xff\xff", 2**32 - 1, 5),
            (b"\x01" + bytes(range(16)) + b"x", bytes(range(16)).hex(), 17),
        ],
    )
    def test_header(self, data: bytes, ref: int | str, pos: int) -> None:
        assert schema_ref(data, "avro") == (ref, pos)

    @pytest.mark.parametrize(
        ("data", "words"),
        [
            (b"", "empty"),
            (b"\x00\x00\x00\x01", "too short"),
            (b"\x01\x00", "too short"),
            (b'{"a": 1}', "wrong magic byte 123"),
        ],
    )
    def test_not_a_frame(self, data: bytes, words: str) -> None:
        with pytest.raises(DecodeError, match=words) as info:
            schema_ref(data, "avro")
        assert info.value.reason == "frame"

    @pytest.mark.parametrize(
        ("indexes", "wire"),
        [
            ((0,), b"\x00"),
            ((1,), b"\x02\x02"),
            ((5,), b"\x02\x0a"),
            ((1, 0), b"\x04\x02\x00"),
        ],
    )
    def test_message_indexes(self, indexes: tuple[int, ...], wire: bytes) -> None:
        assert indexes_bytes(indexes) == wire
        assert message_indexes(wire + b"rest", 0, "protobuf") == (indexes, len(wire))

    def test_cut_short_indexes(self) -> None:
        with pytest.raises(DecodeError, match="cut short"):
            message_indexes(b"\x04\x02", 0, "protobuf")

    def test_registered_proto_text_names(self) -> None:
        text = """
        syntax = "proto3";
        // message Commented { }
        message A { enum E { X = 0; } message Inner { int32 x = 1; } int32 a = 1; }
        message B { oneof o { int32 b = 1; string c = 2; } }
        """
        assert message_names(text) == {
            (0,): ("A",),
            (0, 0): ("A", "Inner"),
            (1,): ("B",),
        }


@pytest.mark.parametrize("name", sorted(REGISTRY_TYPES))
class TestRoundTrip:
    """Every codec with a registry type writes and reads its frame; one lookup an id."""

    def test_round_trip_asks_the_registry_once(self, name: str) -> None:
        client = FakeClient()
        writer = _framed(name, client)
        writer.register("t-value")
        obj = _value(writer)
        data = writer.encode(obj)
        assert data[:5] == id_header(1)
        reader = _framed(name, client)
        for _ in range(3):
            back = reader.decode(data)
            assert reader.inner.to_builtins(back) == writer.inner.to_builtins(obj)
        assert client.lookups == [1]

    def test_an_unknown_id_is_dead_letter_material_and_remembered(
        self, name: str
    ) -> None:
        client = FakeClient()
        reader = _framed(name, client)
        for _ in range(2):
            with pytest.raises(
                DecodeError, match="schema id 9: not in the registry"
            ) as info:
                reader.decode(id_header(9) + b"\x00{}")
            assert info.value.reason == "schema_unknown"
        assert client.lookups == [9]  # the second message did not ask again

    def test_a_registry_down_fails_the_new_id_then_recovers(self, name: str) -> None:
        client = FakeClient()
        writer = _framed(name, client)
        writer.register("t-value")
        data = writer.encode(_value(writer))
        client.down = True
        reader = _framed(name, client)
        with pytest.raises(
            DecodeError, match="schema id 1: registry unavailable"
        ) as info:
            reader.decode(data)
        assert info.value.reason == "registry_unavailable"
        client.down = False  # not remembered: the next message asks again
        reader.decode(data)
        assert client.lookups == [1, 1]

    def test_encode_needs_a_writer_id(self, name: str) -> None:
        writer = _framed(name, FakeClient())
        with pytest.raises(EncodeError, match="register the schema first"):
            writer.encode(_value(writer))


class TestBounds:
    """The decoder cache never grows past its size."""

    def test_cache_is_bounded(self) -> None:
        client = FakeClient()
        writer = _framed("msgspec-json", client)
        writer.register("t-value")
        body = writer.encode(_value(writer))[5:]
        for extra in range(2, 6):
            client.schemas[extra] = client.schemas[1]
        reader = _framed("msgspec-json", client, cache_size=2)
        for schema_id in (1, 2, 3, 4, 5):
            reader.decode(id_header(schema_id) + body)
        assert reader.cached_ids == 2
        reader.decode(id_header(1) + body)  # dropped: asked again
        assert client.lookups == [1, 2, 3, 4, 5, 1]


class TestMismatch:
    """A writer's schema of another type, or one that does not resolve, is refused."""

    def test_avro_id_read_by_a_json_codec(self) -> None:
        client = FakeClient()
        avro = _framed("avro", client)
        avro.register("t-value")
        reader = _framed("msgspec-json", client)
        with pytest.raises(DecodeError, match="schema id 1: a AVRO schema") as info:
            reader.decode(avro.encode(_value(avro)))
        assert info.value.reason == "schema_mismatch"

    def test_protobuf_indexes_naming_another_message(self) -> None:
        client = FakeClient()
        writer = _framed("protobuf", client)
        writer.register("t-value")
        data = writer.encode(_value(writer))
        assert data[5:6] == b"\x00"  # Payload is the file's first message: [0]
        other = data[:5] + indexes_bytes((1,)) + data[6:]
        with pytest.raises(DecodeError, match=r"indexes \[1\] name Address") as info:
            _framed("protobuf", client).decode(other)
        assert info.value.reason == "schema_mismatch"


class TestAvroEvolution:
    """The writer's schema is resolved against the reader's, as Avro defines it."""

    def _writer(self, client: FakeClient, change: Any) -> tuple[FramedCodec, int]:
        reader = _framed("avro", client)
        schema = json.loads(json.dumps(reader.inner.schema))  # type: ignore[attr-defined]
        change(schema["fields"])
        schema_id = client.register("t-value", "AVRO", json.dumps(schema))
        return reader, schema_id

    def _write(self, schema_text: str, record: dict[str, Any]) -> bytes:
        import io

        import fastavro

        out = io.BytesIO()
        fastavro.schemaless_writer(
            out, fastavro.parse_schema(json.loads(schema_text)), record
        )
        return out.getvalue()

    def test_a_field_the_reader_lacks_is_skipped_and_int_promotes(self) -> None:
        client = FakeClient()

        def change(fields: list[dict[str, Any]]) -> None:
            fields[0]["type"] = "int"
            fields.append({"name": "added", "type": "string", "default": ""})

        reader, schema_id = self._writer(client, change)
        record = {"id": 7, "name": "n", "tags": ["a"], "metrics": [1.5], "added": "x"}
        data = id_header(schema_id) + self._write(
            client.schemas[schema_id].text, record
        )
        got = reader.decode(data)
        assert (got.id, got.name, got.tags, got.metrics) == (7, "n", ["a"], [1.5])

    def test_a_field_the_writer_lacks_without_default_does_not_resolve(self) -> None:
        client = FakeClient()
        reader, schema_id = self._writer(client, lambda fields: fields.pop(1))
        record = {"id": 7, "tags": [], "metrics": []}
        data = id_header(schema_id) + self._write(
            client.schemas[schema_id].text, record
        )
        with pytest.raises(
            DecodeError, match=f"schema id {schema_id}: does not resolve"
        ) as info:
            reader.decode(data)
        assert info.value.reason == "schema_mismatch"


@pytest.mark.parametrize("name", ["msgspec-msgpack", "flatbuffers", "capnp"])
def test_codecs_without_a_registry_type_say_so_in_one_line(name: str) -> None:
    why = framing_refusal(name)
    assert why is not None and "\n" not in why
    assert name in why


class TestBenchRows:
    """`codec-bench --framing confluent` puts each framed codec right after its twin."""

    def test_twins(self) -> None:
        import codecbench

        report = codecbench.run(
            ["msgspec-json", "msgspec-msgpack", "protobuf"],
            ["small"],
            pool_size=20,
            repeats=1,
            warmups=0,
            min_time_s=0.001,
            alloc_calls=5,
            framing="confluent",
        )
        assert [r.codec for r in report.results] == [
            "msgspec-json",
            "msgspec-json+confluent",
            "msgspec-msgpack",
            "protobuf",
            "protobuf+confluent",
        ]
        plain, framed = report.results[0], report.results[1]
        assert framed.wire_bytes == plain.wire_bytes + 5  # magic byte and id


class TestFramedAuto:
    """`auto` with framing: a frame is recognised by its magic byte, the id's schema
    type picks the framed codec; other values decode by their content-type."""

    def _auto(self, client: FakeClient) -> Any:
        from codec import AutoCodec
        from codec.registry import frame_auto

        auto = get_codec("auto", "small")
        assert isinstance(auto, AutoCodec)
        by_type = {
            "AVRO": get_codec("avro", "small"),
            "PROTOBUF": get_codec("protobuf", "small"),
            "JSON": get_codec("msgspec-json", "small"),
        }
        return frame_auto(auto, by_type, client)

    def test_frames_of_each_type_and_plain_values(self) -> None:
        client = FakeClient()
        auto = self._auto(client)
        payload = small(random.Random(7), 1)
        for name in ("avro", "protobuf", "msgspec-json"):
            writer = _framed(name, client)
            writer.register(f"{name}-value")
            data = writer.encode(writer.inner.from_builtins(payload))
            for header in (None, b"application/json", b"application/avro"):
                got = auto.codec_for(header).decode_unchecked(data)
                assert writer.inner.to_builtins(got) == payload
        plain = get_codec("msgspec-msgpack", "small")
        msgpack = plain.encode(plain.from_builtins(payload))
        got = auto.codec_for(b"application/vnd.msgpack").decode_unchecked(msgpack)
        assert plain.to_builtins(got) == payload
        assert sorted(client.lookups) == [1, 1, 2, 2, 3, 3]  # type, then decoder

    def test_an_unknown_id_is_asked_once(self) -> None:
        client = FakeClient()
        auto = self._auto(client)
        for _ in range(3):
            with pytest.raises(DecodeError, match="schema id 4: not in") as info:
                auto.codec_for(None).decode_unchecked(id_header(4) + b"{}")
            assert info.value.reason == "schema_unknown"
        assert client.lookups == [4]
