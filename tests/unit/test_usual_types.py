"""The usual types (issue 29, item 4) and hints that keep traffic decodable (item 6).

A type a format lacks but can carry faithfully as text is carried, never refused,
and `codec-schema check` lists it as "changed: carried as <form>" per codec and field;
docs/types.md is generated from the rules and must equal what they say today; every
suggestion a refusal prints says what it does to the messages already written.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import ipaddress
import os
import uuid
from pathlib import Path
from typing import Any, Literal

import msgspec
import pydantic
import pytest

from codec import CodecName, codec_refusal, get_codec
from schemas.carried import _logical
from schemas.compare import read_native
from schemas.derive.avro_schema import logical_decimal
from schemas.derive.msgspec_structs import NO_HOOKS, hooks
from schemas.derive.proto_file import message_class
from schemas.errors import ConfigError, DecodeError
from schemas.formats import DERIVED_CODECS, MSGSPEC_CODECS, ORJSON, PYDANTIC_CODECS
from schemas.prototext.parser import parse_proto
from schemas.shape import Constraints, Scalar
from schemas.user import catalogue
from schemas.user.loader import from_class, load_schema
from schematool.check import run_check
from schematool.cli import main as schema_main

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "usermodels"
SPEC = "tracking:ShipmentEvent"
EVENT = (
    b'{"trackingNumber":"ab12345678","eventId":7,"occurredOn":"2025-03-15",'
    b'"tags":["fragile"],"payload":{"kind":"in_transit","carrier":"DHL"},'
    b'"sourceIp":"192.0.2.7","statusUrl":"https://example.com",'
    b'"scannedAt":"2025-03-15T10:00:00"}'
)


@pytest.fixture(autouse=True)
def _user_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(FIXTURES))
    for name in list(os.environ):
        if name.startswith(("WORKER_", "KAFKA_", "LOADGEN_", "AB_")):
            monkeypatch.delenv(name)


def model(name: str, config: dict[str, Any] | None = None, **fields: Any) -> Any:
    cfg = pydantic.ConfigDict(**(config or {}))  # type: ignore[typeddict-item]
    return pydantic.create_model(name, __config__=cfg, **fields)


class TestCarriedAsText:
    """msgspec carries addresses and URLs as strings, made the user's type again."""

    @pytest.mark.parametrize("codec", MSGSPEC_CODECS)
    def test_tracking_runs_on_msgspec(self, codec: str) -> None:
        assert codec_refusal(codec, load_schema(SPEC)) is None

    def test_msgspec_attribute_is_the_users_type(self) -> None:
        schema = load_schema(SPEC)
        ours: Any = get_codec("msgspec-json", schema).decode(EVENT)
        theirs: Any = get_codec("json+pydantic", schema).decode(EVENT)
        assert ours.source_ip == ipaddress.IPv4Address("192.0.2.7") == theirs.source_ip
        assert isinstance(ours.status_url, pydantic.HttpUrl)
        # Normalised as pydantic normalises it (a trailing slash added).
        assert str(ours.status_url) == str(theirs.status_url) == "https://example.com/"
        assert ours.status_url == theirs.status_url

    def test_msgpack_round_trip_keeps_the_values(self) -> None:
        schema = load_schema(SPEC)
        json_codec = get_codec("msgspec-json", schema)
        packed = get_codec("msgspec-msgpack", schema)
        obj: Any = json_codec.decode(EVENT)
        back: Any = packed.decode(packed.encode(obj))
        assert back == obj and back.source_ip == ipaddress.IPv4Address("192.0.2.7")
        assert msgspec.msgpack.decode(packed.encode(obj))["sourceIp"] == "192.0.2.7"

    @pytest.mark.parametrize("codec", ["msgspec-json", "json+pydantic"])
    def test_an_invalid_address_is_a_decode_error_on_both(
        self, codec: CodecName
    ) -> None:
        bad = EVENT.replace(b"192.0.2.7", b"192.0.2.777")
        with pytest.raises(DecodeError):
            get_codec(codec, load_schema(SPEC)).decode(bad)

    def test_a_schema_without_such_types_gets_no_hooks(self) -> None:
        schema = from_class(model("Plain", a=(int, ...), b=(str, ...)), "m:Plain")
        assert hooks(schema.struct) is NO_HOOKS

    def test_check_lists_each_carried_field_and_agrees(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        codecs = ",".join([*PYDANTIC_CODECS, *MSGSPEC_CODECS])
        assert schema_main(["check", SPEC, "--codecs", codecs, "--count", "30"]) == 0
        out = capsys.readouterr().out
        for codec in MSGSPEC_CODECS:
            assert f"  {codec:<20}  ok" in out
            for path, name in (("source_ip", "IPv4Address"), ("status_url", "HttpUrl")):
                assert (
                    f"  {codec}: ShipmentEvent.{path}: changed: carried as str (the "
                    f"{name} text; msgspec's dec_hook makes the {name} again at decode)"
                ) in out
        assert "all codecs agree" in out

    def test_default_check_runs_msgspec_and_lists_changes(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert schema_main(["check", SPEC, "--count", "20"]) == 0
        out = capsys.readouterr().out
        assert "  msgspec-json          ok" in out
        assert "  msgspec-msgpack       ok" in out
        assert "msgspec-json: ShipmentEvent.source_ip: changed: carried as str" in out
        assert "all codecs agree (4 left out above)" in out

    def test_protobuf_lists_uuid_and_decimal_as_carried(self) -> None:
        m = model("Priced", id=(uuid.UUID, ...), price=(decimal.Decimal, ...))
        report = run_check(from_class(m, "m:Priced"), count=10, codecs=["protobuf"])
        assert report.ok
        assert report.changed == {
            "protobuf": [
                "Priced.id: carried as string (the canonical UUID text, made a UUID "
                "again when read)",
                "Priced.price: carried as string (the exact Decimal text, made a "
                "Decimal again when read)",
            ]
        }


class TestTypesDoc:
    """docs/types.md is what the rules say, every type against every codec."""

    def test_committed_table_is_the_generated_one(self) -> None:
        committed = (ROOT / "docs" / "types.md").read_text(encoding="utf-8")
        assert committed == catalogue.render(), (
            "docs/types.md is stale: python -m schemas.user.catalogue docs/types.md"
        )

    def test_every_type_has_a_verdict_for_every_codec(self) -> None:
        for label, annotation in catalogue.CATALOGUE:
            cells = catalogue.cells(annotation)
            assert sorted(cells) == sorted((*DERIVED_CODECS, ORJSON)), label
            for text in cells.values():
                assert text == "native" or text.startswith(("carried as", "refused: "))

    def test_verdicts_follow_the_rules(self) -> None:
        ip = catalogue.cells(ipaddress.IPv4Address)
        assert ip["msgspec-json"].startswith("carried as str")
        assert ip["protobuf"].startswith("carried as string (the IPv4Address text")
        assert ip["flatbuffers"].startswith("carried as string (the IPv4Address text")
        assert catalogue.cells(uuid.UUID)["avro"] == "native"
        assert catalogue.cells(uuid.UUID)["capnp"].startswith("carried as string")
        assert catalogue.cells(datetime.date)["msgspec-msgpack"] == "native"

    def test_the_your_own_model_page_links_it(self) -> None:
        page = ROOT / "docs" / "tutorials" / "your-model.md"
        assert "(../types.md)" in page.read_text(encoding="utf-8")

    @pytest.mark.parametrize(
        ("digits", "places"),
        [(None, None), (10, 2), (10, None), (2, 3), (0, 0), (5, 0)],
    )
    def test_avro_decimal_rule_is_the_derived_forms(
        self, digits: int | None, places: int | None
    ) -> None:
        shape = Scalar("decimal", Constraints(max_digits=digits, decimal_places=places))
        assert _logical(shape) == logical_decimal(shape)


class TestHints:
    """A suggestion keeps existing traffic decodable by the codecs it names, or says
    what it breaks."""

    def test_bytes_hint_says_to_remove_the_config_and_what_breaks(self) -> None:
        cfg = {"ser_json_bytes": "base64", "val_json_bytes": "base64"}
        m = model("Photo", cfg, data=(bytes, ...))
        why = codec_refusal("msgspec-json", from_class(m, "m:Photo")) or ""
        assert "declaring it pydantic.Base64Bytes and removing " in why
        assert "ser_json_bytes='base64', val_json_bytes='base64'" in why
        assert "messages already written as URL-safe base64 then fail" in why
        # What it says: URL-safe text read as Base64Bytes is other bytes, silently.
        after = model("Photo2", data=(pydantic.Base64Bytes, ...))
        old_message = model("Photo0", cfg, data=(bytes, ...))(data=b"\xfb\xef\xff")
        assert old_message.model_dump_json() == '{"data":"--__"}'
        assert after.model_validate_json(old_message.model_dump_json()).data != (
            b"\xfb\xef\xff"
        )

    def test_base64bytes_kept_with_the_config_decodes_twice(self) -> None:
        """Why the hint says to remove the config: kept, pydantic decodes msgspec's
        base64 once more, to other bytes (or fails), so the derived codecs are
        refused with that reason."""
        cfg = {"val_json_bytes": "base64", "ser_json_bytes": "base64"}
        m = model("Photo", cfg, data=(pydantic.Base64Bytes, ...))
        written = msgspec.json.encode({"data": b"\xff\x00photo"})  # base64 once
        try:
            read = m.model_validate_json(written).data
        except pydantic.ValidationError:
            read = None
        assert read != b"\xff\x00photo"
        why = codec_refusal("msgspec-json", from_class(m, "m:Photo")) or ""
        assert "pydantic codes the field's base64 twice" in why

    def test_base64bytes_without_the_config_is_carried(self) -> None:
        m = model("Photo", data=(pydantic.Base64Bytes, ...))
        schema = from_class(m, "m:Photo")
        assert codec_refusal("msgspec-json", schema) is None
        assert run_check(schema, count=20, codecs=["json+pydantic", "msgspec-json"]).ok

    def test_no_hint_suggests_datetime_for_a_date(self) -> None:
        m = model("Day", on=(datetime.date, ...))
        schema = from_class(m, "m:Day")
        for codec in DERIVED_CODECS:
            assert "datetime" not in (codec_refusal(codec, schema) or "")

    def test_a_wrapper_model_hint_says_the_json_wire_changes(self) -> None:
        m = model("Grid", rows=(list[list[int]], ...))
        why = codec_refusal("protobuf", from_class(m, "m:Grid")) or ""
        assert "changes the JSON wire too (old messages no longer decode)" in why

    def test_dropping_none_says_which_messages_are_rejected(self) -> None:
        m = model("Opt", xs=(list[int] | None, None))
        why = codec_refusal("protobuf", from_class(m, "m:Opt")) or ""
        assert "reject the messages that send null for it" in why
        # What the hint warns about: the field without | None rejects null.
        fixed = model("Opt2", xs=(list[int], []))
        with pytest.raises(pydantic.ValidationError):
            fixed.model_validate_json(b'{"xs": null}')

    def test_enum_hint_keeps_the_traffic(self) -> None:
        """`derive it from StrEnum`: the same JSON decodes to an equal member."""

        class Plain(enum.Enum):
            A = "a"

        class Mixed(enum.StrEnum):
            A = "a"

        why = codec_refusal("protobuf", from_class(model("E", c=(Plain, ...)), "m:E"))
        assert "derive it from StrEnum" in (why or "")
        after = from_class(model("E2", c=(Mixed, ...)), "m:E2")
        assert codec_refusal("protobuf", after) is None
        data = b'{"c":"a"}'
        assert model("E0", c=(Plain, ...)).model_validate_json(data).c.value == "a"
        assert run_check(after, count=5, codecs=["json+pydantic", "protobuf"]).ok

    def test_every_suggestion_says_what_it_does_to_messages(self) -> None:
        """Each reason over the catalogue that suggests a change either keeps the
        traffic (the Enum mixin, tested above) or names the messages it breaks."""
        extra = [
            (list[list[int]], None),
            (list[int] | None, None),
            (bytes, {"ser_json_bytes": "base64"}),
        ]
        rows = [(a, None) for _, a in catalogue.CATALOGUE] + extra
        for annotation, cfg in rows:
            schema = from_class(model("Row", cfg, v=(annotation, ...)), "m:Row")
            for lines in schema.refused.values():
                for line in lines:
                    suggests = any(
                        w in line for w in ("declar", "use ", "drop", "instead")
                    )
                    if suggests and "derive it from" not in line:
                        assert "messages" in line, line

    def test_proto_float_hint_says_the_wire_type_changes(self, tmp_path: Path) -> None:
        (tmp_path / "f.proto").write_text(
            'syntax = "proto3";\nmessage F { float x = 1; }\n'
        )
        with pytest.raises(ConfigError, match="its wire type changes"):
            load_schema(f"{tmp_path / 'f.proto'}:F")
        # What it says: a float written before reads as 0.0 once declared double.
        old = parse_proto(
            'syntax = "proto3";\npackage a;\nmessage F { float x = 1; }', "a.proto"
        )
        new = parse_proto(
            'syntax = "proto3";\npackage b;\nmessage F { double x = 1; }', "b.proto"
        )
        written = message_class(old, "a.F")(x=1.5).SerializeToString()
        assert message_class(new, "b.F").FromString(written).x == 0.0  # type: ignore[attr-defined]


class TestConstrainedTypes:
    """conint/confloat/constr are their base type with bounds, on every codec."""

    @pytest.mark.parametrize(
        ("annotation", "bounds"),
        [
            (pydantic.conint(ge=0, le=100), {"ge": 0, "le": 100}),
            (pydantic.confloat(gt=0.5), {"gt": 0.5}),
            (pydantic.constr(max_length=8), {"max_length": 8}),
        ],
    )
    def test_carried_with_bounds(self, annotation: Any, bounds: dict[str, Any]) -> None:
        schema = from_class(model("C", n=(annotation, ...)), "m:C")
        assert schema.refused == {}
        shape = schema.shape.fields[0].type
        assert isinstance(shape, Scalar) and shape.constraints.items() == bounds
        assert run_check(schema, count=20).ok


class TestAvroDate:
    """Avro's `date` logical type carries a date both ways (fastavro)."""

    def test_round_trip_and_check_agree(self) -> None:
        m = model("Day", on=(datetime.date, ...), off=(datetime.date | None, None))
        schema = from_class(m, "m:Day")
        assert codec_refusal("avro", schema) is None
        avro = get_codec("avro", schema)
        obj: Any = avro.from_builtins({"on": "1969-12-31", "off": "2025-03-15"})
        back: Any = avro.decode(avro.encode(obj))
        assert back.on == datetime.date(1969, 12, 31)
        assert back.off == datetime.date(2025, 3, 15)
        assert run_check(schema, count=30, codecs=["json+pydantic", "avro"]).ok

    def test_time_stays_refused_naming_the_offset(self) -> None:
        why = codec_refusal(
            "avro", from_class(model("T", at=(datetime.time, ...)), "m:T")
        )
        assert "Avro's time-micros holds no UTC offset" in (why or "")


class TestTimesAsText:
    """Cap'n Proto and FlatBuffers carry a date, time and timedelta as msgspec's
    ISO 8601 text, made the value again (Cap'n Proto at decode, FlatBuffers' view
    when read)."""

    @pytest.mark.parametrize(
        ("codec", "form"),
        [("capnp", "Text"), ("flatbuffers", "string")],
    )
    def test_round_trip_check_and_lines(self, codec: CodecName, form: str) -> None:
        m = model(
            "Times",
            on=(datetime.date, ...),
            at=(datetime.time, ...),
            took=(datetime.timedelta, ...),
            days=(list[datetime.date], []),
        )
        schema = from_class(m, "m:Times")
        assert codec_refusal(codec, schema) is None
        built = get_codec(codec, schema)
        obj: Any = get_codec("msgspec-json", schema).from_builtins(
            {
                "on": "2025-03-15",
                "at": "10:00:00.000250+02:00",
                "took": "P1DT2.5S",
                "days": ["1969-12-31"],
            }
        )
        back: Any = built.decode(built.encode(obj))
        assert back.on == obj.on and back.at == obj.at and back.took == obj.took
        assert back.at.utcoffset() == datetime.timedelta(hours=2)
        assert back.took == datetime.timedelta(days=1, seconds=2.5)
        assert list(back.days) == [datetime.date(1969, 12, 31)]
        report = run_check(schema, count=30, codecs=["json+pydantic", codec])
        assert report.ok, report.findings
        when = "at decode" if codec == "capnp" else "when read"
        assert report.changed[codec][0] == (
            f"Times.on: carried as {form} (the ISO 8601 text msgspec writes, made a "
            f"date again {when})"
        )
        assert len(report.changed[codec]) == 4


class TestShadowReadsCarriedTypes:
    """A shadow decode of the tracking model on msgspec agrees with pydantic: the
    address and URL are compared as the same objects, and re-encoded (round-trip
    mode, MessagePack) as their text."""

    @pytest.mark.parametrize(
        ("shadow", "mode"),
        [("msgspec-json", "decode"), ("msgspec-msgpack", "round-trip")],
    )
    def test_agree(self, shadow: CodecName, mode: str) -> None:
        from service.shadow.verdict import Comparer

        schema = load_schema(SPEC)
        primary = get_codec("json+pydantic", schema)
        comparer = Comparer(primary, get_codec(shadow, schema), schema.shape)
        upper = EVENT.replace(b"ab12345678", b"AB12345678")  # its validator's output
        verdict = comparer.compare(upper, b"application/json")
        assert verdict is not None
        assert (verdict.outcome, verdict.mode) == ("agree", mode)


class TestBinaryAddresses:
    """Cap'n Proto and Avro carry an address or URL as text, made the user's type
    again at decode (msgspec's dec_hook in their conversion to the Struct);
    protobuf and FlatBuffers as text made the type when read."""

    @pytest.mark.parametrize(("codec", "form"), [("capnp", "Text"), ("avro", "string")])
    def test_round_trip_check_and_lines(self, codec: CodecName, form: str) -> None:
        m = model(
            "Host",
            ip=(ipaddress.IPv4Address, ...),
            nets=(list[ipaddress.IPv6Network], []),
            url=(pydantic.HttpUrl | None, None),
        )
        schema = from_class(m, "m:Host")
        assert codec_refusal(codec, schema) is None
        built = get_codec(codec, schema)
        obj: Any = built.from_builtins(
            {"ip": "192.0.2.1", "nets": ["2001:db8::/48"], "url": "https://example.com"}
        )
        back: Any = built.decode(built.encode(obj))
        assert back.ip == ipaddress.IPv4Address("192.0.2.1")
        assert list(back.nets) == [ipaddress.IPv6Network("2001:db8::/48")]
        assert str(back.url) == "https://example.com/"
        report = run_check(schema, count=30, codecs=["json+pydantic", codec])
        assert report.ok, report.findings
        assert report.changed[codec][0] == (
            f"Host.ip: carried as {form} (the IPv4Address text, made the IPv4Address "
            "again at decode)"
        )
        assert len(report.changed[codec]) == 3

    @pytest.mark.parametrize(
        ("codec", "when"),
        [
            ("protobuf", "when read (protobuf's string field)"),
            ("flatbuffers", "when read (the view's property)"),
        ],
    )
    def test_lazy_formats_make_it_when_read(self, codec: CodecName, when: str) -> None:
        """protobuf and FlatBuffers hold the text; reading by attribute (the field
        reader, the comparison of decoded values) makes the user's type again."""
        m = model(
            "Host",
            ip=(ipaddress.IPv4Address, ...),
            nets=(list[ipaddress.IPv6Network], []),
            url=(pydantic.HttpUrl | None, None),
        )
        schema = from_class(m, "m:Host")
        assert codec_refusal(codec, schema) is None
        built = get_codec(codec, schema)
        obj: Any = built.from_builtins(
            {"ip": "192.0.2.1", "nets": ["2001:db8::/48"], "url": "https://example.com"}
        )
        read = read_native(built.decode(built.encode(obj)), schema.shape)
        assert read["ip"] == ipaddress.IPv4Address("192.0.2.1")
        assert read["nets"] == [ipaddress.IPv6Network("2001:db8::/48")]
        assert read["url"] == pydantic.HttpUrl("https://example.com")
        report = run_check(schema, count=30, codecs=["json+pydantic", codec])
        assert report.ok, report.findings
        assert report.changed[codec][0] == (
            "Host.ip: carried as string (the IPv4Address text, made the IPv4Address "
            f"again {when})"
        )
        assert len(report.changed[codec]) == 3


class Tier(enum.IntEnum):
    """An IntEnum map key."""

    GOLD = 1
    SILVER = 2


class TestMapKeys:
    """dict with non-string keys where a format can carry them: Cap'n Proto's
    entries hold any scalar key, Avro's text keys an enum or Literal too."""

    @pytest.mark.parametrize("key", [uuid.UUID, datetime.date, decimal.Decimal, float])
    def test_capnp_carries_scalar_keys(self, key: Any) -> None:
        schema = from_class(model("Keyed", m=(dict[key, int], ...)), "m:Keyed")
        assert codec_refusal("capnp", schema) is None
        assert run_check(schema, count=30, codecs=["json+pydantic", "capnp"]).ok

    def test_capnp_datetime_keys_are_checked_at_their_edges(self) -> None:
        """A plain datetime key is carried, but check's edge values (naive keys,
        offsets) come back changed: a finding at the field, never a silent pass."""
        schema = from_class(
            model("Keyed", m=(dict[datetime.datetime, int], ...)), "m:Keyed"
        )
        assert codec_refusal("capnp", schema) is None
        report = run_check(schema, count=30, codecs=["json+pydantic", "capnp"])
        assert set(report.findings) == {("capnp", "Keyed.m")}

    def test_avro_carries_enum_keys(self) -> None:
        m = model(
            "Tiers", m=(dict[Tier, int], ...), n=(dict[Literal["a", "b"], int], ...)
        )
        schema = from_class(m, "m:Tiers")
        assert codec_refusal("avro", schema) is None
        assert run_check(schema, count=30, codecs=["json+pydantic", "avro"]).ok
        assert report_lines(schema, "avro") == [
            "Tiers.m: carried as a map keyed by the int's decimal text (Avro keys "
            "are strings)"
        ]

    def test_a_key_no_protobuf_map_takes_refuses_protobuf_alone(self) -> None:
        """A datetime or float key made the derived .proto fail to build, which
        refused the whole model (every codec, pydantic's too)."""
        schema = from_class(model("When", m=(dict[datetime.datetime, int], ...)), "m:W")
        assert "protobuf map keys are str or int here, not datetime" in (
            codec_refusal("protobuf", schema) or ""
        )
        codecs = ["json+pydantic", "msgspec-json", "capnp"]
        report = run_check(schema, count=20, codecs=codecs)
        assert set(report.findings) == {("capnp", "When.m")}  # the keys' edges


def report_lines(schema: Any, codec: str) -> list[str]:
    return run_check(schema, count=5, codecs=[codec]).changed.get(codec, [])
