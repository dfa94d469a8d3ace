"""Loading a user's schema: specs, the three sources, and refusals with their path."""

from __future__ import annotations

import datetime
import sys
from pathlib import Path
from typing import Any

import msgspec
import pydantic
import pytest
from google.protobuf import json_format

from codec import codec_refusal
from schemas.compare import read_native
from schemas.errors import ConfigError
from schemas.user.loader import UserSchema, load_schema

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "usermodels"
SHIPMENT = f"{FIXTURES / 'shipment.proto'}:Shipment"


@pytest.fixture(autouse=True)
def _user_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixtures are a user's own modules, importable from PYTHONPATH."""
    monkeypatch.syspath_prepend(str(FIXTURES))


def refusal(spec: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_schema(spec)
    return str(info.value)


class TestSpecs:
    """A bad spec is one ConfigError line that says what is wrong."""

    @pytest.mark.parametrize(
        ("spec", "expected"),
        [
            ("orders", "expected MODULE:NAME or FILE.proto:MESSAGE"),
            ("orders:", "expected MODULE:NAME"),
            ("no_such_module_xyz:Order", "cannot import 'no_such_module_xyz'"),
            ("orders:Nope", "'orders' has no 'Nope'"),
            ("refused:NotAModel", "is not a pydantic BaseModel or msgspec Struct"),
            ("missing.proto:Order", "cannot read 'missing.proto'"),
            (f"{FIXTURES / 'shipment.proto'}:Nope", "no message 'Nope'"),
        ],
    )
    def test_bad_spec_is_one_line(self, spec: str, expected: str) -> None:
        text = refusal(spec)
        assert text.startswith("schema error: ")
        assert expected in text
        assert "\n" not in text

    def test_module_in_the_current_directory(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        (tmp_path / "cwd_only_models.py").write_text(
            "import msgspec\n\n\nclass Ping(msgspec.Struct):\n    n: int\n"
        )
        monkeypatch.chdir(tmp_path)
        monkeypatch.delitem(sys.modules, "cwd_only_models", raising=False)
        schema = load_schema("cwd_only_models:Ping")
        assert schema.struct.__name__ == "Ping"
        assert str(tmp_path) not in sys.path

    def test_import_error_inside_the_module(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        (tmp_path / "broken_models.py").write_text("raise RuntimeError('boom')\n")
        monkeypatch.syspath_prepend(str(tmp_path))
        text = refusal("broken_models:X")
        assert "RuntimeError: boom" in text

    def test_dotted_name(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        (tmp_path / "nested_models.py").write_text(
            "import pydantic\n\n\nclass Outer:\n"
            "    class Inner(pydantic.BaseModel):\n        n: int\n"
        )
        monkeypatch.syspath_prepend(str(tmp_path))
        assert load_schema("nested_models:Outer.Inner").model.__name__ == "Inner"


class TestPydanticSource:
    """A pydantic model is its own pydantic form; msgspec and protobuf are derived."""

    def test_forms(self) -> None:
        from orders import Order  # type: ignore[import-not-found]

        schema = load_schema("orders:Order")
        assert isinstance(schema, UserSchema)
        assert schema.model is Order
        assert schema.source == "pydantic"
        assert schema.name == "orders:Order"
        # pydantic's default extra="ignore": the derived Struct ignores them too.
        assert not schema.struct.__struct_config__.forbid_unknown_fields
        assert [f.name for f in schema.proto.DESCRIPTOR.fields] == list(
            Order.model_fields
        )

    def test_lax_model_stays_lax_and_msgspec_is_strict(self) -> None:
        schema = load_schema("orders:Order")
        data = {"sku": "abc", "quantity": "42", "unit_price": 1.5}
        items: Any = schema.model.model_fields["items"].annotation
        item_model = items.__args__[0]
        assert item_model.model_validate(data).quantity == 42
        item_struct = msgspec.structs.fields(schema.struct)[7].type.__args__[0]
        with pytest.raises(msgspec.ValidationError, match="Expected `int`, got `str`"):
            msgspec.json.decode(msgspec.json.encode(data), type=item_struct)

    def test_derived_msgspec_follows_the_unknown_field_policy(self) -> None:
        schema = load_schema("orders:Order")
        address = msgspec.structs.fields(schema.struct)[5].type
        extra = b'{"street": "a", "city": "b", "zzz": 1}'
        assert msgspec.json.decode(extra, type=address).city == "b"
        forbidding = load_schema("strict_orders:Reading")
        assert forbidding.model.model_config.get("extra") == "forbid"
        assert forbidding.struct.__struct_config__.forbid_unknown_fields

    def test_bytes_and_datetimes_survive_every_form(self) -> None:
        schema = load_schema("strict_orders:LenientReading")
        data = b'{"sensor":"s","value":1.25,"taken_at":"2026-03-01T12:00:00.5Z"}'
        values = [
            read_native(schema.model.model_validate_json(data), schema.shape),
            read_native(msgspec.json.decode(data, type=schema.struct), schema.shape),
            read_native(json_format.Parse(data.decode(), schema.proto()), schema.shape),
        ]
        moment = datetime.datetime(2026, 3, 1, 12, 0, 0, 500_000, tzinfo=datetime.UTC)
        assert all(v["taken_at"] == moment for v in values)
        assert values[0] == values[1] == values[2]


class TestMsgspecSource:
    """A msgspec Struct is its own msgspec form; its derived pydantic form is strict."""

    def test_forms(self) -> None:
        from events import Event  # type: ignore[import-not-found]

        schema = load_schema("events:Event")
        assert schema.struct is Event
        assert schema.source == "msgspec"
        assert schema.model.model_config.get("strict") is True
        assert schema.model.model_config.get("extra") == "forbid"

    def test_derived_model_is_strict_where_json_has_the_type(self) -> None:
        schema = load_schema("events:Event")
        good = {"id": 1, "kind": 2, "at": "2026-01-01T00:00:00Z", "source": "x"}
        obj: Any = schema.model.model_validate(good)  # two-pass: strings from JSON
        assert obj.at.tzinfo is not None
        with pytest.raises(pydantic.ValidationError, match="int_type"):
            schema.model.model_validate(good | {"id": "1"})

    def test_int_enum_decodes_equal_everywhere(self) -> None:
        from events import Kind

        schema = load_schema("events:Event")
        data = b'{"id":1,"kind":3,"at":"2026-01-01T00:00:00Z","source":"x"}'
        native: Any = schema.model.model_validate_json(data)
        assert native.kind is Kind.PING
        message: Any = json_format.Parse(data.decode(), schema.proto())
        assert message.kind == Kind.PING == 3


class TestProtoSource:
    """A `.proto` file is parsed without protoc; pydantic and msgspec are derived."""

    def test_forms(self) -> None:
        schema = load_schema(SHIPMENT)
        assert schema.source == "proto"
        assert schema.proto.DESCRIPTOR.full_name == "logistics.v1.Shipment"
        assert [f.name for f in msgspec.structs.fields(schema.struct)] == [
            f.name for f in schema.proto.DESCRIPTOR.fields
        ]

    def test_full_name_works_too(self) -> None:
        schema = load_schema(f"{FIXTURES / 'shipment.proto'}:logistics.v1.Dimensions")
        assert schema.model.__name__ == "Dimensions"

    def test_enum_becomes_an_int_enum(self) -> None:
        schema = load_schema(SHIPMENT)
        status: Any = schema.model.model_fields["status"].annotation
        assert [m.name for m in status] == [
            "STATUS_UNSPECIFIED",
            "IN_TRANSIT",
            "DELIVERED",
        ]

    def test_integer_ranges_are_validated_like_protobuf(self) -> None:
        schema = load_schema(SHIPMENT)
        pieces = msgspec.structs.fields(schema.struct)[7]
        assert pieces.name == "pieces"
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(-1, pieces.type)

    @pytest.mark.parametrize(
        ("body", "expected"),
        [
            ("message M { float f = 1; }", "M.f: float (32-bit)"),
            ("message M { oneof o { int64 a = 1; string b = 2; } }", "M.a: a oneof"),
            ("message M { map<bool, string> m = 1; }", "M.m{key}: map keys"),
        ],
    )
    def test_refusals(self, tmp_path: Path, body: str, expected: str) -> None:
        path = tmp_path / "m.proto"
        path.write_text(f'syntax = "proto3";\npackage logistics;\n{body}\n')
        assert expected in refusal(f"{path}:M")


REFUSED = [
    (
        "UnionOfModels",
        "msgspec-json",
        "UnionOfModels.delivery: msgspec cannot tell Address | Locker apart (it "
        "refuses a union of Structs with no tag)",
    ),
    ("WithSet", "protobuf", "WithSet.tags: protobuf has no set type"),
    ("WithSet", "avro", "WithSet.tags: Avro has no set type"),
    ("MixedTuple", "capnp", "MixedTuple.pair: Cap'n Proto has no fixed-length tuple"),
    ("PlainEnum", "protobuf", "PlainEnum.color: Color is a plain Enum: protobuf"),
    ("PlainEnum", "flatbuffers", "PlainEnum.color: Color is a plain Enum: FlatB"),
    ("PlainBytes", "msgspec-json", "PlainBytes.blob: pydantic writes bytes to JSON"),
    (
        "ListOfOptional",
        "flatbuffers",
        "ListOfOptional.values[]: FlatBuffers holds no None inside a list",
    ),
    (
        "NullableList",
        "protobuf",
        "NullableList.tags: a protobuf repeated or map field cannot be None",
    ),
]
"""(model, codec, refusal): what a format cannot carry refuses that codec alone."""

CARRIED = [
    ("WithSet", ("msgspec-json", "msgspec-msgpack")),
    ("MixedTuple", ("msgspec-json", "msgspec-msgpack")),
    ("PlainEnum", ("msgspec-json", "capnp", "avro")),
    ("ListOfOptional", ("msgspec-json", "msgspec-msgpack")),
    ("NullableList", ("msgspec-json", "flatbuffers", "capnp", "avro")),
]

NOTED = [
    ("Order", "Order.items[].price", "AfterValidator 'two_places'"),
    ("WithValidator", "WithValidator.price", "field_validator(mode='after')"),
    ("WithAnnotatedValidator", "WithAnnotatedValidator.code", "AfterValidator"),
]

REFUSED_STRUCTS = [
    ("ArrayLike", "ArrayLike: array_like=True writes arrays"),
    ("Tagged", "Tagged: a tagged Struct adds a tag key"),
]


class TestRefusals:
    """A model pydantic validates always loads; a format that cannot carry a field
    refuses its codec alone, with the field's dotted path and why."""

    @pytest.mark.parametrize(("name", "codec", "expected"), REFUSED)
    def test_refused_for_that_codec_only(
        self, name: str, codec: str, expected: str
    ) -> None:
        schema = load_schema(f"refused:{name}")
        why = schema.refusal(codec) or ""
        assert why.startswith(f"schema error: {codec} cannot carry ")
        assert expected in why
        for own in ("json+pydantic", "json-stdlib+pydantic", "orjson+pydantic"):
            assert schema.refusal(own) is None

    @pytest.mark.parametrize(("name", "codecs"), CARRIED)
    def test_carried_where_the_format_has_the_type(
        self, name: str, codecs: tuple[str, ...]
    ) -> None:
        schema = load_schema(f"refused:{name}")
        assert [c for c in codecs if codec_refusal(c, schema)] == []

    @pytest.mark.parametrize(("name", "path", "what"), NOTED)
    def test_validators_are_noted_not_refused(
        self, name: str, path: str, what: str
    ) -> None:
        schema = load_schema(f"refused:{name}")
        assert schema.refused == {}
        [(where, label, effect)] = schema.notes
        assert (where, what in label) == (path, True)
        assert "arrive as sent" in effect

    @pytest.mark.parametrize(("name", "expected"), REFUSED_STRUCTS)
    def test_refused_struct_with_path(self, name: str, expected: str) -> None:
        assert expected in refusal(f"refused_structs:{name}")

    def test_every_refusal_is_named_at_once(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        (tmp_path / "two_bad.py").write_text(
            "import pydantic\n\n\nclass Two(pydantic.BaseModel):\n"
            "    a: set[int]\n    b: frozenset[int]\n"
        )
        monkeypatch.syspath_prepend(str(tmp_path))
        schema = load_schema("two_bad:Two")
        lines = (schema.refusal("protobuf") or "").splitlines()
        assert (
            lines[0] == "schema error: protobuf cannot carry 2 fields of two_bad:Two:"
        )
        assert lines[1].startswith("  Two.a: ") and lines[2].startswith("  Two.b: ")
        assert schema.refusal("msgspec-json") is None

    def test_naive_only_datetime_is_refused_for_protobuf_only(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        (tmp_path / "naive_models.py").write_text(
            "import pydantic\n\n\nclass N(pydantic.BaseModel):\n"
            "    at: pydantic.NaiveDatetime\n"
        )
        monkeypatch.syspath_prepend(str(tmp_path))
        schema = load_schema("naive_models:N")
        text = schema.refusal("protobuf") or ""
        assert "N.at: a protobuf Timestamp is an instant" in text
        assert schema.refusal("msgspec-json") is None
