"""A team's production model (tracking:ShipmentEvent): never refused wholesale.

The pydantic and msgspec codecs run the model (msgspec carries the address and URL
as text); each other codec is refused for the fields its format cannot carry, all
listed in one pass with the format named; validators are reported as not run, never
refused; a codec named on the command line that cannot carry the model is exit 2
with those lines, before Kafka.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec
import pytest

from abrunner.cli import _FLAGS, build_parser, plan_from_settings
from abrunner.config import TOOL, AbSettings
from abrunner.plan import Plan
from codec import codec_refusal
from loadgen.config import load_settings as loadgen_settings
from loadgen.source import synthetic_source
from schemas.errors import ConfigError
from schemas.formats import (
    DERIVED_CODECS,
    FORMAT_NAMES,
    MSGSPEC_CODECS,
    PYDANTIC_CODECS,
)
from schemas.user.loader import load_schema
from schemas.user.validators import not_run
from schematool.check import run_check
from schematool.cli import main as schema_main
from service.cli import main as worker_main
from service.settings.cli_flags import load_from_args
from service.settings.worker import load_settings as worker_settings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "usermodels"
SPEC = "tracking:ShipmentEvent"
UNREACHABLE = "127.0.0.1:1"

TAGGED = """
import datetime
from typing import Literal

import pydantic


class Scanned(pydantic.BaseModel):
    kind: Literal["scanned"]
    at: datetime.date
    where: tuple[float, float]


class Lost(pydantic.BaseModel):
    kind: Literal["lost"]
    reason: str


class Record(pydantic.BaseModel):
    tags: frozenset[str]
    event: Scanned | Lost = pydantic.Field(discriminator="kind")
    seen: pydantic.NaiveDatetime | None = None
"""


def ab_plan(*argv: str) -> Plan:
    args = build_parser().parse_args(list(argv))
    return plan_from_settings(load_from_args(AbSettings, TOOL, args, _FLAGS, {}))


@pytest.fixture(autouse=True)
def _user_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixtures are a user's own modules, importable from PYTHONPATH."""
    monkeypatch.syspath_prepend(str(FIXTURES))
    for name in list(os.environ):
        if name.startswith(("WORKER_", "KAFKA_", "LOADGEN_", "AB_")):
            monkeypatch.delenv(name)


class TestCheck:
    """`codec-schema check` on the model: exit 0, everything listed in one pass."""

    def test_exit_0_with_every_refusal_and_validator(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert schema_main(["check", SPEC, "--count", "20"]) == 0
        out = capsys.readouterr().out
        for codec in PYDANTIC_CODECS:
            assert f"  {codec:<20}  ok" in out
        section = out.split("left out, a line per codec and field", 1)[1]
        refused: list[str] = []  # the indented lines of the "left out" section
        for line in section.splitlines()[1:]:
            if not line.startswith("  "):
                break
            refused.append(line.strip())
        assert not any(line.startswith(MSGSPEC_CODECS) for line in refused)
        by_codec: dict[str, list[str]] = {}
        for line in refused:
            codec, _, rest = line.partition(": ")
            if codec in DERIVED_CODECS:
                by_codec.setdefault(codec, []).append(rest)
        assert sorted(by_codec) == sorted(set(DERIVED_CODECS) - set(MSGSPEC_CODECS))
        for codec, lines in by_codec.items():
            fmt = FORMAT_NAMES[codec]
            others = {FORMAT_NAMES[c] for c in DERIVED_CODECS} - {fmt, "protobuf"}
            for line in lines:  # each reason names its own format, none another's
                assert fmt in line or codec == "protobuf", line
                assert not any(o in line for o in others if o != "msgspec"), line
        # Union members and nested models are listed, not hidden behind the union.
        assert (
            "ShipmentEvent.payload<OutForDelivery>.expected_on: no protobuf type "
            "decodes to a date (a Timestamp is an instant)" in by_codec["protobuf"]
        )
        assert "msgspec-json: ShipmentEvent.source_ip: changed: carried as str" in out
        assert len(by_codec["protobuf"]) == 6 and len(by_codec["avro"]) == 3
        # The union itself is carried by every binary format (issue 29 item 2),
        # the address and URL by protobuf and FlatBuffers as their text.
        assert not [line for line in refused if "ShipmentEvent.payload:" in line]
        assert not [line for line in refused if "source_ip" in line]
        assert "all codecs agree (4 left out above)" in out
        for what in (
            "ShipmentEvent.tracking_number: field_validator(mode='after') "
            "'upper_tracking' not run by msgspec-json",
            "ShipmentEvent: model_validator(mode='after') 'tags_are_short' not run by",
            "ShipmentEvent: computed_field 'is_final' not run by",
            "ShipmentEvent.payload<Delivered>.signed_by: AfterValidator 'strip' not run",
        ):
            assert what in out

    def test_pydantic_codecs_named_are_accepted(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        argv = ["check", SPEC, "--codecs", ",".join(PYDANTIC_CODECS), "--count", "10"]
        assert schema_main(argv) == 0
        assert "all codecs agree" in capsys.readouterr().out

    def test_a_named_codec_that_cannot_carry_it_is_exit_2(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        argv = ["check", SPEC, "--codecs", "json+pydantic,msgspec-json,avro"]
        assert schema_main(argv) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        lines = captured.err.splitlines()
        assert lines[0].startswith("codec-schema: error: --codecs: avro cannot ")
        assert (
            "  avro: ShipmentEvent.tags: Avro has no set type: its array decodes to "
            "a list, with order and duplicates"
        ) in lines
        assert not any(line.startswith("  msgspec-json: ") for line in lines)
        assert len([line for line in lines if line.startswith("  avro: ")]) == 3


class TestStartUp:
    """codec-worker, codec-loadgen and codec-ab agree: the pydantic codecs run the
    model; a codec that cannot carry it is refused with the same lines."""

    @pytest.mark.parametrize("codec", PYDANTIC_CODECS)
    def test_worker_takes_the_users_own_model(self, codec: str) -> None:
        s = worker_settings({"codec": {"schema": SPEC, "name": codec}})
        built = s.codec.build()
        assert built.native_type is load_schema(SPEC).model or (
            built.native_type.__name__ == "ShipmentEvent"
            and built.native_type.__module__ == "tracking"
        )

    @pytest.mark.parametrize("codec", MSGSPEC_CODECS)
    def test_worker_takes_the_derived_struct(self, codec: str) -> None:
        s = worker_settings({"codec": {"schema": SPEC, "name": codec}})
        built = s.codec.build().native_type
        assert issubclass(built, msgspec.Struct)
        assert (built.__module__, built.__name__) == (
            "schemas.derived",
            "ShipmentEvent",
        )

    def test_worker_refuses_protobuf_naming_the_fields(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        argv = ["--schema", SPEC, "--codec", "protobuf"]
        assert worker_main([*argv, "--bootstrap-servers", UNREACHABLE]) == 2
        err = capsys.readouterr().err
        assert "protobuf cannot carry 6 fields of tracking:ShipmentEvent" in err
        assert "ShipmentEvent.tags: protobuf has no set type" in err
        assert "cannot reach" not in err

    @pytest.mark.parametrize("codec", PYDANTIC_CODECS)
    def test_loadgen_makes_payloads_pydantic_validates(self, codec: str) -> None:
        s = loadgen_settings({"schema": SPEC, "codec": codec})
        values = synthetic_source(s).values
        assert len(values) > 0

    def test_loadgen_refuses_protobuf(self) -> None:
        with pytest.raises(ConfigError, match="protobuf cannot carry 6 fields"):
            loadgen_settings({"schema": SPEC, "codec": "protobuf"})

    def test_ab_default_set_leaves_out_with_a_note(self) -> None:
        p = ab_plan("--schema", SPEC)
        assert p.codecs == (*PYDANTIC_CODECS, *MSGSPEC_CODECS)
        left = dict(p.left_out)
        assert "ShipmentEvent.tags: protobuf has no set type" in left["protobuf"]
        assert sorted(left) == ["protobuf"]  # the default set has no binary others

    def test_ab_named_codec_that_cannot_carry_it_is_an_error(self) -> None:
        with pytest.raises(ConfigError, match="--codecs: protobuf cannot carry 6"):
            ab_plan("--schema", SPEC, "--codecs", "json+pydantic,protobuf")


class TestTaggedUnion:
    """A discriminated union on a Literal tag is a msgspec tagged union: msgspec
    carries the model (date, tuple, frozenset, naive datetime natively)."""

    @pytest.fixture
    def spec(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
        (tmp_path / "scans.py").write_text(TAGGED)
        monkeypatch.syspath_prepend(str(tmp_path))
        return "scans:Record"

    def test_msgspec_decodes_the_member_the_tag_names(self, spec: str) -> None:
        schema = load_schema(spec)
        assert codec_refusal("msgspec-json", schema) is None
        assert codec_refusal("msgspec-msgpack", schema) is None
        data = b'{"tags":["a"],"event":{"kind":"lost","reason":"gone"}}'
        record: Any = msgspec.json.decode(data, type=schema.struct)
        assert type(record.event).__name__ == "Lost" and record.event.kind == "lost"
        assert "Record.event:" not in (codec_refusal("protobuf", schema) or "")

    def test_check_agrees_for_pydantic_and_msgspec(self, spec: str) -> None:
        codecs = [*PYDANTIC_CODECS, "msgspec-json", "msgspec-msgpack"]
        report = run_check(load_schema(spec), count=40, codecs=codecs)
        assert report.codecs == tuple(codecs)
        assert report.findings == {} and report.explained == {}

    def test_not_run_is_empty_without_validators(self, spec: str) -> None:
        assert not_run(load_schema(spec)) == []
