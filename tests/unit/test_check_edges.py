"""`codec-schema check` meets the values a format may not carry faithfully whenever the
model allows them, and names each (codec, field) that changes one; never its own
artefact."""

from __future__ import annotations

import datetime
import struct
from pathlib import Path
from typing import Annotated, Any

import orjson
import pydantic
import pytest

from codec import codec_refusal
from schemas.errors import ConfigError
from schemas.shape import Constraints, FieldShape, ListOf, MessageShape, Scalar
from schemas.user.loader import from_class, load_schema
from schemas.user.synthetic import SynthOptions, make_payloads
from schematool.check import run_check

READING = "tests.fixtures.usermodels.lax:Reading"
METER = "tests.fixtures.usermodels.meter:MeterReading"


def _one(kind: Scalar | ListOf) -> MessageShape:
    return MessageShape("M", (FieldShape("v", kind),))


def _values(kind: Scalar | ListOf, count: int = 200) -> list[Any]:
    options = SynthOptions(edges=True)
    return [p["v"] for p in make_payloads(_one(kind), count, seed=1, options=options)]


def test_a_plain_datetime_gets_naive_and_aware_values() -> None:
    parsed = [datetime.datetime.fromisoformat(v) for v in _values(Scalar("datetime"))]
    naive = [d for d in parsed if d.tzinfo is None]
    offsets = {d.utcoffset() for d in parsed if d.tzinfo is not None}
    assert 0 < len(naive) < len(parsed)
    assert datetime.timedelta(0) in offsets and len(offsets) > 1


@pytest.mark.parametrize(("tz", "naive"), [(True, False), (False, True)])
def test_a_datetime_that_must_be_aware_or_naive_is_only_that(
    tz: bool, naive: bool
) -> None:
    values = _values(Scalar("datetime", Constraints(tz=tz)))
    parsed = [datetime.datetime.fromisoformat(v) for v in values]
    assert {d.tzinfo is None for d in parsed} == {naive}


def test_ints_pass_64_bits_when_the_bounds_allow() -> None:
    wide = _values(Scalar("int", Constraints(ge=0, le=2**70)))
    assert any(v >= 2**64 for v in wide)
    assert all(0 <= v <= 2**70 for v in wide)
    below = _values(Scalar("int", Constraints(ge=-(2**70), le=0, multiple_of=7)))
    assert any(v < -(2**63) for v in below)
    assert all(v % 7 == 0 for v in below)
    narrow = _values(Scalar("int"))  # unbounded: int64, as every form derives it
    assert all(-(2**63) <= v < 2**63 for v in narrow)


def test_some_floats_are_not_exact_in_32_bits() -> None:
    floats = _values(Scalar("float", Constraints(ge=0.0, le=1.0)))
    inexact = [v for v in floats if struct.unpack("f", struct.pack("f", v))[0] != v]
    assert len(inexact) == len(floats)
    assert any(len(repr(v)) > 10 for v in floats)  # all 53 bits, not 4 decimals
    assert all(0.0 <= v <= 1.0 for v in floats)


def test_load_payloads_hold_no_edge_values() -> None:
    """A benchmark's payloads are values every codec it runs carries."""
    shape = MessageShape(
        "M",
        (
            FieldShape("at", Scalar("datetime")),
            FieldShape("big", Scalar("int", Constraints(ge=0, le=2**70))),
            FieldShape("ratio", Scalar("float")),
        ),
    )
    for p in make_payloads(shape, 100, seed=1):
        assert p["at"].endswith("Z")
        assert p["big"] < 2**63
        assert p["ratio"] == round(p["ratio"], 4)


def test_a_set_has_several_distinct_members() -> None:
    for members in _values(
        ListOf(Scalar("int", Constraints(ge=0, le=3)), container="set")
    ):
        assert len(members) >= 2 and len(set(members)) == len(members)


def test_check_names_every_codec_that_changes_a_naive_datetime() -> None:
    report = run_check(load_schema(READING), count=30)
    changed = {(f.who, f.path) for f in report.not_carried.values()}
    assert report.ok and not report.findings  # listed as not carried, not failing
    assert changed == {
        (codec, "Reading.taken_at")
        for codec in ("protobuf", "flatbuffers", "capnp", "avro")
    }
    assert report.refused == {}


EDGES = """
import datetime
from pydantic import BaseModel, Field

class Edges(BaseModel):
    at: datetime.datetime
    big: int = Field(ge=0, le=2**70)
    ratio: float
    tags: frozenset[str]
"""


def test_check_agrees_where_a_codec_carries_every_edge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Naive and aware datetimes, ints past 64 bits, 53-bit floats and sets are
    carried by msgspec-json, json+pydantic and json-stdlib+pydantic: no
    disagreement is the check's own; the codecs that cannot carry them (orjson's
    64-bit ints included) are left out, named."""
    (tmp_path / "edges.py").write_text(EDGES)
    monkeypatch.syspath_prepend(str(tmp_path))
    schema = load_schema("edges:Edges")
    payloads = make_payloads(schema.shape, 60, options=SynthOptions(edges=True))
    assert any(p["big"] >= 2**64 for p in payloads)
    assert any(
        datetime.datetime.fromisoformat(p["at"]).tzinfo is None for p in payloads
    )
    report = run_check(schema, count=60)
    assert report.ok, report.findings
    assert {"msgspec-json", "json+pydantic", "json-stdlib+pydantic"} <= set(
        report.codecs
    )
    assert set(report.refused) >= {
        "orjson+pydantic",
        "protobuf",
        "flatbuffers",
        "capnp",
        "avro",
    }


class TestOrjsonInts:
    """orjson+pydantic alone of the pydantic codecs is refused an int bounded past
    64 bits: orjson writes none and reads one as a float, another int once
    validated."""

    def test_orjson_changes_a_wide_int(self) -> None:
        # The reason for the rule, as the library behaves today.
        assert orjson.loads(b"[1180591620717411303424]") == [1.1805916207174113e21]
        with pytest.raises(TypeError, match="64-bit"):
            orjson.dumps(2**70)

    def test_refused_with_one_line_naming_orjson(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        (tmp_path / "edges.py").write_text(EDGES)
        monkeypatch.syspath_prepend(str(tmp_path))
        schema = load_schema("edges:Edges")
        assert schema.refused["orjson+pydantic"] == (
            "Edges.big: its bounds allow ints past 64 bits, which orjson cannot carry",
        )
        for own in ("json+pydantic", "json-stdlib+pydantic"):
            assert codec_refusal(own, schema) is None
        with pytest.raises(ConfigError, match=r"orjson\+pydantic cannot carry"):
            run_check(schema, count=2, codecs=["orjson+pydantic"])

    @pytest.mark.parametrize(("ge", "le"), [(None, 2**63 - 1), (0, 2**64 - 1)])
    def test_an_int_within_64_bits_runs_on_orjson(
        self, ge: int | None, le: int
    ) -> None:
        fields: Any = {"n": (Annotated[int, pydantic.Field(ge=ge, le=le)], ...)}
        schema = from_class(pydantic.create_model("Narrow", **fields), "narrow")
        assert codec_refusal("orjson+pydantic", schema) is None
