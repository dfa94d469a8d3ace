"""`codec-schema derive`: the source text defines the same forms as the run-time ones."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from schemas.derive.msgspec_structs import msgspec_bounds
from schemas.prototext.parser import parse_proto
from schemas.shape import Constraints, MessageShape, describe, messages
from schemas.user.loader import UserSchema, from_class, load_schema
from schematool.cli import derive_text, main
from schematool.protosource import proto_source
from schematool.pysource import msgspec_source, pydantic_source

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "usermodels"
SPECS = [
    "orders:Order",
    "events:Event",
    f"{FIXTURES / 'shipment.proto'}:Shipment",
    "payments:PaymentEvent",
]


@pytest.fixture(autouse=True)
def _user_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixtures are a user's own modules, importable from PYTHONPATH."""
    monkeypatch.syspath_prepend(str(FIXTURES))


@pytest.fixture(params=SPECS, ids=lambda s: s.rsplit("/", 1)[-1])
def schema(request: pytest.FixtureRequest) -> UserSchema:
    return load_schema(request.param)


def run_source(source: str, name: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Execute derived source as module `name` and return its namespace."""
    module = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, module)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)  # noqa: S102  (our own generated text)
    return module


def summary(shape: MessageShape, *, msgspec: bool = False) -> list[tuple[Any, ...]]:
    """Every field of every message: what a form must agree on (for a msgspec
    form, the bounds msgspec can check: `msgspec_bounds`)."""
    return [
        (
            msg.name,
            f.name,
            describe(f.type),
            _bounds(f.type, msgspec=msgspec),
            f.nullable,
            repr(f.default),
            f.default_factory,
            f.alias,
            msg.forbid_unknown,
        )
        for msg in messages(shape)
        for f in msg.fields
    ]


def _bounds(shape: Any, *, msgspec: bool) -> Constraints | None:
    """Compared by value: `ge=0` equals `ge=0.0` (typing caches `Annotated` by
    equality, so a form read after another model's `confloat(ge=0)` may hold 0)."""
    constraints: Constraints | None = getattr(shape, "constraints", None)
    if constraints is None or not msgspec:
        return constraints
    kept, _ = msgspec_bounds(constraints, getattr(shape, "kind", ""))
    return Constraints(**kept)


class TestPythonSource:
    """The printed Structs and models read back into the same shape."""

    def test_msgspec_source(
        self, schema: UserSchema, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        module = run_source(msgspec_source(schema), "derived_structs", monkeypatch)
        again = from_class(getattr(module, schema.shape.name), "again")
        assert summary(again.shape) == summary(schema.shape, msgspec=True)

    def test_pydantic_source(
        self, schema: UserSchema, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        module = run_source(pydantic_source(schema), "derived_models", monkeypatch)
        model = getattr(module, schema.shape.name)
        assert model.model_config.get("strict") is True
        assert summary(from_class(model, "again").shape) == summary(schema.shape)

    def test_imports_only_what_is_used(self, schema: UserSchema) -> None:
        text = msgspec_source(schema)
        assert "import msgspec" in text
        assert ("import datetime" in text) == ("datetime.datetime" in text)
        assert ("Literal" in text) == ("Literal[" in text)


class TestProtoSource:
    """The printed `.proto` parses back to the very file the classes were built from."""

    def test_round_trip(self, schema: UserSchema) -> None:
        text = proto_source(schema.proto_file, "a comment\non two lines")
        assert text.startswith('// a comment\n// on two lines\nsyntax = "proto3";')
        again = parse_proto(text, schema.proto_file.name)
        if schema.source == "proto":  # the user's own file: options are not printed
            assert [m.name for m in again.message_type] == [
                m.name for m in schema.proto_file.message_type
            ]
        else:
            assert again == schema.proto_file


class TestDeriveCommand:
    """`derive` prints one committable form, or all under headings."""

    def test_one_form(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["derive", "orders:Order", "--form", "proto"]) == 0
        text = capsys.readouterr().out
        assert (
            parse_proto(text, "orders.proto") == load_schema("orders:Order").proto_file
        )

    def test_all_forms(self) -> None:
        text = derive_text(load_schema("events:Event"), "all")
        assert "# ===== msgspec =====\n# msgspec: your own form (events:Event)" in text
        assert "# ===== pydantic =====" in text and "class Event(BaseModel):" in text
        assert "// ===== proto =====" in text and "message Event {" in text
