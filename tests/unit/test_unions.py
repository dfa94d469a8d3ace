"""Discriminated unions on every codec: each format's own union, the member the tag
names decoded with the same values, read by attribute whichever codec decoded it.

protobuf: a wrapper message with `oneof member`; FlatBuffers: a `union` of the
member tables; Cap'n Proto: a wrapper struct with a `union`; Avro: a union of the
member records (issue 29, item 2). The members reuse the tracking fixture's
`InTransit` (camelCase aliases, an optional field).
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import pydantic
import pytest

from codec import CodecName, codec_refusal, get_codec
from schemas.compare import diff, read_native, wire_keyed
from schemas.errors import DecodeError
from schemas.formats import DERIVED_CODECS, carriage
from schemas.user.loader import UserSchema, from_class
from schematool.check import run_check
from service.logic.field_reader import read_every_field
from tests.fixtures.usermodels.tracking import InTransit

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "usermodels"
BINARY: tuple[CodecName, ...] = ("protobuf", "flatbuffers", "capnp", "avro")
EVERY: tuple[CodecName, ...] = (*BINARY, "msgspec-json", "msgspec-msgpack")


class Parcel(pydantic.BaseModel):
    weight_g: int
    note: str | None = None


class Scanned(pydantic.BaseModel):
    kind: Literal["scanned"]
    depot: str
    parcel: Parcel


class Delivered(pydantic.BaseModel):
    kind: Literal["delivered"]
    signed_by: str
    at: pydantic.AwareDatetime
    attempts: list[int] = []


class Envelope(pydantic.BaseModel):
    event_id: int
    payload: Scanned | InTransit | Delivered = pydantic.Field(discriminator="kind")
    previous: Scanned | InTransit | None = pydantic.Field(
        default=None, discriminator="kind"
    )
    source_ip: ipaddress.IPv4Address
    status_url: pydantic.HttpUrl


MEMBERS: dict[str, Any] = {
    "scanned": Scanned(kind="scanned", depot="LHR-4", parcel=Parcel(weight_g=1200)),
    "in_transit": InTransit(kind="in_transit", carrier="DHL", hub_code="CDG"),
    "delivered": Delivered(
        kind="delivered",
        signed_by="A. Reader",
        at=datetime.datetime(2025, 3, 15, 10, 30, tzinfo=datetime.UTC),
        attempts=[1, 2],
    ),
}


@pytest.fixture(scope="module")
def schema() -> UserSchema:
    return from_class(Envelope, "test_unions:Envelope")


def envelope(tag: str, previous: str | None = None) -> Envelope:
    return Envelope(
        event_id=7,
        payload=MEMBERS[tag],
        previous=None if previous is None else MEMBERS[previous],
        source_ip=ipaddress.IPv4Address("192.0.2.7"),
        status_url=pydantic.HttpUrl("https://example.com/t/1"),
    )


def round_trip(codec_name: CodecName, schema: UserSchema, value: Envelope) -> Any:
    codec = get_codec(codec_name, schema)
    obj = codec.from_builtins(value.model_dump(mode="json", by_alias=True))
    return codec.decode(codec.encode(obj))


class TestRoundTrip:
    @pytest.mark.parametrize("codec", EVERY)
    def test_every_codec_carries_the_envelope(
        self, codec: CodecName, schema: UserSchema
    ) -> None:
        assert codec_refusal(codec, schema) is None

    @pytest.mark.parametrize("tag", sorted(MEMBERS))
    @pytest.mark.parametrize("codec", EVERY)
    def test_the_member_the_tag_names_with_the_same_values(
        self, codec: CodecName, tag: str, schema: UserSchema
    ) -> None:
        sent = envelope(tag, previous="in_transit" if tag != "in_transit" else None)
        back = round_trip(codec, schema, sent)
        expected = read_native(sent, schema.shape)
        got = read_native(back, schema.shape)
        assert diff(expected, got, schema.shape, "Envelope") == []
        assert got["payload"]["kind"] == tag
        assert got["source_ip"] == ipaddress.IPv4Address("192.0.2.7")
        # The shadow decode re-encodes what it read (`wire_keyed`): same values.
        built = get_codec(codec, schema)
        wire = msgspec.to_builtins(wire_keyed(got, schema.shape))
        again = built.from_builtins(wire)
        assert read_native(built.decode(built.encode(again)), schema.shape) == got
        if codec != "protobuf":  # protobuf's attribute is its oneof wrapper
            assert type(back.payload).__name__ == type(MEMBERS[tag]).__name__
            assert back.payload.kind == tag

    def test_protobuf_sets_the_oneof_case_the_tag_names(
        self, schema: UserSchema
    ) -> None:
        back = round_trip("protobuf", schema, envelope("delivered"))
        assert back.payload.WhichOneof("member") == "delivered"
        assert back.payload.delivered.signed_by == "A. Reader"
        assert not back.HasField("previous")

    def test_every_codec_reads_the_same_count(self, schema: UserSchema) -> None:
        """The worker's logic reads each member's fields on every codec."""
        read = read_every_field(schema.shape)
        sent = [envelope(t, p) for t in MEMBERS for p in (None, "scanned")]
        counts = {
            codec: [read(round_trip(codec, schema, v)) for v in sent]
            for codec in (*EVERY, "json+pydantic")
        }
        assert len({tuple(c) for c in counts.values()}) == 1, counts
        # event_id, payload's fields (scanned: kind, depot, parcel's two),
        # previous, source_ip, status_url
        assert counts["protobuf"][0] == 1 + 4 + 1 + 1 + 1

    def test_check_agrees_on_every_codec(self, schema: UserSchema) -> None:
        report = run_check(schema, count=40, codecs=["json+pydantic", *EVERY])
        assert report.ok, report.findings
        assert report.findings == {}


class TestCallableDiscriminator:
    def test_a_callable_discriminator_over_literal_tags_is_a_tagged_union(
        self,
    ) -> None:
        def pick(v: Any) -> str:
            return str(v.get("kind") if isinstance(v, dict) else v.kind)

        tagged = Annotated[
            Annotated[Scanned, pydantic.Tag("scanned")]
            | Annotated[Delivered, pydantic.Tag("delivered")],
            pydantic.Discriminator(pick),
        ]
        m = pydantic.create_model("Picked", event=(tagged, ...))
        schema = from_class(m, "m:Picked")
        assert schema.shape.fields[0].type.tag_field == "kind"  # type: ignore[union-attr]
        report = run_check(schema, count=20, codecs=["json+pydantic", *EVERY])
        assert report.ok, report.findings


class TestRefusals:
    """Per (codec, field), one line each, naming the format."""

    def test_an_untagged_union_of_a_model_and_a_scalar_is_refused(self) -> None:
        """Untagged models alone are carried (`test_untagged_unions`); beside a
        scalar, the binary formats' encoders cannot tell which member to write."""

        class A(pydantic.BaseModel):
            x: int

        m = pydantic.create_model("Untagged", v=(A | int, ...))
        lines = carriage(from_class(m, "m:Untagged").shape, "pydantic")
        assert lines["protobuf"] == [
            "Untagged.v: a protobuf oneof of A | int is not mapped: messages beside "
            "scalars with no Literal tag field are not told apart on its encode; "
            "tag each message with a Literal field"
        ]
        assert "an Avro union" in lines["avro"][0]

    def test_unions_of_scalars_where_the_format_has_them(self) -> None:
        m = pydantic.create_model("Scalars", v=(int | str, 0), w=(float | bool, 0.0))
        schema = from_class(m, "m:Scalars")
        lines = carriage(schema.shape, "pydantic")
        assert lines == {
            "flatbuffers": [
                "Scalars.v: a FlatBuffers union holds tables only, not int | str",
                "Scalars.w: a FlatBuffers union holds tables only, not float | bool",
            ]
        }
        for codec in ("protobuf", "capnp", "avro"):
            assert codec_refusal(codec, schema) is None
            built = get_codec(codec, schema)
            for data in ({"v": 5, "w": True}, {"v": "five", "w": 2.5}):
                back = built.decode(built.encode(built.from_builtins(data)))
                assert read_native(back, schema.shape) == data, codec

    def test_a_list_of_unions_is_refused_by_flatbuffers_alone(self) -> None:
        m = pydantic.create_model("Listed", v=(list[Scanned | Delivered], []))
        schema = from_class(m, "m:Listed")
        refused = {c for c in DERIVED_CODECS if codec_refusal(c, schema)}
        assert refused == {"flatbuffers"}
        assert "a FlatBuffers union inside a vector or map" in (
            codec_refusal("flatbuffers", schema) or ""
        )

    def test_a_none_in_a_list_is_carried_by_avro(self) -> None:
        m = pydantic.create_model("Holes", v=(list[int | None], []))
        schema = from_class(m, "m:Holes")
        assert codec_refusal("avro", schema) is None
        built = get_codec("avro", schema)
        back = built.decode(built.encode(built.from_builtins({"v": [1, None, 3]})))
        assert list(back.v) == [1, None, 3]


class TestHostileBuffers:
    def test_flatbuffers_refuses_a_union_type_naming_no_member(
        self, schema: UserSchema
    ) -> None:
        codec = get_codec("flatbuffers", schema)
        data = bytearray(codec.encode(codec.from_builtins(_builtins("scanned"))))
        view: Any = codec.decode(bytes(data))
        tab = view._r._tab
        type_slot = 4 + 2 * 1  # event_id is slot 0, payload's type slot 1
        data[tab.Pos + tab.Offset(type_slot)] = 9
        with pytest.raises(DecodeError, match="names no member"):
            codec.decode(bytes(data))


def _builtins(tag: str) -> dict[str, Any]:
    return envelope(tag).model_dump(mode="json", by_alias=True)
