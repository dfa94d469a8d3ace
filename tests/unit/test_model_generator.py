"""Random pydantic models (issue 29, item 8): every codec runs them or says why not.

Beside the hand-written fixtures, `tests.modelgen` builds pydantic v2 models from the
type catalogue (nesting, discriminated unions, aliases, constraints, validators)
with valid and edge values. For each model and every codec of the registry:

- json+pydantic and json-stdlib+pydantic always run it (orjson+pydantic too, but
  for an int bounded past 64 bits, which it is refused with a line naming orjson);
- every other codec is either refused, one "PATH: REASON" line per field naming
  its format (`codec.codec_refusal`, the path `codec-schema check` takes), or it
  takes every value the way a replay would send it (`loadgen.carry.transcode`:
  the JSON bytes as recorded for a JSON codec, transcoded for the others) and
  decodes it equal to json+pydantic's decode, or counts it as not carried for one
  of the reasons a format may have (a naive datetime where it holds instants, an
  int past 64 bits, a float narrowed to 32 bits, a set's members);
- `codec-schema check` runs the model to its report;
- and no step raises anything else.

The default run is short and derandomized (`model-gen-ci`); `MODEL_GEN_PROFILE=long`
(`make fuzz-models`) runs `model-gen-long`: many more models, random.
"""

from __future__ import annotations

import datetime
import os
from typing import Any, Final

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from codec import REAL_CODECS, Codec, codec_refusal, get_codec
from codec.base import JSON
from loadgen.carry import transcode
from schemas.compare import diff, read_native
from schemas.formats import DERIVED_CODECS, FORMAT_NAMES, ORJSON
from schemas.user.loader import UserSchema, from_class
from schematool.check import refusal_lines, render, run_check
from tests.modelgen import Gen, models

_SLOW_OK: Final = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile(
    "model-gen-ci",
    max_examples=12,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=_SLOW_OK,
)
settings.register_profile(
    "model-gen-long", max_examples=1_500, deadline=None, suppress_health_check=_SLOW_OK
)
_LONG: Final = os.environ.get("MODEL_GEN_PROFILE", "ci") == "long"
PROFILE: Final = settings.get_profile("model-gen-long" if _LONG else "model-gen-ci")
pytestmark = pytest.mark.timeout(7_200 if _LONG else 120)

ALWAYS: Final = ("json+pydantic", "json-stdlib+pydantic")
"""The pydantic codecs no model refuses."""
NOT_CARRIED: Final = (
    "a datetime without a timezone (",
    "an int wider than 64 bits (",
    "narrows to 32 bits",
    "a set whose members ",
    "a datetime map key without a timezone (",
)
"""What a replay may count as not carried: values a format has no faithful form
for (`loadgen.carry.lost`); anything else is a value sent changed or a crash."""
FORMAT_WORDS: Final[dict[str, tuple[str, ...]]] = {
    **{codec: (fmt,) for codec, fmt in FORMAT_NAMES.items()},
    "msgspec-msgpack": ("msgspec", "MessagePack"),
    ORJSON: ("orjson",),
}


KNOWN: Final[tuple[str, ...]] = ()
"""Findings reported and not fixed yet, each pinned by a strict xfail below (none
now: pydantic's `P1Y` for 365 days is read by the derived Structs' `IsoDuration`)."""


def refusal_problems(codec: str, why: str, everyone: set[str]) -> list[str]:
    """What is wrong with a codec's refusal text: each line one "PATH: REASON"
    naming the format it is about (or one line every derived codec shares: a
    reason about the model's own JSON wire, as for `bytes`)."""
    problems = []
    for line in refusal_lines(why):
        path, sep, reason = line.partition(": ")
        if not sep or not path or not reason.strip() or "\n" in line:
            problems.append(f"not one PATH: REASON line: {line!r}")
        elif line in everyone:
            continue
        elif not any(w.lower() in reason.lower() for w in FORMAT_WORDS[codec]):
            problems.append(f"the reason names no {FORMAT_WORDS[codec][0]}: {line!r}")
    return problems


def carry_problems(
    schema: UserSchema, codec: str, sent: bytes, reference: dict[str, Any]
) -> list[str]:
    """What goes wrong when a replay sends one message's JSON bytes to `codec`."""
    source: Codec[Any] = get_codec("json+pydantic", schema)
    target: Codec[Any] = get_codec(codec, schema)  # type: ignore[arg-type]
    shape = schema.shape
    value: bytes | None = sent  # sent as recorded
    if target.content_type != JSON:
        value, why = transcode(source, target, sent, schema.name, shape)
        if value is None:
            if any(reason in why for reason in NOT_CARRIED):
                return []
            return [f"{codec}: not carried for no format's reason: {why}"]
    assert value is not None
    try:
        back = target.decode(value)
        again = target.decode(target.encode(back))
    except Exception as exc:  # a finding, whatever raised it
        return [f"{codec}: {type(exc).__name__}: {exc}"]
    return [
        f"{codec}: {step}: {path}: {what}"
        for step, decoded in (("decode", back), ("own round trip", again))
        for path, what in diff(reference, read_native(decoded, shape), shape, "")
    ]


def model_problems(gen: Gen, inputs: list[dict[str, Any]]) -> list[str]:
    """Every broken invariant for one model and its input values."""
    model: type[pydantic.BaseModel] = gen.annotation
    schema = from_class(model, f"generated:{model.__name__}")  # never wholesale
    pyd: Codec[Any] = get_codec("json+pydantic", schema)
    messages = [pyd.encode(model.model_validate(v)) for v in inputs]
    problems: list[str] = []
    refusals = {codec: codec_refusal(codec, schema) for codec in REAL_CODECS}
    shared = [set(refusal_lines(refusals[c] or "x")) for c in DERIVED_CODECS]
    everyone = set.intersection(*shared)
    for codec, why in refusals.items():
        if why is not None:
            if codec in ALWAYS:
                problems.append(f"{codec} refused a model pydantic validates: {why}")
            problems += refusal_problems(codec, why, everyone)
            continue
        for sent in messages:
            reference = read_native(pyd.decode(sent), schema.shape)
            problems += carry_problems(schema, codec, sent, reference)
    report = run_check(schema, count=3)
    render(report)
    for f in report.findings.values():
        if all(side in (*ALWAYS, ORJSON) for side in f.who.split(" -> ")):
            problems.append(f"check: the pydantic codecs disagree: {f.who}: {f.detail}")
    return [p for p in problems if not any(known in p for known in KNOWN)]


@settings(PROFILE)
@given(data=st.data())
def test_every_codec_runs_a_random_model_or_says_why(data: st.DataObject) -> None:
    gen = data.draw(models(), label="model")
    inputs = data.draw(st.lists(gen.values, min_size=1, max_size=3), label="values")
    assert model_problems(gen, inputs) == []


def test_a_timedelta_of_a_year_is_read_by_msgspec() -> None:
    """The generator's former finding: pydantic writes 365 days as `P1Y`, which
    msgspec's own parser rejects; the derived Struct reads it as pydantic does."""
    model = pydantic.create_model("Hold", hold_for=(datetime.timedelta, ...))
    schema = from_class(model, "generated:Hold")
    sent = get_codec("json+pydantic", schema).encode(
        model(hold_for=datetime.timedelta(days=365))
    )
    assert sent == b'{"hold_for":"P1Y"}'
    reference = read_native(
        get_codec("json+pydantic", schema).decode(sent), schema.shape
    )
    for codec in ("msgspec-json", "msgspec-msgpack", "capnp", "flatbuffers"):
        assert carry_problems(schema, codec, sent, reference) == [], codec
