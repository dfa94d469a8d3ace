"""`--run-validators`: a team's after validators run in the derived Structs'
`__post_init__` (issue 29, item 3), and the reports say which codecs ran them.

msgspec-json, msgspec-msgpack, Avro and Cap'n Proto decode into the Struct and run
them; protobuf and FlatBuffers do not; before validators and ones that read
pydantic's `ValidationInfo` stay "not run by", with the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codec import CodecName, get_codec
from schemas.errors import DecodeError
from schemas.user.loader import UserSchema, from_class
from schemas.user.validators import not_run, ran_by
from schematool.cli import main as schema_main
from service.settings.worker import CodecSettings
from tests.fixtures.usermodels.parcels import Parcel

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "usermodels"


RUNNING: tuple[CodecName, ...] = ("msgspec-json", "msgspec-msgpack", "avro", "capnp")
SENT: dict[str, Any] = {"tracking": "ab12", "weight_kg": 1.23456, "note": "n"}


@pytest.fixture(scope="module")
def plain() -> UserSchema:
    return from_class(Parcel, "m:Parcel")


def decoded(codec_name: CodecName, schema: UserSchema, data: dict[str, Any]) -> Any:
    """`data` written by the codec on the model's plain Struct (nothing run, as a
    producer writes it), decoded by `schema`'s."""
    writer = get_codec(codec_name, from_class(Parcel, "m:Parcel"))
    return get_codec(codec_name, schema).decode(
        writer.encode(writer.from_builtins(data))
    )


class TestStructRunsThem:
    @pytest.mark.parametrize("codec", RUNNING)
    def test_values_as_pydantic_makes_them(
        self, codec: CodecName, plain: UserSchema
    ) -> None:
        back = decoded(codec, plain.with_validators(), SENT)
        assert back.tracking == "AB12"
        assert back.weight_kg == 1.23

    @pytest.mark.parametrize("codec", RUNNING)
    def test_what_the_model_validator_rejects_is_a_decode_error(
        self, codec: CodecName, plain: UserSchema
    ) -> None:
        held = {**SENT, "note": "on hold"}
        with pytest.raises(DecodeError, match="on hold is not sent"):
            decoded(codec, plain.with_validators(), held)

    def test_off_by_default_values_arrive_as_sent(self, plain: UserSchema) -> None:
        back = decoded("msgspec-json", plain, SENT)
        assert back.tracking == "ab12"
        assert back.weight_kg == 1.23456


class TestReported:
    def test_without_the_option_every_derived_codec_skips_them(
        self, plain: UserSchema
    ) -> None:
        lines = [n.line() for n in not_run(plain)]
        assert len(lines) == 5
        assert all("msgspec-json" in line for line in lines)
        assert ran_by(plain) == []

    def test_with_it_the_reports_say_which_codecs_ran_which(
        self, plain: UserSchema
    ) -> None:
        schema = plain.with_validators()
        ran = ran_by(schema)
        assert len(ran) == 3, ran
        assert ran[0].startswith(
            "Parcel.tracking: field_validator(mode='after') 'upper' run by "
            "msgspec-json, msgspec-msgpack, "
        )
        assert all(line.endswith("(--run-validators)") for line in ran)
        assert not any("with_info" in line for line in ran)
        by_what = {n.what: n for n in not_run(schema)}
        assert by_what["field_validator(mode='after') 'upper'"].codecs == (
            "protobuf",
            "flatbuffers",
        )
        info = by_what["field_validator(mode='after') 'with_info'"]
        assert "msgspec-json" in info.codecs
        assert "reads pydantic's ValidationInfo" in info.line()
        before = by_what["BeforeValidator 'str'"]
        assert "a before validator works on pydantic's input" in before.line()

    def test_check_prints_them(
        self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.syspath_prepend(str(FIXTURES))
        args = ["check", "parcels:Parcel", "--count", "5"]
        args += ["--codecs", "json+pydantic,msgspec-json"]
        assert schema_main([*args, "--run-validators"]) == 0
        out = capsys.readouterr().out
        assert "'upper' run by msgspec-json (--run-validators)" in out
        assert schema_main(args) == 0
        assert "(--run-validators)" not in capsys.readouterr().out


class TestWorkerSetting:
    def test_codec_worker_run_validators_builds_the_validating_codec(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.syspath_prepend(str(FIXTURES))
        wire = b'{"tracking": "ab12", "weight_kg": 1.0}'
        for run, tracking in ((True, "AB12"), (False, "ab12")):
            codec = CodecSettings.model_validate(
                {
                    "name": "msgspec-json",
                    "schema": "parcels:Parcel",
                    "run_validators": run,
                }
            ).build()
            assert codec.decode(wire).tracking == tracking
