"""The three forms of a user's schema: same fields, same mapping, equal decoded values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor

from schemas.compare import diff, read_native
from schemas.user.loader import UserSchema, load_schema
from schemas.user.synthetic import make_payloads

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "usermodels"
SPECS = [
    "orders:Order",
    "events:Event",
    "strict_orders:LenientReading",
    f"{FIXTURES / 'shipment.proto'}:Shipment",
]


@pytest.fixture(autouse=True)
def _user_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixtures are a user's own modules, importable from PYTHONPATH."""
    monkeypatch.syspath_prepend(str(FIXTURES))


@pytest.fixture(params=SPECS, ids=lambda s: s.rsplit("/", 1)[-1])
def schema(request: pytest.FixtureRequest) -> UserSchema:
    return load_schema(request.param)


def proto_type(schema: UserSchema, path: str) -> tuple[str, str]:
    """(label, type) of a field of the root message, e.g. ("optional", "int64")."""
    field = schema.proto.DESCRIPTOR.fields_by_name[path]
    names = {
        v: k.removeprefix("TYPE_").lower()
        for k, v in vars(FieldDescriptor).items()
        if k.startswith("TYPE_")
    }
    kind = field.message_type.full_name if field.message_type else names[field.type]
    label = (
        "repeated" if field.is_repeated else "optional" if field.has_presence else ""
    )
    return label, kind


class TestSameFields:
    """Every form has the same field names in the same order, nested ones too."""

    def test_same_fields_in_same_order(self, schema: UserSchema) -> None:
        pending: list[tuple[Any, Any, Any]] = [
            (schema.proto.DESCRIPTOR, schema.struct, schema.model)
        ]
        while pending:
            descriptor, struct, model = pending.pop()
            names = [f.name for f in descriptor.fields]
            assert list(struct.__struct_fields__) == names
            assert list(model.model_fields) == names
            for f, hint in zip(
                descriptor.fields, msgspec.structs.fields(struct), strict=True
            ):
                if f.message_type is None or f.message_type.GetOptions().map_entry:
                    continue
                if f.message_type.full_name == "google.protobuf.Timestamp":
                    continue
                annotation = model.model_fields[f.name].annotation
                inner_struct, inner_model = _inner(hint.type), _inner(annotation)
                assert (
                    inner_struct.__name__ == inner_model.__name__ == f.message_type.name
                )
                pending.append((f.message_type, inner_struct, inner_model))


def _inner(annotation: Any) -> Any:
    """The class in `X`, `list[X]` or `X | None`."""
    args = [a for a in getattr(annotation, "__args__", ()) if a is not type(None)]
    return _inner(args[0]) if args else annotation


class TestSameBytesEqualValues:
    """The same JSON, MessagePack and protobuf bytes decode to equal values in every form."""

    def test_json_bytes(self, schema: UserSchema) -> None:
        for payload in make_payloads(schema.shape, 15, seed=7):
            data = msgspec.json.encode(payload)
            by_pydantic = read_native(
                schema.model.model_validate_json(data), schema.shape
            )
            by_msgspec = read_native(
                msgspec.json.decode(data, type=schema.struct), schema.shape
            )
            by_proto = read_native(
                json_format.Parse(data.decode(), schema.proto()), schema.shape
            )
            assert diff(by_pydantic, by_msgspec, schema.shape, "$") == []
            assert diff(by_pydantic, by_proto, schema.shape, "$") == []

    def test_msgpack_and_protobuf_bytes(self, schema: UserSchema) -> None:
        for payload in make_payloads(schema.shape, 15, seed=8):
            struct = msgspec.convert(payload, schema.struct, str_keys=True)
            packed = msgspec.msgpack.encode(struct)
            from_pack = msgspec.msgpack.decode(packed, type=schema.struct)
            message = json_format.ParseDict(payload, schema.proto())
            from_wire = schema.proto.FromString(message.SerializeToString())
            expected = read_native(struct, schema.shape)
            assert read_native(from_pack, schema.shape) == expected
            assert (
                diff(expected, read_native(from_wire, schema.shape), schema.shape, "$")
                == []
            )


class TestMapping:
    """Each Python type maps to the protobuf type the table in shape.py names."""

    @pytest.mark.parametrize(
        ("field", "expected"),
        [
            ("order_id", ("", "string")),
            ("customer_id", ("", "int64")),
            ("placed_at", ("optional", "google.protobuf.Timestamp")),
            ("status", ("", "string")),
            ("channel", ("", "string")),
            ("shipping", ("optional", "orders.Address")),
            ("billing", ("optional", "orders.Address")),
            ("items", ("repeated", "orders.LineItem")),
            ("attributes", ("repeated", "orders.Order.AttributesEntry")),
            ("stock_by_warehouse", ("repeated", "orders.Order.StockByWarehouseEntry")),
            ("signature", ("", "bytes")),
            ("note", ("optional", "string")),
            ("gift", ("", "bool")),
            ("discount", ("optional", "double")),
        ],
    )
    def test_order_fields(self, field: str, expected: tuple[str, str]) -> None:
        assert proto_type(load_schema("orders:Order"), field) == expected

    def test_nullable_fields_are_proto3_optional(self) -> None:
        schema = load_schema("orders:Order")
        fields: Any = schema.proto.DESCRIPTOR.fields_by_name
        assert fields["billing"].containing_oneof.name == "_billing"
        assert fields["shipping"].containing_oneof is None

    def test_bounded_ints_get_the_narrowest_width(self) -> None:
        schema = load_schema("orders:Order")
        item: Any = schema.proto.DESCRIPTOR.fields_by_name["items"].message_type
        assert item.fields_by_name["quantity"].type == FieldDescriptor.TYPE_INT32
        event = load_schema("events:Event").proto.DESCRIPTOR
        assert event.fields_by_name["id"].type == FieldDescriptor.TYPE_UINT64

    def test_map_keys_keep_their_type(self) -> None:
        schema = load_schema("orders:Order")
        fields: Any = schema.proto.DESCRIPTOR.fields_by_name
        entry = fields["stock_by_warehouse"].message_type
        assert entry.fields_by_name["key"].type == FieldDescriptor.TYPE_INT64
        message = json_format.ParseDict({"stock_by_warehouse": {7: 3}}, schema.proto())
        decoded: Any = schema.proto.FromString(message.SerializeToString())
        assert dict(decoded.stock_by_warehouse) == {7: 3}


class TestDeterminism:
    """Loading the same spec twice derives the same forms."""

    def test_same_descriptor_and_struct(self, schema: UserSchema) -> None:
        again = load_schema(schema.name)
        assert (
            again.proto_file.SerializeToString()
            == schema.proto_file.SerializeToString()
        )
        assert repr(msgspec.structs.fields(again.struct)) == repr(
            msgspec.structs.fields(schema.struct)
        ).replace(repr(schema.struct), repr(again.struct))

    def test_private_pools_do_not_collide(self) -> None:
        one, two = load_schema("orders:Order"), load_schema("orders:Order")
        assert one.proto is not two.proto
        assert one.proto.DESCRIPTOR.full_name == two.proto.DESCRIPTOR.full_name
