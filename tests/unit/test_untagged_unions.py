"""Untagged unions of models (`A | B`, pydantic's smart mode) on every codec.

protobuf's oneof case, Avro's branch index, the FlatBuffers union type and Cap'n
Proto's discriminant record which member was written, so those codecs carry the
union: the encoder writes the member pydantic picks for the payload (or the
member a native object is), the decoder gives back the member the format
recorded, with the same values. msgspec cannot tell Structs apart without a tag
and is refused with a one-line reason (issue 29, item 2).
"""

from __future__ import annotations

import datetime
from typing import Any

import msgspec
import pydantic
import pytest
from google.protobuf import json_format

from codec import CodecName, codec_refusal, get_codec
from loadgen.carry import transcode
from schemas.compare import diff, read_native
from schemas.formats import carriage
from schemas.user.loader import UserSchema, from_class
from schematool.check import run_check
from service.logic.field_reader import read_every_field
from tests.fixtures.usermodels.deliveries import (
    Delivery,
    HomeAddress,
    Locker,
    PickupPoint,
)

BINARY: tuple[CodecName, ...] = ("protobuf", "flatbuffers", "capnp", "avro")


@pytest.fixture(scope="module")
def schema() -> UserSchema:
    return from_class(Delivery, "deliveries:Delivery")


SENT = [
    Delivery(
        delivery_id="d-1",
        destination=HomeAddress(street="1 Main St", postcode="N1 9GU", floor=3),
        weight_g=1200,
    ),
    Delivery(
        delivery_id="d-2",
        destination=Locker(locker_id=7),
        fallback=PickupPoint(locker_id=7, opening_hours="9-17"),
        weight_g=0,
    ),
    Delivery(
        delivery_id="d-3",
        destination=PickupPoint(locker_id=8, opening_hours="24h"),
        fallback=Locker(locker_id=9),
        weight_g=5,
    ),
]


def round_trip(codec_name: CodecName, schema: UserSchema, value: Delivery) -> Any:
    """Encode as the load generator does: from pydantic's JSON of the object."""
    codec = get_codec(codec_name, schema)
    obj = codec.from_builtins(value.model_dump(mode="json", by_alias=True))
    return codec.decode(codec.encode(obj))


class TestCarried:
    """The formats that record the member carry the union; msgspec is refused."""

    @pytest.mark.parametrize("codec", BINARY)
    def test_the_binary_formats_carry_it(
        self, codec: CodecName, schema: UserSchema
    ) -> None:
        assert codec_refusal(codec, schema) is None

    def test_msgspec_is_refused_naming_msgspec_with_a_hint(
        self, schema: UserSchema
    ) -> None:
        lines = carriage(schema.shape, "pydantic")
        assert set(lines) == {"msgspec-json", "msgspec-msgpack"}
        first, second = lines["msgspec-json"]
        assert first.startswith(
            "Delivery.destination: msgspec cannot tell HomeAddress | Locker | "
            "PickupPoint apart"
        )
        assert "\n" not in first
        assert "Literal tag field with a default" in first  # the hint...
        assert "msgspec dead-letters the messages written without it" in first
        assert second.startswith("Delivery.fallback: msgspec cannot tell")

    @pytest.mark.parametrize("sent", SENT, ids=lambda d: d.delivery_id)
    @pytest.mark.parametrize("codec", BINARY)
    def test_the_member_pydantic_picks_comes_back_with_its_values(
        self, codec: CodecName, schema: UserSchema, sent: Delivery
    ) -> None:
        back = round_trip(codec, schema, sent)
        expected = read_native(sent, schema.shape)
        assert diff(expected, read_native(back, schema.shape), schema.shape, "D") == []
        if codec != "protobuf":  # protobuf's attribute is its oneof wrapper
            assert type(back.destination).__name__ == type(sent.destination).__name__
            assert type(back.fallback).__name__ == type(sent.fallback).__name__
        else:
            case = back.destination.WhichOneof("member")
            assert case == {"d-1": "home_address", "d-2": "locker"}.get(
                sent.delivery_id, "pickup_point"
            )

    def test_every_codec_reads_the_same_count(self, schema: UserSchema) -> None:
        """The worker's logic reads each member's fields on every codec."""
        read = read_every_field(schema.shape)
        counts = {
            codec: [read(round_trip(codec, schema, v)) for v in SENT]
            for codec in (*BINARY, "json+pydantic")
        }
        assert len({tuple(c) for c in counts.values()}) == 1, counts

    def test_check_agrees_on_json_pydantic_traffic(self, schema: UserSchema) -> None:
        """pydantic's own JSON of random payloads decodes to the same values."""
        report = run_check(schema, count=60, codecs=["json+pydantic", *BINARY])
        assert report.ok, report.findings
        assert report.findings == {}


class Left(pydantic.BaseModel):
    x: int


class Right(pydantic.BaseModel):
    x: int


class Twins(pydantic.BaseModel):
    v: Left | Right


class TestRecordedMember:
    """The decoder gives back the member written, not the one a re-pick finds:
    two members with the same fields differ only by what the format recorded."""

    @pytest.mark.parametrize("codec", ("flatbuffers", "capnp", "avro"))
    def test_a_right_written_is_a_right_read(self, codec: CodecName) -> None:
        schema = from_class(Twins, "m:Twins")
        built = get_codec(codec, schema)
        union = msgspec.structs.fields(schema.struct)[0].type
        right = next(m for m in union.members if m.__name__ == "Right")
        back = built.decode(built.encode(schema.struct(v=right(x=4))))
        assert type(back.v).__name__ == "Right"
        assert back.v.x == 4

    def test_protobuf_too(self) -> None:
        schema = from_class(Twins, "m:Twins")
        built = get_codec("protobuf", schema)
        msg = json_format.ParseDict({"v": {"right": {"x": 4}}}, schema.proto())
        back = built.decode(built.encode(msg))
        assert back.v.WhichOneof("member") == "right"

    def test_the_payload_is_written_as_pydantic_reads_it(self) -> None:
        """`{"x": 4}` is a Left for pydantic (leftmost on a tie): so it is written."""
        schema = from_class(Twins, "m:Twins")
        for codec in ("flatbuffers", "capnp", "avro"):
            built = get_codec(codec, schema)
            back = built.decode(built.encode(built.from_builtins({"v": {"x": 4}})))
            assert type(back.v).__name__ == "Left", codec


class Stamped(pydantic.BaseModel):
    note: str | None = None
    at: datetime.datetime | None = None


class Plain(pydantic.BaseModel):
    note: str | None = None


class Log(pydantic.BaseModel):
    entries: list[Plain | Stamped]


class TestReplay:
    """A replay counts a member's naive datetime as not carried by protobuf, by
    the data's path (protobuf's path holds the oneof member besides)."""

    def test_a_naive_datetime_in_a_member_is_named_not_carried(self) -> None:
        schema = from_class(Log, "m:Log")
        sent = Log(entries=[Stamped(at=datetime.datetime(2000, 1, 1))])
        source = get_codec("json+pydantic", schema)
        value, why = transcode(
            source,
            get_codec("protobuf", schema),
            source.encode(sent),
            "m:Log",
            schema.shape,
        )
        assert value is None
        assert why == (
            "entries.at: a datetime without a timezone (protobuf's Timestamp "
            "holds instants)"
        )


class Pairs(pydantic.BaseModel):
    d: dict[str, tuple[float, float]] | None = None


class Labels(pydantic.BaseModel):
    d: dict[str, str] | None = None


class Either(pydantic.BaseModel):
    u: Pairs | Labels | None = None


class TestSameFieldNames:
    def test_members_told_apart_by_their_values_agree_in_check(self) -> None:
        """The comparison reads a member by its keys: two members with the same
        field names are equal under the one whose types the values have (the
        model generator's finding: `check` reported pydantic against itself)."""
        report = run_check(from_class(Either, "m:Either"), count=40)
        assert report.ok, report.findings
