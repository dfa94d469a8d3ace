"""A team's registered Protobuf file read with the message derived from a model:
the fields the worker reads must be, number for number, those the file declares,
or the id is refused once naming the field; a value is never read into the wrong
fields and counted ok. No network: an in-memory registry."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pydantic
import pytest
from google.protobuf import descriptor_pb2

from codec import get_codec
from codec.registry import frame_codec
from codec.registry.frame import id_header, indexes_bytes
from codec.registry.memory import InMemoryRegistry
from schemas.errors import DecodeError
from schemas.user.loader import from_class, load_schema

PROTO = Path(__file__).parents[1] / "fixtures/usermodels/registry_team.proto"
TEAM: Any = load_schema(f"{PROTO}:Order").proto


class Line(pydantic.BaseModel):
    sku: str
    qty: int
    price: float


def _model(**fields: Any) -> Any:
    return from_class(pydantic.create_model("Order", **fields), "t:Order")


AS_THE_FILE = {
    "order_id": (str, ...),
    "placed_at": (pydantic.AwareDatetime, ...),
    "status": (int, ...),
    "lines": (list[Line], ...),
    "attributes": (dict[str, str], ...),
    "coupon": (str | None, None),
}


def _team_value() -> tuple[bytes, Any]:
    message = TEAM(order_id="o-1", status=2, attributes={"a": "b"}, coupon="X")
    message.placed_at.FromSeconds(1714566615)
    message.lines.add(sku="s", qty=3, price=1.5)
    registry = InMemoryRegistry()
    file = descriptor_pb2.FileDescriptorProto()
    TEAM.DESCRIPTOR.file.CopyToProto(file)
    text = base64.b64encode(file.SerializeToString()).decode()
    schema_id = registry.register("orders-value", "PROTOBUF", text)
    frame = id_header(schema_id) + indexes_bytes((1,))
    return frame + message.SerializeToString(), registry


def test_a_model_whose_fields_are_the_files_decodes_equal() -> None:
    data, registry = _team_value()
    got = frame_codec(get_codec("protobuf", _model(**AS_THE_FILE)), registry).decode(
        data
    )
    assert (got.order_id, got.status, got.placed_at.seconds) == ("o-1", 2, 1714566615)
    assert (got.coupon, dict(got.attributes), got.lines[0].qty) == ("X", {"a": "b"}, 3)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (
            lambda f: {"order_id": f["order_id"], "status": f["status"]} | f,
            "Order.status",
        ),
        (lambda f: f | {"lines": (list[str], ...)}, "Order.lines"),
        (lambda f: f | {"placed_at": (str, ...)}, "Order.placed_at"),
    ],
)
def test_another_numbering_or_type_is_refused_naming_the_field(
    change: Any, named: str
) -> None:
    data, registry = _team_value()
    codec = frame_codec(get_codec("protobuf", _model(**change(AS_THE_FILE))), registry)
    with pytest.raises(DecodeError, match=f"schema id 1: .*{named}") as info:
        codec.decode(data)
    assert info.value.reason == "schema_mismatch"
