"""Synthetic payloads for a user's schema, and the field-by-field comparison."""

from __future__ import annotations

import base64
import datetime
import decimal
import re
import uuid
from pathlib import Path
from typing import Any

import msgspec
import pytest
from google.protobuf import json_format

from schemas.compare import diff, read_native
from schemas.errors import ConfigError
from schemas.shape import (
    Choice,
    Constraints,
    FieldShape,
    ListOf,
    MapOf,
    MessageShape,
    Scalar,
)
from schemas.user.loader import load_schema
from schemas.user.synthetic import SynthOptions, make_payloads

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "usermodels"


@pytest.fixture(autouse=True)
def _user_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixtures are a user's own modules, importable from PYTHONPATH."""
    monkeypatch.syspath_prepend(str(FIXTURES))


def one_field(shape: Any, nullable: bool = False) -> MessageShape:
    return MessageShape("M", (FieldShape("f", shape, nullable),))


class TestPayloads:
    """Payloads are seeded, sized as asked, within bounds, and every form accepts them."""

    def test_same_seed_same_payloads(self) -> None:
        shape = load_schema("orders:Order").shape
        assert make_payloads(shape, 5, seed=3) == make_payloads(shape, 5, seed=3)
        assert make_payloads(shape, 5, seed=3) != make_payloads(shape, 5, seed=4)

    def test_sizes_follow_the_options(self) -> None:
        shape = load_schema("orders:Order").shape
        options = SynthOptions(list_len=(6, 6), str_len=(9, 9), none_ratio=0.0)
        for payload in make_payloads(shape, 5, options=options):
            assert len(payload["items"]) == 6 == len(payload["tags"])
            assert len(payload["order_id"]) == 9
            assert payload["billing"] is not None and payload["note"] is not None

    def test_none_ratio_one_leaves_every_nullable_field_none(self) -> None:
        shape = load_schema("orders:Order").shape
        payload = make_payloads(shape, 1, options=SynthOptions(none_ratio=1.0))[0]
        assert payload["billing"] is payload["note"] is payload["discount"] is None

    def test_bounds_win_over_sizes(self) -> None:
        shape = load_schema("orders:Order").shape
        options = SynthOptions(str_len=(20, 30))
        for payload in make_payloads(shape, 20, options=options):
            for item in payload["items"]:
                assert 3 <= len(item["sku"]) <= 12
                assert 1 <= item["quantity"] <= 1000

    def test_json_forms_of_datetimes_and_bytes(self) -> None:
        shape = load_schema("orders:Order").shape
        payload = make_payloads(shape, 1, seed=1)[0]
        moment = datetime.datetime.fromisoformat(payload["placed_at"])
        assert moment.tzinfo == datetime.UTC
        assert base64.b64decode(payload["signature"], validate=True)

    def test_every_form_builds_from_the_payloads(self) -> None:
        schema = load_schema("orders:Order")
        for payload in make_payloads(schema.shape, 20, seed=5):
            values = [
                read_native(schema.model.model_validate(payload), schema.shape),
                read_native(
                    msgspec.convert(payload, schema.struct, str_keys=True), schema.shape
                ),
                read_native(
                    json_format.ParseDict(payload, schema.proto()), schema.shape
                ),
            ]
            assert diff(values[0], values[1], schema.shape, "Order") == []
            assert diff(values[0], values[2], schema.shape, "Order") == []

    @pytest.mark.parametrize(
        ("bounds", "low", "high"),
        [
            (Constraints(ge=5_000_000), 5_000_000, 7_000_000),
            (Constraints(le=-5_000_000), -7_000_000, -5_000_000),
            (Constraints(gt=0, lt=4, multiple_of=2), 2, 2),
            (Constraints(ge=0, le=2**64 - 1), 0, 1_000_000),
        ],
    )
    def test_int_bounds(self, bounds: Constraints, low: int, high: int) -> None:
        shape = one_field(Scalar("int", bounds))
        values = [p["f"] for p in make_payloads(shape, 30)]
        assert all(low <= v <= high for v in values)

    def test_float_bounds(self) -> None:
        shape = one_field(Scalar("float", Constraints(gt=0.0, le=1.0)))
        assert all(0.0 < p["f"] <= 1.0 for p in make_payloads(shape, 50))

    def test_map_keys_are_distinct_and_typed(self) -> None:
        shape = one_field(MapOf(Scalar("int"), Choice(("a", "b"))))
        options = SynthOptions(map_len=(4, 4))
        for payload in make_payloads(shape, 10, options=options):
            assert len(payload["f"]) == 4
            assert all(isinstance(k, int) for k in payload["f"])
            assert set(payload["f"].values()) <= {"a", "b"}

    def test_a_pattern_is_synthesized(self) -> None:
        pattern = r"^[A-Z]{3}-(ab|cd)\d{2,}$"
        shape = one_field(ListOf(Scalar("str", Constraints(pattern=pattern))))
        values = [v for p in make_payloads(shape, 20, seed=3) for v in p["f"]]
        assert values and all(re.search(pattern, v) for v in values)

    def test_every_pattern_that_cannot_be_synthesized_is_named(self) -> None:
        shape = MessageShape(
            "M",
            (
                FieldShape("a", Scalar("str", Constraints(pattern=r"(?=x)y"))),
                FieldShape("ok", Scalar("str", Constraints(pattern=r"^x+$"))),
                FieldShape("b", ListOf(Scalar("str", Constraints(pattern=r"(a)\1")))),
            ),
        )
        with pytest.raises(ConfigError) as info:
            make_payloads(shape, 1)
        lines = str(info.value).splitlines()
        assert lines[0] == "schema error: 2 fields cannot be synthesized:"
        assert "M.a: cannot synthesize" in lines[1] and "look-around" in lines[1]
        assert "M.b: cannot synthesize" in lines[2] and "back-reference" in lines[2]

    def test_decimals_keep_digits_places_and_bounds(self) -> None:
        bounds = Constraints(ge=0, max_digits=5, decimal_places=2)
        shape = one_field(Scalar("decimal", bounds))
        for payload in make_payloads(shape, 50, seed=1):
            value = decimal.Decimal(payload["f"])
            sign, digits, exponent = value.as_tuple()
            assert sign == 0 and exponent == -2 and len(digits) <= 5

    def test_keys_are_the_wire_keys(self) -> None:
        shape = MessageShape(
            "M", (FieldShape("user_id", Scalar("uuid"), alias="userId"),)
        )
        (payload,) = make_payloads(shape, 1)
        assert list(payload) == ["userId"]
        assert str(uuid.UUID(payload["userId"])) == payload["userId"]


ITEM = MessageShape("Item", (FieldShape("price", Scalar("float")),))
ROOT = MessageShape(
    "Order",
    (
        FieldShape("items", ListOf(ITEM)),
        FieldShape("attrs", MapOf(Scalar("str"), Scalar("int"))),
        FieldShape("gift", Scalar("bool")),
        FieldShape("note", Scalar("str"), nullable=True),
    ),
)


def order(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "items": [{"price": 1.5}, {"price": 2.0}],
        "attrs": {"a": 1},
        "gift": True,
        "note": None,
    }
    return base | changes


class TestDiff:
    """Differences are reported leaf by leaf with their dotted path."""

    def test_equal(self) -> None:
        assert diff(order(), order(), ROOT, "Order") == []

    def test_leaf_in_a_list(self) -> None:
        other = order(items=[{"price": 1.5}, {"price": 2.5}])
        assert diff(order(), other, ROOT, "Order") == [
            ("Order.items[1].price", "2.0 != 2.5")
        ]

    def test_list_length(self) -> None:
        other = order(items=[{"price": 1.5}])
        assert diff(order(), other, ROOT, "Order") == [
            ("Order.items", "2 items != 1 items")
        ]

    def test_map_keys_and_values(self) -> None:
        assert (
            diff(order(), order(attrs={"b": 1}), ROOT, "Order")[0][0] == "Order.attrs"
        )
        assert diff(order(), order(attrs={"a": 2}), ROOT, "Order") == [
            ("Order.attrs['a']", "1 != 2")
        ]

    def test_bool_is_not_int(self) -> None:
        assert diff(order(), order(gift=1), ROOT, "Order") == [
            ("Order.gift", "True != 1")
        ]

    def test_none_against_a_value(self) -> None:
        assert diff(order(), order(note=""), ROOT, "Order") == [
            ("Order.note", "None != ''")
        ]
