"""FlatBuffers, Cap'n Proto and Avro carry a user's UUIDs, Decimals and aliases.

Each new kind, through each new codec, round-trips to values equal to the pydantic
model's (`read_native`), and the wire keys are the aliases where the format's
names are data (Avro), the attribute names where they are code (FlatBuffers,
Cap'n Proto: camelCase).
"""

from __future__ import annotations

import datetime
import json
import uuid
from decimal import Decimal
from typing import Any

import pytest
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, NaiveDatetime

from codec import codec_refusal, get_codec, native_to_builtins
from schemas.compare import diff, read_native
from schemas.derive.avro_schema import avro_schema
from schemas.errors import EncodeError
from schemas.user.loader import UserSchema, from_class
from schemas.user.skipped_checks import skipped_checks

NEW = ("flatbuffers", "capnp", "avro")


class Price(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    net_amount: Decimal = Field(alias="netAmount", max_digits=12, decimal_places=3)


class Kinds(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    event_id: uuid.UUID = Field(alias="eventId")
    parent_id: uuid.UUID | None = Field(alias="parentId", default=None)
    related: list[uuid.UUID] = Field(default_factory=list)
    rate: Decimal  # no bounds: text on every format
    bounded: Decimal = Field(max_digits=8, decimal_places=2)
    maybe: Decimal | None = None
    ledger: dict[str, Decimal] = Field(default_factory=dict)
    prices: list[Price] = Field(default_factory=list)
    at: datetime.datetime


def _schema() -> UserSchema:
    return from_class(Kinds, "kinds:Kinds")


VALUES: list[dict[str, Any]] = [
    {
        "eventId": str(uuid.UUID(int=7)),
        "parentId": str(uuid.UUID(int=2**128 - 1)),
        "related": [str(uuid.UUID(int=1)), str(uuid.UUID(int=99))],
        "rate": "1.10E+3",
        "bounded": "123456.78",
        "maybe": "-0.000001",
        "ledger": {"a": "0", "b": "-12.345678901234567890"},
        "prices": [{"netAmount": "1.5"}, {"netAmount": "-999999999.999"}],
        "at": "2026-03-04T05:06:07.000008Z",
    },
    {
        "eventId": str(uuid.uuid4()),
        "rate": "0",
        "bounded": "0.1",
        "at": "1970-01-01T00:00:00Z",
    },
]


@pytest.mark.parametrize("name", NEW)
@pytest.mark.parametrize("values", VALUES)
def test_uuid_and_decimal_round_trip_equal_to_the_model(
    name: str, values: dict[str, Any]
) -> None:
    schema = _schema()
    assert codec_refusal(name, schema) is None
    model = Kinds.model_validate(values)
    codec = get_codec(name, schema)  # type: ignore[arg-type]
    back = codec.decode(codec.encode(codec.from_builtins(values)))
    expected, got = read_native(model, schema.shape), read_native(back, schema.shape)
    assert diff(expected, got, schema.shape, "Kinds") == []
    assert isinstance(got["event_id"], uuid.UUID)
    assert all(isinstance(u, uuid.UUID) for u in got["related"])
    assert isinstance(got["rate"], Decimal) and isinstance(got["bounded"], Decimal)
    assert all(isinstance(p["net_amount"], Decimal) for p in got["prices"])
    assert got["event_id"] == model.event_id and got["rate"] == model.rate
    # What the business logic reads: the attribute, as on every other codec.
    assert back.event_id == model.event_id and back.bounded == model.bounded


@pytest.mark.parametrize("name", ["flatbuffers", "capnp"])
def test_text_formats_keep_the_exact_decimal_text(name: str) -> None:
    schema = _schema()
    codec = get_codec(name, schema)  # type: ignore[arg-type]
    back = codec.decode(codec.encode(codec.from_builtins(VALUES[0])))
    assert str(back.rate) == "1.10E+3" and str(back.bounded) == "123456.78"
    # Keyed by the aliases, as msgspec and pydantic's by_alias output are.
    out = native_to_builtins(back)
    assert out["eventId"] == VALUES[0]["eventId"] and out["rate"] == "1.10E+3"
    assert out["prices"][0] == {"netAmount": "1.5"}


def test_avro_names_are_the_aliases_and_decimals_their_logical_type() -> None:
    schema = avro_schema(_schema().shape)
    fields = {f["name"]: f["type"] for f in schema["fields"]}
    assert "eventId" in fields and "event_id" not in fields
    assert fields["eventId"] == {"type": "string", "logicalType": "uuid"}
    assert fields["rate"] == "string"  # no precision to give: its exact text
    assert fields["bounded"] == {
        "type": "bytes",
        "logicalType": "decimal",
        "precision": 8,
        "scale": 2,
    }
    price = fields["prices"]["items"]
    assert price["fields"][0]["name"] == "netAmount"
    json.dumps(schema)  # plain JSON, as `codec-schema derive` prints it


def test_avro_reads_a_bounded_decimal_at_its_scale() -> None:
    schema = _schema()
    codec = get_codec("avro", schema)
    back = codec.decode(codec.encode(codec.from_builtins(VALUES[1])))
    assert back.bounded == Decimal("0.1") and str(back.bounded) == "0.10"
    assert str(back.rate) == "0"


def test_avro_refuses_more_places_than_the_scale_on_encode() -> None:
    schema = _schema()
    codec = get_codec("avro", schema)
    # msgspec does not check decimal_places: the Struct holds it, Avro cannot.
    struct = codec.from_builtins({**VALUES[1], "bounded": "0.125"})
    with pytest.raises(EncodeError):
        codec.encode(struct)


class Dashed(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    ok: int
    trace_id: str = Field(alias="trace-id")


def test_an_alias_that_is_not_an_avro_name_refuses_avro_only() -> None:
    schema = from_class(Dashed, "dashed:Dashed")
    why = codec_refusal("avro", schema)
    assert why == (
        "schema error: avro cannot carry a field of dashed:Dashed:\n"
        "  Dashed.trace_id: 'trace-id' is not an Avro field name"
    )
    for name in ("flatbuffers", "capnp", "protobuf", "msgspec-json"):
        assert codec_refusal(name, schema) is None, name


def test_capnp_and_flatbuffers_name_fields_by_attribute() -> None:
    schema = _schema()
    fb = get_codec("flatbuffers", schema)
    cp = get_codec("capnp", schema)
    assert "  event_id:string (required);" in fb.form.text  # type: ignore[attr-defined]
    assert "  eventId @0 :Text;" in cp.form.text  # type: ignore[attr-defined]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str
    count: int
    note: str | None


def test_skipped_checks_of_the_new_codecs() -> None:
    schema = from_class(Strict, "strict:Strict")
    lines = [s.line() for s in skipped_checks(schema.shape, schema.source)]
    assert (
        "Strict: capnp skips the required-field check on code, count, note (Cap'n "
        "Proto has no required fields: a missing one decodes as its zero value)"
    ) in lines
    # A missing string is refused by FlatBuffers' verifier (`(required)`).
    assert (
        "Strict: flatbuffers skips the required-field check on count, note (a "
        "missing number, bool or datetime decodes as zero, an optional one as None)"
    ) in lines
    assert (
        "Strict: flatbuffers, capnp skip the unknown-field check (another schema's "
        "fields are read past)"
    ) in lines
    # An Avro record holds every field of its schema and nothing else.
    assert not [line for line in lines if "avro" in line]


def test_avro_skips_only_what_its_types_and_the_struct_do_not_check() -> None:
    schema = _schema()
    lines = [s.line() for s in skipped_checks(schema.shape, schema.source)]
    assert "Kinds.bounded: avro skips max_digits=8" in lines
    assert (
        "Kinds.bounded: msgspec-json, msgspec-msgpack, capnp skip max_digits=8, "
        "decimal_places=2"
    ) in lines
    assert (
        "Kinds.event_id: protobuf, flatbuffers skip that the text is a UUID (any "
        "string decodes)"
    ) in lines


class Local(BaseModel):
    at: NaiveDatetime
    seen: list[NaiveDatetime] = Field(default_factory=list)
    by_day: dict[str, NaiveDatetime] = Field(default_factory=dict)
    instant: AwareDatetime


@pytest.mark.parametrize("name", NEW)
def test_a_naive_only_datetime_comes_back_naive(name: str) -> None:
    schema = from_class(Local, "local:Local")
    assert codec_refusal(name, schema) is None
    values = {
        "at": "2026-03-04T05:06:07.000008",
        "seen": ["1999-12-31T23:59:59", "2000-01-01T00:00:00.5"],
        "by_day": {"mon": "2026-01-05T09:00:00"},
        "instant": "2026-03-04T05:06:07+02:00",
    }
    model = Local.model_validate(values)
    codec = get_codec(name, schema)  # type: ignore[arg-type]
    back = codec.decode(codec.encode(codec.from_builtins(values)))
    got = read_native(back, schema.shape)
    assert diff(read_native(model, schema.shape), got, schema.shape, "Local") == []
    assert got["at"] == model.at and got["at"].tzinfo is None
    assert got["seen"] == model.seen and got["by_day"] == model.by_day
    assert got["instant"] == model.instant and got["instant"].tzinfo is not None
