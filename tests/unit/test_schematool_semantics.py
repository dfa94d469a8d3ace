"""`codec-schema check` and `show` say plainly which codec skips which check, and
`show` writes no file it does not say how to write."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec
import pytest

from schemas.shape import Choice, Constraints, FieldShape, MessageShape, Scalar
from schemas.user.loader import load_schema
from schemas.user.skipped_checks import CONVERTED, MSGSPEC, UNCHECKED, skipped_checks
from schematool.cli import main

PAYMENTS = "tests.fixtures.usermodels.payments:PaymentEvent"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


class TestSkippedChecks:
    """Every check the user's form makes that a derived codec skips, by field."""

    def test_every_skipped_check_is_listed(self) -> None:
        shape = MessageShape(
            "M",
            (
                FieldShape("kind", Choice(("a", "b"))),
                FieldShape("code", Scalar("str", Constraints(pattern="^x$"))),
                FieldShape("n", Scalar("int", Constraints(ge=0, le=10))),
                FieldShape("price", Scalar("decimal", Constraints(max_digits=5))),
            ),
            lax=True,
        )
        found = {(s.codecs, s.path, s.check) for s in skipped_checks(shape, "pydantic")}
        assert (UNCHECKED, "M.kind", "the allowed values (any string decodes)") in found
        assert (UNCHECKED, "M.code", "pattern='^x$'") in found
        assert (UNCHECKED, "M.n", "ge=0, le=10") in found
        # Without decimal_places the Decimal is text on Avro too: as msgspec.
        assert (CONVERTED, "M.price", "max_digits=5") in found
        assert any(c == MSGSPEC and "lax model" in text for c, _, text in found)
        assert any(
            p == "M" and "the required-field check on kind, code, n, price" in t
            for _, p, t in found
        )

    def test_a_uint64_field_lets_protobuf_check_ge_0(self) -> None:
        shape = MessageShape("M", (FieldShape("id", Scalar("int", Constraints(ge=0))),))
        assert [s for s in skipped_checks(shape, "pydantic") if s.path == "M.id"] == []

    def test_msgspec_source_skips_nothing_in_msgspec(self) -> None:
        shape = MessageShape("M", (FieldShape("n", Scalar("int", Constraints(le=5))),))
        skips = skipped_checks(shape, "msgspec")
        assert skips and not [s for s in skips if set(s.codecs) & set(MSGSPEC)]
        assert [s.codecs for s in skips if s.path == "M.n"] == [UNCHECKED]


class TestUnknownFields:
    """The unknown-field policy of the user's form is the derived forms' policy."""

    def test_extra_allow_is_listed(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        (tmp_path / "allowing_models.py").write_text(
            "import pydantic\n\n\nclass A(pydantic.BaseModel):\n"
            "    model_config = pydantic.ConfigDict(extra='allow')\n"
            "    a: int\n"
        )
        monkeypatch.syspath_prepend(str(tmp_path))
        schema = load_schema("allowing_models:A")
        assert not schema.struct.__struct_config__.forbid_unknown_fields
        [skip, avro] = [
            s for s in skipped_checks(schema.shape, "pydantic") if "allow" in s.check
        ]
        assert skip.codecs == (*MSGSPEC, "protobuf", "flatbuffers", "capnp")
        assert "extra='allow'" in skip.check
        assert avro.codecs == ("avro",) and "no place for them" in avro.check

    def test_a_proto_source_derives_forms_that_ignore_unknown_keys(
        self, tmp_path: Path
    ) -> None:
        proto = tmp_path / "ev.proto"
        proto.write_text('syntax = "proto3";\nmessage Ev { int64 id = 1; }\n')
        schema = load_schema(f"{proto}:Ev")
        struct: Any = msgspec.json.decode(b'{"id": 1, "new": 2}', type=schema.struct)
        assert struct.id == 1
        assert schema.model.model_validate_json(b'{"id": 1, "new": 2}').id == 1  # type: ignore[attr-defined]


class TestCheckCommand:
    """`check` passes on the payment model and lists what each codec skips."""

    def test_payments_pass_with_every_skip_listed(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        code, out = run(capsys, "check", PAYMENTS, "--count", "20")
        assert code == 0, out
        assert "all codecs agree" in out
        assert (
            "PaymentEvent.status: protobuf, flatbuffers skip the allowed values (any "
            "string" in out
        )
        assert (
            "PaymentEvent.amount.currency: protobuf, flatbuffers skip min_length=3"
            in out
        )
        assert (
            "PaymentEvent.amount.amount: msgspec-json, msgspec-msgpack, capnp skip "
            "max_digits=18, decimal_places=2" in out
        )
        # Avro's decimal logical type reads at the model's scale: places hold.
        assert "PaymentEvent.amount.amount: avro skips max_digits=18\n" in out
        assert (
            "PaymentEvent: capnp skips the required-field check on payment_id, "
            "user_id, merchant_id" in out
        )
        assert (
            "PaymentEvent: flatbuffers skips the required-field check on user_id, "
            "created_at (a missing number" in out
        )
        assert (
            "PaymentEvent: msgspec-json, msgspec-msgpack skip the coercions of your lax model"
            in out
        )

    def test_only_the_codecs_checked_are_named(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        code, out = run(
            capsys,
            "check",
            PAYMENTS,
            "--count",
            "5",
            "--codecs",
            "json+pydantic,msgspec-json",
        )
        assert code == 0
        assert "protobuf skips" not in out
        assert "PaymentEvent: msgspec-json skips the coercions of your lax model" in out


class TestShow:
    """`show` says the derived proto was built in memory and how to write it."""

    def test_no_file_claimed(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        cwd = os.getcwd()
        code, out = run(capsys, "show", PAYMENTS)
        assert code == 0
        assert (
            "no file written; `codec-schema derive " + PAYMENTS + " --form proto > "
            in out
        )
        assert "derived proto3 in " not in out
        assert not (Path(cwd) / "tests/fixtures/usermodels/payments.proto").exists()
        assert "ignores unknown fields; your aliases are its wire keys" in out


def test_check_leaves_out_a_codec_the_schema_refuses(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(
        str(Path(__file__).parents[1] / "fixtures" / "usermodels")
    )
    code, out = run(capsys, "check", "tallies:Tally", "--count", "5")
    # the default run notes what it left out; naming one is exit 2
    assert "  protobuf              left out: cannot carry 1 field(s)" in out
    assert (
        "  msgspec-msgpack: Tally.total: its bounds allow ints past 64 bits, which "
        "MessagePack cannot carry"
    ) in out
    assert "  msgspec-json          ok" in out
    # The payloads hold totals past 64 bits: orjson writes none (and reads one as
    # a float), so orjson+pydantic is left out too, and the others agree.
    assert (
        "  orjson+pydantic: Tally.total: its bounds allow ints past 64 bits, which "
        "orjson cannot carry"
    ) in out
    assert code == 0, out
    code, out = run(capsys, "check", "tallies:Tally", "--codecs", "protobuf")
    assert (code, out) == (2, "")
