"""A team's model read as pydantic reads it: what each feature becomes on every codec.

The ledger (`tests/fixtures/usermodels/ledger.py`: a generic envelope aliased and
subclassed, a recursive chart of accounts, `extra="allow"`, discriminated lines,
cents written by a serializer, `use_enum_values`, `frozen`, `AliasChoices`,
`SecretStr`, `Json`, 128-bit ids, a datetime serializer) and the shipment events
(`shipments.py`: a discriminated union envelope and a model validator between two
fields) are the models of record; small models pin each rule.
"""

from __future__ import annotations

import datetime
import enum
import json
from pathlib import Path
from typing import Any, Final

import msgspec
import pydantic
import pytest

from codec import codec_refusal, get_codec
from loadgen.carry import transcode
from loadgen.cli import main as loadgen_main
from schemas.compare import read_native
from schemas.derive.avro_schema import avro_schema
from schemas.derive.capnp_schema import capnp_form
from schemas.derive.fbs_schema import flatbuffers_form
from schemas.errors import ConfigError
from schemas.shape import Scalar, messages
from schemas.user.loader import from_class, load_schema
from schemas.user.synthetic import make_payloads
from schematool.check import render, run_check
from schematool.cli import main as schema_main

FIXTURES: Final = Path(__file__).resolve().parents[1] / "fixtures" / "usermodels"
DERIVED: Final = (
    "msgspec-json",
    "msgspec-msgpack",
    "protobuf",
    "flatbuffers",
    "capnp",
    "avro",
)


@pytest.fixture(autouse=True)
def _user_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(FIXTURES))


class TestGenerics:
    """A generic model, aliased or subclassed, is read with its parameters, and
    its derived names are identifiers in every format."""

    @pytest.mark.parametrize("spec", ["ledger:JournalEvent", "ledger:ChartEvent"])
    def test_names_are_identifiers(self, spec: str) -> None:
        schema = load_schema(spec)
        names = [m.name for m in messages(schema.shape)]
        assert all(n.isidentifier() for n in names), names
        assert "EnvelopeJournalPosted" in names or "ChartEvent" in names
        assert all(m.name.isidentifier() for m in schema.proto_file.message_type)
        for codec in DERIVED:  # refused for a field at most, never for a name
            assert "name" not in (codec_refusal(codec, schema) or "").lower(), codec
        if spec == "ledger:ChartEvent":
            flatbuffers_form(schema.shape)
            capnp_form(schema.shape)
            avro_schema(schema.shape)

    def test_the_alias_is_read_with_its_parameter(self) -> None:
        schema = load_schema("ledger:JournalEvent")
        payload = next(f for f in schema.shape.fields if f.name == "payload")
        assert payload.type.name == "JournalPosted"  # type: ignore[union-attr]


class TestRecursion:
    """A model that holds itself is carried by every format with recursive types."""

    def test_the_chart_of_accounts_runs_on_every_codec(self) -> None:
        report = run_check(load_schema("ledger:ChartEvent"), count=8)
        assert report.refused == {}
        assert report.ok, render(report)

    def test_every_way_of_holding_itself(self) -> None:
        class Node(pydantic.BaseModel):
            name: str
            parent: Node | None = None
            kids: list[Node] = []
            named: dict[str, Node] = {}

        Node.model_rebuild()
        schema = from_class(Node, "tree:Node")
        assert schema.shape.fields[1].type is schema.shape
        report = run_check(schema, count=8)
        assert report.refused == {}
        assert report.ok, render(report)


class TestHeldText:
    """`Json[X]` travels as the producer's text, a secret as its text."""

    def test_json_is_the_text_the_producer_writes(self) -> None:
        schema = load_schema("ledger:JournalEvent")
        payload = make_payloads(schema.shape, 1, seed=1)[0]
        text = payload["payload"]["counters"]
        assert isinstance(text, str)
        assert isinstance(json.loads(text), dict)
        obj = get_codec("json+pydantic", schema).from_builtins(payload)
        assert obj.payload.counters == json.loads(text)

    def test_a_secret_gets_values_and_is_never_printed(self) -> None:
        class Login(pydantic.BaseModel):
            user: str
            token: pydantic.SecretStr

        schema = from_class(Login, "auth:Login")
        token = schema.shape.fields[1].type
        assert token == Scalar("str", holds="secret")
        payloads = make_payloads(schema.shape, 3, seed=0)
        assert {p["token"] for p in payloads} == {"**********"}  # pydantic writes it so
        report = run_check(schema, count=5)
        assert report.ok and report.refused == {}, render(report)


class TestEnumValues:
    """With `use_enum_values` the model holds the values: every format carries a
    plain Enum's values, and they compare equal."""

    def test_plain_enum_values_on_every_codec(self) -> None:
        class Colour(enum.Enum):
            RED = "red"
            BLUE = "blue"

        class Paint(pydantic.BaseModel):
            model_config = pydantic.ConfigDict(use_enum_values=True)
            colour: Colour
            shades: list[Colour] = []

        schema = from_class(Paint, "paint:Paint")
        assert all(codec_refusal(c, schema) is None for c in DERIVED)
        report = run_check(schema, count=10)
        assert report.ok, render(report)


class TestSerializers:
    """A serializer's wire is what the derived forms read: to the model's value
    (carried), or the field is refused naming the serializer."""

    def test_cents_are_refused_naming_the_serializer(self) -> None:
        schema = load_schema("ledger:JournalEvent")
        for codec in DERIVED:
            why = codec_refusal(codec, schema) or ""
            assert "money.amount: field_serializer 'to_minor_units'" in why, codec
        assert codec_refusal("json+pydantic", schema) is None

    def test_a_datetime_written_as_text_is_carried(self) -> None:
        schema = load_schema("ledger:ChartEvent")
        occurred = next(f for f in schema.shape.fields if f.name == "occurred_at")
        assert occurred.serializer == "PlainSerializer '_utc_text'"
        assert all(codec_refusal(c, schema) is None for c in DERIVED)


class TestMutability:
    """A derived Struct is frozen only when the model is: a handler that sets a
    field works on every codec whose objects are the Struct."""

    def test_a_mutable_model_gives_mutable_structs(self) -> None:
        class Ticket(pydantic.BaseModel):
            status: str
            notes: list[str] = []

        schema = from_class(Ticket, "desk:Ticket")
        for codec in ("msgspec-json", "msgspec-msgpack", "capnp", "avro"):
            c = get_codec(codec, schema)
            obj = c.decode(c.encode(c.from_builtins({"status": "open", "notes": []})))
            obj.status = "closed"
            obj.notes.append("done")
            assert read_native(obj, schema.shape) == {
                "status": "closed",
                "notes": ["done"],
            }

    def test_a_frozen_model_gives_frozen_structs(self) -> None:
        schema = load_schema("ledger:ChartEvent")
        c = get_codec("msgspec-json", schema)
        obj = c.from_builtins(make_payloads(schema.shape, 1)[0])
        with pytest.raises(AttributeError):
            obj.source = "elsewhere"


class TestSyntheticTraffic:
    """Every payload is one the model accepts; when its validators reject nearly
    every draw, one line names the validator and points to --replay."""

    def test_payloads_pass_the_models_own_validator(self) -> None:
        schema = load_schema("shipments:ShipmentEvent")
        from shipments import ShipmentEvent  # type: ignore[import-not-found]

        for payload in make_payloads(schema.shape, 40, seed=4):
            event = ShipmentEvent.model_validate_json(json.dumps(payload))
            if event.delivered_at and event.picked_up_at:
                assert event.delivered_at >= event.picked_up_at

    def test_nearly_every_draw_rejected_is_one_line(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with pytest.raises(ConfigError) as caught:
            make_payloads(load_schema("shipments:StrictWindow").shape, 5)
        text = str(caught.value)
        assert "\n" not in text
        assert "model_validator 'one_hour_at_most'" in text
        assert "the window must close within an hour of opening" in text
        assert "--replay" in text
        assert schema_main(["check", "shipments:StrictWindow"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err

    def test_a_validated_model_in_collections_is_drawn_again_alone(self) -> None:
        # Each leg is rejected half the time: drawn again with the route, a
        # route of 2-4 lists of 1-3 legs would almost never be accepted whole.
        class Leg(pydantic.BaseModel):
            departs: int
            arrives: int

            @pydantic.model_validator(mode="after")
            def arrives_after_departing(self) -> Leg:
                if self.arrives < self.departs:
                    raise ValueError("arrives before it departs")
                return self

        class Route(pydantic.BaseModel):
            legs: list[dict[str, Leg]]
            rest: list[list[Leg]]

        payloads = make_payloads(from_class(Route, "Route").shape, 30, seed=1)
        for payload in payloads:
            route = Route.model_validate_json(json.dumps(payload))
            assert all(
                leg.arrives >= leg.departs for m in route.legs for leg in m.values()
            )
        assert sum(len(p["rest"]) for p in payloads) > 60  # collections were drawn

    def test_the_load_generator_says_so_in_one_line(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        args = "--schema shipments:StrictWindow --codec json+pydantic --count 10"
        code = loadgen_main([*args.split(), "--bootstrap-servers", "127.0.0.1:1"])
        err = capsys.readouterr().err
        assert code == 2
        assert "one_hour_at_most" in err and "--replay" in err
        assert "Traceback" not in err and err.strip().count("\n") == 0


class TestRoundTrip:
    """json+pydantic disagrees with itself only when the model does not read back
    what it writes, and says so in those words."""

    def test_a_model_that_cannot_read_its_output(self) -> None:
        class Odd(pydantic.BaseModel):
            a: str
            b: int = pydantic.Field(validation_alias=pydantic.AliasChoices("x", "y"))

        schema = from_class(Odd, "odd:Odd")
        report = run_check(schema, count=3)
        text = render(report)
        assert "json+pydantic: Odd.x: payload 0: not round-trip stable" in text
        assert "msgspec-json          not compared" in text

    def test_the_models_of_record_are_round_trip_stable(self) -> None:
        for spec in (
            "ledger:JournalEvent",
            "ledger:ChartEvent",
            "shipments:ShipmentEvent",
        ):
            report = run_check(load_schema(spec), count=10)
            assert report.ok, render(report)


def _aware(value: Any) -> bool:
    return isinstance(value, datetime.datetime) and value.tzinfo is not None


class TestExtras:
    """`extra="allow"`: the keys the producer's model keeps are written to the wire,
    read past and dropped by the derived forms (a replay transcodes the record)."""

    def test_a_kept_extra_key_is_dropped_by_protobuf_not_refused(self) -> None:
        schema = load_schema("ledger:ChartEvent")
        payload = make_payloads(schema.shape, 1, seed=2)[0] | {"traceId": "t-1"}
        source = get_codec("json+pydantic", schema)
        sent = source.encode(source.from_builtins(payload))
        assert b'"traceId":"t-1"' in sent
        for codec in ("protobuf", "msgspec-msgpack", "avro", "capnp", "flatbuffers"):
            value, why = transcode(
                source, get_codec(codec, schema), sent, schema.name, schema.shape
            )
            assert value is not None, (codec, why)


class Leaf(msgspec.Struct):
    """A Struct that holds itself (module level: msgspec resolves its name here)."""

    name: str
    kids: list[Leaf] = []
    parent: Leaf | None = None


class TestRecursiveSources:
    """A Struct or a `.proto` message that holds itself is carried the same way."""

    def test_a_struct_and_a_proto_message(self, tmp_path: Path) -> None:
        (tmp_path / "tree.proto").write_text(
            'syntax = "proto3";\npackage tree;\nmessage Node {\n  string name = 1;\n'
            "  repeated Node kids = 2;\n  optional Node parent = 3;\n}\n"
        )

        msgspec_schema = from_class(Leaf, "tree:Leaf")
        proto_schema = load_schema(f"{tmp_path / 'tree.proto'}:Node")
        for schema in (msgspec_schema, proto_schema):
            report = run_check(schema, count=6)
            assert report.refused == {} and report.ok, render(report)

    def test_a_message_that_requires_itself_says_so_in_one_line(
        self, tmp_path: Path
    ) -> None:
        (tmp_path / "m.proto").write_text(
            'syntax = "proto3";\npackage loop;\nmessage M { M next = 1; }\n'
        )
        schema = load_schema(f"{tmp_path / 'm.proto'}:M")
        with pytest.raises(
            ConfigError, match=r"^schema error: M\.next: M holds itself"
        ):
            make_payloads(schema.shape, 1)
