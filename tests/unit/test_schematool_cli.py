"""`codec-schema show|derive|check`: output, exit codes and the codec adapter."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from codec import REAL_CODECS
from schemas.derive.proto_file import message_class
from schemas.errors import ConfigError
from schemas.user.loader import load_schema
from schematool.check import render, run_check
from schematool.cli import main
from schematool.codecs import WIRE_CODECS, user_codec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "usermodels"
SHIPMENT = f"{FIXTURES / 'shipment.proto'}:Shipment"


@pytest.fixture(autouse=True)
def _user_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixtures are a user's own modules, importable from PYTHONPATH."""
    monkeypatch.syspath_prepend(str(FIXTURES))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


class TestShow:
    """`show` names each form's origin and maps every field, nested ones too."""

    def test_order(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, out, _ = run(capsys, "show", "orders:Order")
        assert code == 0
        assert "pydantic  orders.Order, yours (lax: '42' is an int)" in out
        assert (
            "msgspec   Order, derived (strict, mutable, ignores unknown fields)" in out
        )
        lines = {line.split()[0]: line for line in out.splitlines()[6:]}
        assert "int32 quantity = 2" in lines["Order.items[].quantity"]
        assert "optional Address billing = 7" in lines["Order.billing"]
        assert (
            "map<int64, int64> stock_by_warehouse" in lines["Order.stock_by_warehouse"]
        )
        assert "google.protobuf.Timestamp placed_at" in lines["Order.placed_at"]
        assert "== the Channel member" in lines["Order.channel"]

    def test_strict_model_warns_about_two_pass_codecs(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        _, out, _ = run(capsys, "show", "strict_orders:Reading")
        taken_at = next(line for line in out.splitlines() if "Reading.taken_at" in line)
        assert "strict model: json-stdlib+pydantic and orjson+pydantic" in taken_at
        _, out, _ = run(capsys, "show", "strict_orders:LenientReading")
        assert "strict model:" not in out


class TestCheck:
    """`check` exits 0 when every codec agrees, 1 with the paths when one does not."""

    @pytest.mark.parametrize("spec", ["events:Event", SHIPMENT])
    def test_fixtures_agree(
        self, capsys: pytest.CaptureFixture[str], spec: str
    ) -> None:
        code, out, _ = run(capsys, "check", spec, "--count", "10", "--seed", "3")
        assert code == 0, out
        assert out.strip().endswith("all codecs agree")
        assert "checked 10 payloads" in out and "with 9 codecs" in out

    def test_a_plain_datetime_is_changed_by_the_formats_of_instants(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """`Order.placed_at` is a plain datetime: naive values are valid, and
        protobuf refuses them, FlatBuffers, Cap'n Proto and Avro read them back
        aware in UTC. The check's payloads hold some; each codec is named at the
        field, as not carried (what a replay counts), and the check passes: it is
        the format's limit, not a disagreement (issue 29's Done-when: a model with
        a plain datetime passes with exit 0)."""
        code, out, _ = run(capsys, "check", "orders:Order", "--count", "10")
        assert code == 0, out
        head = "values a codec's format cannot hold as sent"
        found = out.split(head)[1].split(":\n", 1)[1].split("\nall codecs agree")[0]
        assert [line.split(": payload")[0] for line in found.splitlines()] == [
            f"  {codec}: Order.placed_at"
            for codec in ("protobuf", "flatbuffers", "capnp", "avro")
        ]
        protobuf = next(line for line in found.splitlines() if "protobuf" in line)
        assert ": from_builtins failed: a datetime without a timezone" in protobuf
        assert "  avro                  ok, 1 field(s) not carried" in out
        assert "disagreements" not in out

    def test_strict_datetime_fails_the_two_pass_codecs(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        code, out, _ = run(capsys, "check", "strict_orders:Reading", "--count", "3")
        assert code == 1
        assert "json-stdlib+pydantic: Reading: payload 0: decode failed" in out
        assert "taken_at: datetime_type [3 times]" in out
        assert "  protobuf              ok" in out

    def test_value_differences_are_reported_by_path(self) -> None:
        schema = load_schema("orders:Order")
        # A protobuf form whose `discount` is a 32-bit float: values round.
        file = descriptor_pb2.FileDescriptorProto.FromString(
            schema.proto_file.SerializeToString()
        )
        order = next(m for m in file.message_type if m.name == "Order")
        next(
            f for f in order.field if f.name == "discount"
        ).type = descriptor_pb2.FieldDescriptorProto.TYPE_FLOAT
        broken = dataclasses.replace(schema, proto=message_class(file, "orders.Order"))
        report = run_check(broken, count=5, options=None)
        assert not report.ok
        finding = report.findings["protobuf", "Order.discount"]
        assert finding.detail.startswith("Order.discount: ")
        assert "(vs json+pydantic)" in finding.detail
        assert report.failing("protobuf") == 1
        assert report.failing("msgspec-json") == 0
        assert "protobuf: Order.discount: payload" in render(report)

    def test_codec_subset_and_sizes(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, out, _ = run(
            capsys,
            "check",
            "orders:Order",
            "--codecs",
            "msgspec-json,msgspec-msgpack",
            "--count",
            "2",
            "--list-len",
            "0,1",
            "--str-len",
            "1,2",
        )
        assert code == 0
        assert "with 2 codecs; reference: msgspec-json" in out

    @pytest.mark.parametrize(
        ("argv", "expected"),
        [
            (["check", "orders"], "expected MODULE:NAME"),
            (["check", "refused:NotAModel"], "is not a pydantic BaseModel"),
            (["show", "no_such_models:X"], "cannot import"),
            (["check", "orders:Order", "--codecs", "auto"], "unknown codec 'auto'"),
            (["check", "orders:Order", "--count", "0"], "--count: expected at least 1"),
            (["derive", "orders:Nope"], "'orders' has no 'Nope'"),
        ],
    )
    def test_errors_are_one_line_exit_2(
        self, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
    ) -> None:
        code, out, err = run(capsys, *argv)
        assert code == 2
        assert out == ""
        assert err.count("\n") == 1 and err.startswith("codec-schema: error: ")
        assert expected in err

    def test_bad_flag_is_exit_2(self, capsys: pytest.CaptureFixture[str]) -> None:
        with pytest.raises(SystemExit) as info:
            main(["check", "orders:Order", "--list-len", "3,1"])
        assert info.value.code == 2
        assert "expected 0 <= LO <= HI" in capsys.readouterr().err


class TestCodecAdapter:
    """The adapter builds every wire codec of the registry on a user's schema."""

    def test_same_names_as_the_registry(self) -> None:
        assert tuple(REAL_CODECS) == WIRE_CODECS

    def test_native_types(self) -> None:
        schema = load_schema("orders:Order")
        types = {name: user_codec(name, schema).native_type for name in WIRE_CODECS}
        assert types["json+pydantic"] is schema.model
        assert types["msgspec-msgpack"] is schema.struct
        assert types["protobuf"] is schema.proto

    def test_unknown_codec(self) -> None:
        with pytest.raises(ConfigError, match="unknown codec"):
            user_codec("auto", load_schema("orders:Order"))
