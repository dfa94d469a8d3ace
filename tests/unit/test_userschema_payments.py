"""A payment team's pydantic model as written (aliases, UUID, Decimal, AwareDatetime,
ge=0 ints, patterns, str enums, Literal, default factories, extra="ignore", lax mode)
in every form: accepted, with the aliases as the wire keys everywhere."""

from __future__ import annotations

import decimal
import json
import uuid
from pathlib import Path
from typing import Any

import msgspec
import pytest

from codec import get_codec
from schemas.compare import read_native
from schemas.derive.msgspec_structs import build_structs
from schemas.errors import ConfigError
from schemas.shape import Constraints, FieldShape, MessageShape, Scalar
from schemas.user.loader import UserSchema, load_schema
from schemas.user.synthetic import make_payloads
from schematool.cli import main as schema_main
from tests.fixtures.usermodels.payments import PaymentEvent

SPEC = "tests.fixtures.usermodels.payments:PaymentEvent"
PAYMENT_ID = "6f1c2b9e-8a51-4a7e-9a0e-6a5f7c2d1e3b"


def published(**changes: Any) -> bytes:
    """One event as the team's service publishes it (`by_alias=True`)."""
    event: dict[str, Any] = {
        "eventId": "0b8a6f43-2d4c-4c8e-9a57-3f0f7f8b9c10",
        "paymentId": PAYMENT_ID,
        "userId": 123,
        "merchantId": "m-1",
        "status": "captured",
        "method": "card",
        "amount": {"amount": "12.50", "currency": "EUR"},
        "card": {
            "brand": "visa",
            "lastFour": "4242",
            "expiryMonth": 1,
            "expiryYear": 2030,
        },
        "items": [
            {
                "sku": "a",
                "quantity": 1,
                "unitPrice": {"amount": "1.00", "currency": "USD"},
            }
        ],
        "metadata": {"k": "v"},
        "createdAt": "2026-01-01T00:00:00Z",
    }
    model = PaymentEvent.model_validate(event | changes)
    return model.model_dump_json(by_alias=True).encode()


@pytest.fixture(scope="module")
def schema() -> UserSchema:
    return load_schema(SPEC)


class TestAccepted:
    """The model loads; every derived form uses the aliases as wire keys."""

    def test_loads_with_no_refusal(self, schema: UserSchema) -> None:
        assert schema.refused == {}

    def test_msgspec_renames_to_the_aliases(self, schema: UserSchema) -> None:
        data = published()
        struct: Any = msgspec.json.decode(data, type=schema.struct)
        assert struct.user_id == 123 and struct.payment_id == uuid.UUID(PAYMENT_ID)
        assert struct.amount.amount == decimal.Decimal("12.50")
        assert json.loads(msgspec.json.encode(struct)).keys() == json.loads(data).keys()

    def test_proto_names_are_identifiers_and_the_alias_is_json_name(
        self, schema: UserSchema
    ) -> None:
        fields = {f.name: f for f in schema.proto.DESCRIPTOR.fields}
        assert fields["user_id"].json_name == "userId"
        assert fields["payment_id"].type == fields["payment_id"].TYPE_STRING
        assert fields["user_id"].type == fields["user_id"].TYPE_UINT64

    @pytest.mark.parametrize(
        "codec",
        [
            "json+pydantic",
            "json-stdlib+pydantic",
            "orjson+pydantic",
            "msgspec-json",
            "msgspec-msgpack",
            "protobuf",
        ],
    )
    def test_every_codec_reads_the_published_values(
        self, schema: UserSchema, codec: str
    ) -> None:
        reference = read_native(
            PaymentEvent.model_validate_json(published()), schema.shape
        )
        json_codec = get_codec("json+pydantic", schema)
        target = get_codec(codec, schema)  # type: ignore[arg-type]
        native = target.from_builtins(
            json_codec.to_builtins(json_codec.decode(published()))
        )
        assert (
            read_native(target.decode(target.encode(native)), schema.shape) == reference
        )

    def test_json_pydantic_writes_the_aliases(self, schema: UserSchema) -> None:
        codec = get_codec("json+pydantic", schema)
        assert codec.encode(codec.decode(published())) == published()


class TestSameChecks:
    """What the model enforces, the derived msgspec form enforces too."""

    def test_unknown_fields_are_ignored_as_pydantic_ignores_them(
        self, schema: UserSchema
    ) -> None:
        data = json.loads(published()) | {"somethingNew": 1}
        struct: Any = msgspec.json.decode(json.dumps(data), type=schema.struct)
        assert struct.user_id == 123

    @pytest.mark.parametrize(
        ("key", "value"),
        [
            ("status", "weird"),
            ("schemaVersion", "3"),
            ("merchantId", "x" * 65),
            ("paymentId", "not-a-uuid"),
            ("userId", -1),
            ("retries", 11),
        ],
    )
    def test_msgspec_rejects_what_the_model_rejects(
        self, schema: UserSchema, key: str, value: Any
    ) -> None:
        data = json.dumps(json.loads(published()) | {key: value})
        with pytest.raises(ValueError, match="validation error"):
            PaymentEvent.model_validate_json(data)
        with pytest.raises(msgspec.ValidationError):
            msgspec.json.decode(data, type=schema.struct)

    def test_patterns_are_checked(self, schema: UserSchema) -> None:
        data = json.loads(published())
        data["amount"]["currency"] = "eur"
        with pytest.raises(msgspec.ValidationError, match="matching regex"):
            msgspec.json.decode(json.dumps(data), type=schema.struct)


class TestBounds:
    """Int bounds msgspec cannot check are left out, never a crash."""

    def test_uint64_bounds_build(self) -> None:
        shape = MessageShape(
            "M", (FieldShape("id", Scalar("int", Constraints(ge=0, le=2**64 - 1))),)
        )
        struct: Any = build_structs(shape)
        assert msgspec.json.decode(b'{"id": 18446744073709551615}', type=struct).id
        with pytest.raises(msgspec.ValidationError):
            msgspec.json.decode(b'{"id": -1}', type=struct)

    def test_uint64_proto_checks(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        proto = tmp_path / "ev.proto"
        proto.write_text(
            'syntax = "proto3";\nmessage Ev { uint64 id = 1; string name = 2; }\n'
        )
        assert schema_main(["check", f"{proto}:Ev", "--count", "5"]) == 0
        assert "all codecs agree" in capsys.readouterr().out


class TestRefusals:
    """A refusal is one plain line per field, and only for the codec concerned."""

    def test_wide_ints_refuse_every_64_bit_format(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        (tmp_path / "wide_ints.py").write_text(
            "import pydantic\n\n\nclass W(pydantic.BaseModel):\n"
            "    big: int = pydantic.Field(ge=0, le=2**70)\n"
        )
        monkeypatch.syspath_prepend(str(tmp_path))
        schema = load_schema("wide_ints:W")
        assert list(schema.refused) == [
            "orjson+pydantic",
            "msgspec-msgpack",
            "protobuf",
            "flatbuffers",
            "capnp",
            "avro",
        ]
        assert "W.big: its bounds allow ints past 64 bits, which Avro cannot" in (
            schema.refusal("avro") or ""
        )
        get_codec("msgspec-json", schema)  # not refused for protobuf's sake
        with pytest.raises(
            ConfigError,
            match=r"protobuf cannot carry a field of wide_ints:W:\n  W.big: ",
        ):
            get_codec("protobuf", schema)

    def test_metadata_pydantic_ignores_is_ignored(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The model is read as pydantic reads it: an annotation pydantic does not
        apply changes nothing, and a field read under other keys (AliasChoices) is
        written, and so carried, under its name."""
        (tmp_path / "odd.py").write_text(
            "import typing\n\nimport pydantic\n\n\nclass O(pydantic.BaseModel):\n"
            "    a: typing.Annotated[str, object()]\n"
            "    b: int = pydantic.Field(validation_alias=pydantic.AliasChoices('x', 'y'))\n"
        )
        monkeypatch.syspath_prepend(str(tmp_path))
        schema = load_schema("odd:O")
        assert schema.refusal("msgspec-json") is None
        a, b = schema.shape.fields
        assert a.type == Scalar("str")
        assert (b.wire, b.read_key) == ("b", "x")


def test_synthetic_payloads_decode_with_the_model(schema: UserSchema) -> None:
    for payload in make_payloads(schema.shape, 30, seed=2):
        PaymentEvent.model_validate_json(json.dumps(payload))
