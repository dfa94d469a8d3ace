"""A team's own Avro schema (its names, enums, fixeds, logical types, an older
version) resolved against the schema derived from its model: decoded to equal
values, or refused once with the id and the reason; its JSON Schema's subject. No network: the schemas sit in
an in-memory registry; tests/integration/test_registry_team.py writes the same with
confluent-kafka's serializer into a real one."""

from __future__ import annotations

import copy
import io
import json
from typing import Any

import fastavro
import pydantic
import pytest

from codec import get_codec
from codec.registry import frame_codec
from codec.registry.frame import id_header
from codec.registry.memory import InMemoryRegistry
from schemas.errors import DecodeError
from schemas.user.loader import from_class
from service.shadow.verdict import located
from tests.fixtures.usermodels.registry_team import (
    ORDER_AVRO,
    ORDER_AVRO_V1,
    Order,
    Shipment,
    order_record,
)

FORMS = from_class(Order, "tests.fixtures.usermodels.registry_team:Order")


def _framed(writer: dict[str, Any], record: dict[str, Any]) -> tuple[Any, bytes]:
    registry = InMemoryRegistry()
    schema_id = registry.register("orders-value", "AVRO", json.dumps(writer))
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(writer), record)
    codec = frame_codec(get_codec("avro", FORMS), registry)
    return codec, id_header(schema_id) + out.getvalue()


def _expected(record: dict[str, Any]) -> Any:
    return get_codec("avro", FORMS).from_builtins(record)


class TestTeamWriter:
    """The team's schema differs from the derived one but every value reads equal."""

    @pytest.mark.parametrize("i", [0, 1, 2, 5])
    def test_current_version(self, i: int) -> None:
        codec, data = _framed(ORDER_AVRO, order_record(i))
        assert codec.decode(data) == _expected(order_record(i))

    def test_older_version_fills_the_model_defaults(self) -> None:
        record = order_record(4)
        old = {k: v for k, v in record.items() if k not in ("attributes", "coupon")}
        codec, data = _framed(ORDER_AVRO_V1, old)
        got = codec.decode(data)
        assert (got.attributes, got.coupon) == ({}, None)
        assert got == _expected(old)

    def test_fixed_decimal(self) -> None:
        writer = copy.deepcopy(ORDER_AVRO)
        writer["fields"][4]["type"] = {
            "type": "fixed",
            "name": "Money",
            "size": 8,
            "logicalType": "decimal",
            "precision": 12,
            "scale": 2,
        }
        codec, data = _framed(writer, order_record(3))
        assert codec.decode(data) == _expected(order_record(3))

    def test_a_field_the_model_requires_and_the_writer_lacks(self) -> None:
        writer = copy.deepcopy(ORDER_AVRO)
        writer["fields"] = [f for f in writer["fields"] if f["name"] != "status"]
        record = {k: v for k, v in order_record(1).items() if k != "status"}
        codec, data = _framed(writer, record)
        with pytest.raises(DecodeError, match="schema id 1: does not resolve") as info:
            codec.decode(data)
        assert info.value.reason == "schema_mismatch"
        assert "status" in str(info.value)

    def test_an_enum_symbol_the_model_lacks_is_not_ok(self) -> None:
        writer = copy.deepcopy(ORDER_AVRO)
        writer["fields"][5]["type"]["symbols"].append("LOST")
        codec, data = _framed(writer, order_record(1) | {"status": "LOST"})
        with pytest.raises(DecodeError, match=r"^schema id 1: ") as info:
            codec.decode(data)  # a dead letter naming the id the value was written with
        assert info.value.reason == "decode"
        assert located(info.value) == ("status", "")  # the field, no payload quoted
        codec.decode(_framed(writer, order_record(1))[1])  # the others still read


@pytest.mark.parametrize("name", ["msgspec-json", "json+pydantic", "orjson+pydantic"])
def test_json_record_name_is_the_schema_title(name: str) -> None:
    """RecordNameStrategy's subject for a JSON Schema is its `title`, as
    confluent-kafka's JSONSerializer names it: the same for every JSON codec."""
    forms = from_class(Shipment, "tests.fixtures.usermodels.registry_team:Shipment")
    framed = frame_codec(get_codec(name, forms), InMemoryRegistry())  # type: ignore[arg-type]
    assert framed.record_name() == json.loads(framed.schema_text())["title"]
    assert framed.record_name() == "Shipment"


def test_unions_arrays_and_maps_of_the_writers_named_types() -> None:
    """An enum, a fixed and a record inside unions, arrays and maps take the
    writer's definitions too (each defined once, then named)."""
    from tests.fixtures.usermodels.registry_team import Address, Status

    model = pydantic.create_model(
        "Parcel",
        status=(Status | None, None),
        history=(list[Status], ...),
        sums=(dict[str, pydantic.Base64Bytes], ...),
        to=(Address | None, None),
        back=(Address, ...),
    )
    status = ORDER_AVRO["fields"][5]["type"]
    address = ORDER_AVRO["fields"][7]["type"]
    writer = {
        "type": "record",
        "name": "Parcel",
        "namespace": "com.shop.parcels",
        "fields": [
            {"name": "status", "type": ["null", status], "default": None},
            {
                "name": "history",
                "type": {"type": "array", "items": "com.shop.parcels.Status"},
            },
            {
                "name": "sums",
                "type": {
                    "type": "map",
                    "values": {"type": "fixed", "name": "H", "size": 2},
                },
            },
            {"name": "to", "type": ["null", address], "default": None},
            {"name": "back", "type": "com.shop.common.Address"},
        ],
    }
    record = {
        "status": "PAID",
        "history": ["NEW", "PAID"],
        "sums": {"a": b"xy"},
        "to": None,
        "back": {"street": "s", "city": "c", "zip": "z"},
    }
    forms = from_class(model, "t:Parcel")
    registry = InMemoryRegistry()
    schema_id = registry.register("p-value", "AVRO", json.dumps(writer))
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(writer), record)
    codec = frame_codec(get_codec("avro", forms), registry)
    got = codec.decode(id_header(schema_id) + out.getvalue())
    assert got == get_codec("avro", forms).from_builtins(record)
