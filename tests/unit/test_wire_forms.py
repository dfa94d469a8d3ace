"""The FlatBuffers, Cap'n Proto and Avro forms: derived, deterministic, refused per format."""

from __future__ import annotations

import decimal
from typing import Any

import msgspec
import pydantic
import pytest

from codec import get_codec
from schemas.derive.avro_schema import avro_text
from schemas.derive.capnp_schema import capnp_form, capnp_name
from schemas.derive.fbs_schema import camel, flatbuffers_form
from schemas.errors import ConfigError
from schemas.registry import SCHEMA_NAMES, SCHEMAS
from schemas.user.loader import from_class, load_schema
from schemas.wire_shape import shape_of
from schematool.cli import main as schema_main


class Blobs(msgspec.Struct):
    id: int
    chunks: list[bytes]


class Clash(msgspec.Struct):
    id: int
    Id: int


class Which(msgspec.Struct):
    which: int


class TestDerivation:
    @pytest.mark.parametrize("name", SCHEMA_NAMES)
    def test_same_shape_same_text(self, name: str) -> None:
        shape = shape_of(SCHEMAS[name])  # type: ignore[index]
        again = shape_of(SCHEMAS[name])  # type: ignore[index]
        assert flatbuffers_form(shape).text == flatbuffers_form(again).text
        assert capnp_form(shape).text == capnp_form(again).text
        assert avro_text(shape) == avro_text(again)

    def test_a_user_schema_derives_every_form(self) -> None:
        schema = load_schema("tests.fixtures.usermodels.orders:Order")
        fbs = flatbuffers_form(schema.shape)
        assert "table Order {" in fbs.text and "placed_at:long" in fbs.text
        assert f'file_identifier "{fbs.identifier}"' in fbs.text
        assert "placedAt @" in capnp_form(schema.shape).text
        assert '"timestamp-micros"' in avro_text(schema.shape)

    def test_names(self) -> None:
        assert camel("card_last4") == "CardLast4"
        # flatc keeps a trailing `_` and the second of two (its ConvertCase).
        assert camel("from_") == "From_"
        assert camel("field_2_decimal_10_2_") == "Field2Decimal102_"
        assert camel("a__b") == "A_b"

    def test_flatbuffers_reads_a_field_named_with_a_trailing_underscore(self) -> None:
        """Found by tests/unit/test_model_generator.py: a field `field_2_decimal_10_2_`
        raised AttributeError when the codec was built (flatc names its accessor
        `Field2Decimal102_`)."""
        fields: Any = {
            "from_": (str, pydantic.Field(alias="from")),
            "field_2_decimal_10_2_": (list[decimal.Decimal] | None, None),
        }
        schema = from_class(pydantic.create_model("Trailing", **fields), "t:Trailing")
        codec = get_codec("flatbuffers", schema)
        data = {"from": "depot", "field_2_decimal_10_2_": ["1.50"]}
        back = codec.decode(codec.encode(codec.from_builtins(data)))
        assert back.from_ == "depot"
        assert back.field_2_decimal_10_2_ == [decimal.Decimal("1.50")]
        assert capnp_name("customer_id") == "customerId"
        assert capnp_name("Order", upper=True) == "Order"


class TestRefusals:
    """A format that cannot hold a schema refuses it, naming the field; others build."""

    def test_flatbuffers_refuses_a_list_of_bytes(self) -> None:
        schema = from_class(Blobs, "t:Blobs")
        with pytest.raises(ConfigError, match=r"Blobs\.chunks: .*no vector of vectors"):
            get_codec("flatbuffers", schema)
        codec = get_codec("capnp", schema)
        obj = codec.from_builtins({"id": 1, "chunks": ["AAE=", ""]})
        assert codec.decode(codec.encode(obj)) == obj
        get_codec("avro", schema)

    def test_capnp_refuses_two_fields_with_one_name(self) -> None:
        schema = from_class(Clash, "t:Clash")
        with pytest.raises(ConfigError, match=r"Clash\.Id: no distinct Cap'n Proto"):
            get_codec("capnp", schema)
        get_codec("flatbuffers", schema)

    def test_capnp_refuses_a_field_pycapnp_shadows(self) -> None:
        with pytest.raises(ConfigError, match="'which' of Which clashes"):
            get_codec("capnp", from_class(Which, "t:Which"))

    def test_auto_leaves_out_a_refused_format(self) -> None:
        codec = get_codec("auto", from_class(Blobs, "t:Blobs"))
        assert codec.codec_for(b"application/x-capnp").name == "capnp"  # type: ignore[attr-defined]
        with pytest.raises(Exception, match="content"):
            codec.codec_for(b"application/x-flatbuffers")  # type: ignore[attr-defined]


class TestSchemaTool:
    def test_derive_prints_each_form(self, capsys: pytest.CaptureFixture[str]) -> None:
        spec = "tests.fixtures.usermodels.orders:Order"
        for form, marker in (
            ("flatbuffers", "root_type Order;"),
            ("capnp", "struct Order {"),
            ("avro", '"type": "record"'),
        ):
            assert schema_main(["derive", spec, "--form", form]) == 0
            assert marker in capsys.readouterr().out

    def test_show_and_check_name_the_new_codecs(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        spec = "tests.fixtures.usermodels.orders:Order"
        assert schema_main(["show", spec]) == 0
        assert "flatbuffers: derived" in capsys.readouterr().out
        codecs = "msgspec-json,flatbuffers,capnp,avro"
        # `placed_at` is a plain datetime: the naive values among the payloads
        # come back aware in UTC from the three, which store instants: listed as
        # not carried (the format's limit), not a disagreement.
        assert schema_main(["check", spec, "--count", "10", "--codecs", codecs]) == 0
        out = capsys.readouterr().out
        assert "  msgspec-json  ok\n" in out
        assert "  avro          ok, 1 field(s) not carried" in out
        for codec in ("flatbuffers", "capnp", "avro"):
            assert f"  {codec}: Order.placed_at: payload " in out


class TestSettingsRefuse:
    """A worker or load generator whose codec cannot hold the schema: a config error."""

    SPEC = "tests.fixtures.usermodels.wire_refused:Blobs"

    def test_worker(self) -> None:
        from pydantic import ValidationError

        from service.settings.worker import CodecSettings

        with pytest.raises(ValidationError, match=r"(?s)flatbuffers: .*Blobs\.chunks"):
            CodecSettings.model_validate({"name": "flatbuffers", "schema": self.SPEC})
        with pytest.raises(ValidationError, match=r"(?s)flatbuffers: .*Blobs\.chunks"):
            CodecSettings.model_validate(
                {"name": "capnp", "schema": self.SPEC, "shadow": "flatbuffers"}
            )
        CodecSettings.model_validate({"name": "capnp", "schema": self.SPEC})

    def test_loadgen(self) -> None:
        from pydantic import ValidationError

        from loadgen.config import LoadgenSettings

        with pytest.raises(ValidationError, match=r"(?s)flatbuffers: .*Blobs\.chunks"):
            LoadgenSettings.model_validate(
                {"topic": "t", "codec": "flatbuffers", "schema": self.SPEC}
            )
        LoadgenSettings.model_validate(
            {"topic": "t", "codec": "avro", "schema": self.SPEC}
        )

    def test_ab_runner_refuses_a_named_codec(self) -> None:
        from tests.unit.test_ab_user_schema import plan

        with pytest.raises(
            ConfigError, match=r"(?s)--codecs: flatbuffers .*Blobs\.chunks"
        ):
            plan("--schema", self.SPEC, "--codecs", "msgspec-json,flatbuffers")
