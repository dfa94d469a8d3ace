"""confluent-kafka 2.x's `__value_schema_id` header form and GUID frames, decoded
by the framed codecs and the worker's loop.

No network: confluent-kafka's own serializers write the values, through its mock
registry client (which, unlike Apicurio 3.0.9, hands out GUIDs); the framed codecs
read that same mock through a small adapter. The registry client's GUID answers
(found, unknown, not served) run against a stub HTTP server on 127.0.0.1.
tests/integration/test_registry_header.py runs the worker on the real registry.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from confluent_kafka.schema_registry import (
    SchemaRegistryClient,
    header_schema_id_serializer,
)
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from codec import CodecName, get_codec
from codec.registry import frame_codec
from codec.registry.client import (
    GuidsUnsupported,
    RegisteredSchema,
    RegistryAccess,
    RegistryClient,
    SchemaNotFound,
    lookup_error,
)
from codec.registry.frame import SCHEMA_ID_HEADER
from loadgen.payloads import make_payloads
from schemas.registry import SCHEMAS
from service.loop.hotpath import MessagePath, Tally
from tests.fakes import FakeMessage

PAYLOADS = make_payloads("medium", 4, seed=5)


class _MockSource:
    """confluent-kafka's mock registry as a `SchemaSource` (ids and GUIDs)."""

    def __init__(self, sr: SchemaRegistryClient) -> None:
        self.sr = sr
        self.lookups: list[int | str] = []

    def schema_by_id(self, ref: int | str) -> RegisteredSchema:
        self.lookups.append(ref)
        try:
            if isinstance(ref, str):
                schema = self.sr.get_schema_by_guid(str(uuid.UUID(ref)))
            else:
                schema = self.sr.get_schema(ref)
        except SchemaRegistryError as exc:
            raise SchemaNotFound(str(exc)) from None
        return RegisteredSchema(schema.schema_type or "AVRO", str(schema.schema_str))

    def lookup(self, subject: str, schema_type: str, text: str) -> int | None:
        raise NotImplementedError

    def register(self, subject: str, schema_type: str, text: str) -> int:
        raise NotImplementedError


@pytest.fixture
def sr() -> SchemaRegistryClient:
    return SchemaRegistryClient.new_client({"url": "mock://r32"})


def _serializer(name: CodecName, sr: SchemaRegistryClient, conf: dict[str, Any]) -> Any:
    """confluent-kafka's serializer for codec ``name``'s medium schema."""
    if name == "avro":
        schema = json.dumps(get_codec("avro", "medium").schema)  # type: ignore[attr-defined]
        return AvroSerializer(sr, schema, conf=conf)
    if name == "protobuf":
        message = SCHEMAS["medium"].proto
        return ProtobufSerializer(message, sr, {"use.deprecated.format": False, **conf})
    ours = frame_codec(get_codec(name, "medium"), _MockSource(sr))
    return JSONSerializer(ours.schema_text(), sr, conf=conf)


def _their_value(name: CodecName, payload: dict[str, Any]) -> Any:
    plain = get_codec(name, "medium")
    obj = plain.from_builtins(payload)
    if name == "protobuf":
        return obj
    return plain.to_builtins(obj)


def _same(name: CodecName, got: Any, payload: dict[str, Any]) -> None:
    plain = get_codec(name, "medium")
    assert plain.to_builtins(got) == plain.to_builtins(plain.from_builtins(payload))


def _path(codec: Any, seen: list[Any]) -> MessagePath:
    return MessagePath(
        codec,
        step=seen.append,
        emit=None,
        max_payload_bytes=1 << 20,
        consumer_error=print,
        retried=lambda: None,
    )


CODECS: list[CodecName] = ["avro", "protobuf", "msgspec-json", "json+pydantic"]


class TestHeaderForm:
    """Values whose schema id is in the `__value_schema_id` header decode in the loop."""

    @pytest.mark.parametrize("name", CODECS)
    def test_their_header_serializer(
        self, name: CodecName, sr: SchemaRegistryClient
    ) -> None:
        ser = _serializer(
            name, sr, {"schema.id.serializer": header_schema_id_serializer}
        )
        source = _MockSource(sr)
        msgs = []
        for seq, payload in enumerate(PAYLOADS):
            headers: list[tuple[str, Any]] = [("x-seq", str(seq).encode())]
            value = ser(
                _their_value(name, payload),
                SerializationContext("t", MessageField.VALUE, headers),
            )
            assert dict(headers)[SCHEMA_ID_HEADER][0] == 1  # magic 1 + GUID
            msgs.append(FakeMessage(value, _offset=seq, _headers=headers))
        seen: list[Any] = []
        tally = Tally()
        path = _path(frame_codec(get_codec(name, "medium"), source), seen)
        nbytes = path.run(msgs, tally)
        assert tally.poison == [] and tally.errors == 0
        assert nbytes == sum(len(m.value() or b"") for m in msgs)
        for got, payload in zip(seen, PAYLOADS, strict=True):
            _same(name, got, payload)
        assert len(source.lookups) == 1  # one GUID, asked once

    def test_the_timed_path_decodes_by_the_header_too(
        self, sr: SchemaRegistryClient
    ) -> None:
        ser = _serializer(
            "avro", sr, {"schema.id.serializer": header_schema_id_serializer}
        )
        headers: list[tuple[str, Any]] = []
        value = ser(
            _their_value("avro", PAYLOADS[0]),
            SerializationContext("t", MessageField.VALUE, headers),
        )
        seen: list[Any] = []
        path = _path(frame_codec(get_codec("avro", "medium"), _MockSource(sr)), seen)
        decode_ns: list[int] = []
        handle_ns: list[int] = []
        m = FakeMessage(value, _headers=headers)
        assert path.timed(m, Tally(), decode_ns, handle_ns) == len(value)
        _same("avro", seen[0], PAYLOADS[0])
        assert decode_ns == [] and len(handle_ns) == 1  # the failed try is not timed

    def test_an_id_header_reads_too(self, sr: SchemaRegistryClient) -> None:
        """Magic 0 and an id in the header, as `dual_schema_id_deserializer` reads."""

        def id_in_header(payload: bytes, ctx: Any, schema_id: Any) -> bytes:
            ctx.headers.append((SCHEMA_ID_HEADER, schema_id.id_to_bytes()))
            return payload

        ser = _serializer("protobuf", sr, {"schema.id.serializer": id_in_header})
        headers: list[tuple[str, Any]] = []
        value = ser(
            _their_value("protobuf", PAYLOADS[1]),
            SerializationContext("t", MessageField.VALUE, headers),
        )
        seen: list[Any] = []
        codec = frame_codec(get_codec("protobuf", "medium"), _MockSource(sr))
        _path(codec, seen).run([FakeMessage(value, _headers=headers)], Tally())
        _same("protobuf", seen[0], PAYLOADS[1])

    @pytest.mark.parametrize(
        ("header", "words"),
        [
            (b"\x07abc", b"is not a schema id"),
            (b"\x01" + b"\x00" * 5, b"is not a schema id"),
            (b"\x00\x7f\xff\xff\xf0", b"2147483632: not in the registry"),
        ],
    )
    def test_a_bad_header_is_a_dead_letter_saying_so(
        self, header: bytes, words: bytes, sr: SchemaRegistryClient
    ) -> None:
        value = get_codec("msgspec-json", "medium").encode(
            get_codec("msgspec-json", "medium").from_builtins(PAYLOADS[0])
        )
        codec = frame_codec(get_codec("msgspec-json", "medium"), _MockSource(sr))
        tally = Tally()
        m = FakeMessage(value, _headers=[(SCHEMA_ID_HEADER, header)])
        assert _path(codec, []).run([m], tally) == 0
        (poison,) = tally.poison
        assert words.decode() in str(poison.error)

    def test_a_framed_value_never_reads_the_headers(
        self, sr: SchemaRegistryClient
    ) -> None:
        """The header is read on the failure path only."""

        class Counting(FakeMessage):
            reads = 0

            def headers(self) -> list[tuple[str, bytes | None]] | None:
                Counting.reads += 1
                return super().headers()

        def guid_prefix(payload: bytes, ctx: Any, schema_id: Any) -> bytes:
            return bytes(schema_id.guid_to_bytes()) + payload

        ser = _serializer("avro", sr, {"schema.id.serializer": guid_prefix})
        value = ser(
            _their_value("avro", PAYLOADS[0]),
            SerializationContext("t", MessageField.VALUE, []),
        )
        seen: list[Any] = []
        path = _path(frame_codec(get_codec("avro", "medium"), _MockSource(sr)), seen)
        m = Counting(value, _headers=[(SCHEMA_ID_HEADER, b"\x07")])
        path.run([m, m], Tally())
        path.timed(m, Tally(), [], [])
        assert len(seen) == 3 and Counting.reads == 0

    def test_no_header_no_magic_byte_is_a_frame_error_as_before(
        self, sr: SchemaRegistryClient
    ) -> None:
        codec = frame_codec(get_codec("msgspec-json", "medium"), _MockSource(sr))
        tally = Tally()
        _path(codec, []).run([FakeMessage(b'{"a": 1}', _headers=[])], tally)
        (poison,) = tally.poison
        assert poison.reason == "frame"
        assert "wrong magic byte 123" in str(poison.error)


class TestGuidFrames:
    """Magic 1 + GUID frames, as confluent-kafka's serializer writes them when told."""

    @pytest.mark.parametrize("name", CODECS)
    def test_guid_prefix(self, name: CodecName, sr: SchemaRegistryClient) -> None:
        def guid_prefix(payload: bytes, ctx: Any, schema_id: Any) -> bytes:
            return bytes(schema_id.guid_to_bytes()) + payload

        ser = _serializer(name, sr, {"schema.id.serializer": guid_prefix})
        source = _MockSource(sr)
        codec = frame_codec(get_codec(name, "medium"), source)
        for payload in PAYLOADS:
            data = ser(
                _their_value(name, payload),
                SerializationContext("t", MessageField.VALUE, []),
            )
            assert data[0] == 1
            _same(name, codec.decode(data), payload)
        assert [type(r) for r in source.lookups] == [str]


class _StubRegistry(BaseHTTPRequestHandler):
    """A GUID endpoint that knows one GUID; `/apicurio` has none (empty 404)."""

    GUID = "0f8e2d9c-7b6a-4c5d-8e9f-a0b1c2d3e4f5"

    def do_GET(self) -> None:
        if self.path.startswith("/apicurio/"):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == f"/schemas/guids/{self.GUID}":
            body: dict[str, Any] = {"schema": '"string"', "schemaType": "AVRO"}
            code = 200
        else:
            body = {"error_code": 40403, "message": "Schema not found"}
            code = 404
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        """Silent."""


@pytest.fixture
def stub_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StubRegistry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class TestGuidLookups:
    """`RegistryClient` tells an unknown GUID from a registry without GUIDs."""

    def _client(self, url: str) -> RegistryClient:
        return RegistryClient(RegistryAccess(url, attempts=1, timeout_s=2.0))

    def test_a_known_guid(self, stub_url: str) -> None:
        got = self._client(stub_url).schema_by_id(_StubRegistry.GUID.replace("-", ""))
        assert got == RegisteredSchema("AVRO", '"string"')

    def test_an_unknown_guid(self, stub_url: str) -> None:
        with pytest.raises(SchemaNotFound) as caught:
            self._client(stub_url).schema_by_id("ab" * 16)
        assert not isinstance(caught.value, GuidsUnsupported)
        assert lookup_error("avro", "ab" * 16, caught.value).reason == "schema_unknown"

    def test_a_registry_without_guids(self, stub_url: str) -> None:
        with pytest.raises(GuidsUnsupported) as caught:
            self._client(stub_url + "/apicurio").schema_by_id("ab" * 16)
        error = lookup_error("avro", "ab" * 16, caught.value)
        assert error.reason == "guid_unsupported"
        assert "/schemas/guids/" in str(error) and "ab" * 16 in str(error)

    def test_an_unknown_id_is_not_taken_for_missing_guids(self, stub_url: str) -> None:
        with pytest.raises(SchemaNotFound) as caught:
            self._client(stub_url + "/apicurio").schema_by_id(7)
        assert not isinstance(caught.value, GuidsUnsupported)
