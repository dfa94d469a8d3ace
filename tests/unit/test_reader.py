"""The generic business logic of a user's schema: every field read, in every form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codec import REAL_CODECS, get_codec
from schemas.compare import read_native
from schemas.registry import resolve
from schemas.shape import ListOf, MapOf, MessageShape, TypeShape
from schemas.user.loader import UserSchema, load_schema
from schemas.user.synthetic import SynthOptions, make_payloads
from service.logic.builtin import Handler
from service.logic.field_reader import read_every_field

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "usermodels"
SPECS = [
    "shop:Order",
    "orders:Order",
    "events:Event",
    f"{FIXTURES / 'shipment.proto'}:Shipment",
]
FULL = SynthOptions(list_len=(1, 3), map_len=(1, 2), none_ratio=0.0)
"""Every optional field set and every list and map non-empty: every path exists."""


@pytest.fixture(autouse=True)
def _user_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixtures are a user's own modules, importable from PYTHONPATH."""
    monkeypatch.syspath_prepend(str(FIXTURES))


@pytest.fixture(params=SPECS, ids=lambda s: s.rsplit("/", 1)[-1])
def schema(request: pytest.FixtureRequest) -> UserSchema:
    return load_schema(request.param)


def values_in(value: Any, shape: TypeShape) -> int:
    """How many values `read_native` output holds (None counts as one)."""
    if value is None:
        return 1
    if isinstance(shape, MessageShape):
        return sum(values_in(value[f.name], f.type) for f in shape.fields)
    if isinstance(shape, ListOf):
        return sum(values_in(v, shape.item) for v in value)
    if isinstance(shape, MapOf):
        return sum(values_in(v, shape.value) for v in value.values())
    return 1


def paths_of(shape: MessageShape, path: str) -> set[str]:
    """Every field path of `shape`: `Order.items[].sku`, `Shipment.legs_by_id{}.km`."""
    out = set()
    for f in shape.fields:
        here = f"{path}.{f.name}"
        out.add(here)
        inner, suffix = f.type, ""
        while isinstance(inner, ListOf | MapOf):
            suffix += "[]" if isinstance(inner, ListOf) else "{}"
            inner = inner.item if isinstance(inner, ListOf) else inner.value
        if isinstance(inner, MessageShape):
            out |= paths_of(inner, here + suffix)
    return out


class Spy:
    """A decoded message that records each attribute read, by its field path."""

    def __init__(
        self, values: dict[str, Any], shape: MessageShape, path: str, seen: set[str]
    ) -> None:
        self._values, self._path, self._seen = values, path, seen
        self._fields = {f.name: f.type for f in shape.fields}

    def __getattr__(self, name: str) -> Any:
        path = f"{self._path}.{name}"
        self._seen.add(path)
        return _spied(self._values[name], self._fields[name], path, self._seen)


def _spied(value: Any, shape: TypeShape, path: str, seen: set[str]) -> Any:
    if value is None:
        return None
    if isinstance(shape, MessageShape):
        return Spy(value, shape, path, seen)
    if isinstance(shape, ListOf):
        return [_spied(v, shape.item, path + "[]", seen) for v in value]
    if isinstance(shape, MapOf):
        return {k: _spied(v, shape.value, path + "{}", seen) for k, v in value.items()}
    return value


def decoded(schema: UserSchema, codec: str, count: int = 30) -> list[Any]:
    """`count` seeded payloads, encoded and decoded by `codec`."""
    c = get_codec(codec, schema)  # type: ignore[arg-type]  # a wire codec key
    payloads = make_payloads(schema.shape, count, seed=11)
    return [c.decode(c.encode(c.from_builtins(p))) for p in payloads]


class TestEveryFieldRead:
    """The step enters every field, nested, listed and mapped ones too."""

    def test_every_path_of_the_schema_is_read(self, schema: UserSchema) -> None:
        read = read_every_field(schema.shape)
        payload = make_payloads(schema.shape, 1, seed=3, options=FULL)[0]
        codec = get_codec("msgspec-json", schema)
        native = read_native(codec.from_builtins(payload), schema.shape)
        seen: set[str] = set()
        read(Spy(native, schema.shape, schema.shape.name, seen))
        assert seen == paths_of(schema.shape, schema.shape.name)

    def test_a_missing_optional_message_is_not_entered(self) -> None:
        schema = load_schema("orders:Order")  # billing: Address | None
        payload = make_payloads(schema.shape, 1, seed=3, options=FULL)[0]
        codec = get_codec("msgspec-json", schema)
        native = read_native(codec.from_builtins(payload), schema.shape)
        seen: set[str] = set()
        spy = Spy({**native, "billing": None}, schema.shape, "Order", seen)
        read_every_field(schema.shape)(spy)
        assert "Order.billing" in seen and "Order.billing.city" not in seen
        assert "Order.shipping.city" in seen


class TestSameCountInEveryForm:
    """Each form reads as many values as the message holds: protobuf pays its reads."""

    @pytest.mark.parametrize("codec", REAL_CODECS)
    def test_count_matches_the_message(self, schema: UserSchema, codec: str) -> None:
        read = read_every_field(schema.shape)
        for obj in decoded(schema, codec):
            assert read(obj) == values_in(read_native(obj, schema.shape), schema.shape)

    def test_every_codec_counts_the_same(self, schema: UserSchema) -> None:
        read = read_every_field(schema.shape)
        counts = {c: [read(o) for o in decoded(schema, c)] for c in REAL_CODECS}
        assert len({tuple(v) for v in counts.values()}) == 1, counts


class TestHandlerOnUserSchema:
    """`aggregate` runs the read step on any form; `noop` has no step."""

    def test_aggregate_reads_objects_of_mixed_forms(self) -> None:
        schema = resolve("shop:Order")
        assert isinstance(schema, UserSchema)
        handler = Handler(schema, "aggregate")
        step = handler.step
        assert step is not None
        read = read_every_field(schema.shape)
        objects = [o for c in REAL_CODECS for o in decoded(schema, c, 5)]
        for obj in objects:
            step(obj)
        assert handler.totals == {0: float(sum(map(read, objects)))}

    def test_noop_and_work(self) -> None:
        schema = resolve("shop:Order")
        assert isinstance(schema, UserSchema)
        assert Handler(schema, "noop").step is None
        assert Handler(schema, "noop", work_us=1).step is not None
