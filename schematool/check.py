"""`codec-schema check`: every wire codec decodes the same payloads to equal values.

For each synthetic payload, each codec builds its native object, encodes and decodes
it (its own round trip); then each JSON codec also decodes the bytes every other JSON
codec wrote (what a shadow decode or a mixed topic does during a migration). Every
decoded object is read field by field and compared with the reference: the decode of
the user's own form (json+pydantic for a model, msgspec-json for a Struct, protobuf
for a `.proto`), or the first codec that decoded at all.

Before any payload, every (codec, field) a format cannot carry is listed, one line
each, union members and nested models included: in the default run those codecs
are left out with that note; codecs named with `--codecs` must all carry the schema,
or the check stops there (a `ConfigError` naming every line). The code of the model
a codec does not run (validators, computed fields: `schemas.user.validators`), the
checks it skips and the fields it carries by conversion (`schemas.carried`: "changed:
carried as str") are listed as facts, never as failures.

The payloads are the team's model's own (`schemas.user.synthetic`: each validated
by the model and written as its producer writes it), so the pydantic codecs agree with
themselves, except when the model does not read back what it writes: that is said
in those words ("not round-trip stable"), once per pydantic codec, and no codec
is compared on that payload. The payloads hold the values a format may not carry
faithfully whenever the model allows them (`schemas.user.synthetic`: naive and aware datetimes, ints past 64 bits,
floats not exact in 32 bits, sets of several members), so a codec that changes one
is listed at that field; one that refuses one (protobuf's naive Timestamp) at the
field its error names, by attribute (`schematool.failures`). A naive datetime a
format of instants refuses or reads back in UTC is what a replay counts as not
carried (`loadgen.carry`): the check lists it, a line per codec and field, in the
replay's words, as a fact of the format (`not_carried`), not a disagreement; any
other difference is one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Final

from codec import Codec, codec_refusal
from codec.base import JSON
from schemas.carried import carried
from schemas.compare import diff, read_native
from schemas.errors import ConfigError
from schemas.formats import PYDANTIC_CODECS
from schemas.user.loader import UserSchema
from schemas.user.model.producer import round_trip
from schemas.user.skipped_checks import Skipped, skipped_checks
from schemas.user.synthetic import SynthOptions, make_payloads
from schemas.user.validators import not_run, ran_by
from schematool.check_report import CheckReport, Finding, render
from schematool.codecs import WIRE_CODECS, user_codec
from schematool.failures import NAIVE, error_text, failed_at, naive_read_back

_REFERENCE: Final = {
    "pydantic": "json+pydantic",
    "msgspec": "msgspec-json",
    "proto": "protobuf",
}


def run_check(
    schema: UserSchema,
    *,
    count: int = 50,
    seed: int = 0,
    options: SynthOptions | None = None,
    codecs: Sequence[str] | None = None,
) -> CheckReport:
    """Decode `count` seeded payloads of `schema` with every codec and compare.

    Args:
        schema: the user's schema.
        count: payloads to check.
        seed: their seed.
        options: their sizes.
        codecs: the codecs named on the command line; None: every wire codec,
            leaving out (with a note) those that cannot carry the schema.

    Raises:
        ConfigError: for an unknown codec name, a named codec that cannot carry
            the schema (every such codec and field, a line each), or an
            unsynthesizable field.
    """
    asked = tuple(WIRE_CODECS if codecs is None else codecs)
    refused = {
        name: refusal_lines(why)
        for name in asked
        if name in WIRE_CODECS and (why := codec_refusal(name, schema)) is not None
    }
    if codecs is not None and refused:
        raise ConfigError(_named_refusal(schema.name, refused))
    built = {name: user_codec(name, schema) for name in asked if name not in refused}
    if not built:
        raise ConfigError("--codecs: name at least one codec")
    preferred = _REFERENCE[schema.source]
    reference = preferred if preferred in built else next(iter(built))
    report = CheckReport(schema.name, tuple(built), count, seed, reference)
    report.refused = refused
    report.changed = {
        codec: lines
        for codec, lines in carried(schema.shape, schema.source).items()
        if codec in built
    }
    report.not_run = not_run(schema, asked)
    report.ran = ran_by(schema, [c for c in asked if c in built])
    report.skipped = [
        Skipped(tuple(c for c in s.codecs if c in built), s.path, s.check)
        for s in skipped_checks(schema.shape, schema.source)
        if any(c in built for c in s.codecs)
    ]
    edges = replace(options or SynthOptions(), edges=True)
    payloads = make_payloads(
        schema.shape, count, seed=seed, options=edges, stable=False
    )
    for index, payload in enumerate(payloads):
        if _round_trip(schema, built, payload, index, report):
            continue
        _check_payload(schema, built, payload, index, report)
    return report


def _round_trip(
    schema: UserSchema,
    built: dict[str, Codec[Any]],
    payload: dict[str, Any],
    index: int,
    report: CheckReport,
) -> bool:
    """True (each pydantic codec's finding recorded) when the team's model does not
    read back `payload`, what it wrote: no codec can then agree with it."""
    model = schema.shape.source
    if schema.source != "pydantic" or not isinstance(model, type):
        return False
    found = round_trip(model, payload)
    if found is None:
        return False
    for name in built:
        if name in PYDANTIC_CODECS:
            report.add(name, found.where, found.line(), index)
    report.unread += 1
    return True


def refusal_lines(why: str) -> list[str]:
    """The "PATH: REASON" lines of a codec's refusal (`codec.codec_refusal`)."""
    head, *rest = why.splitlines()
    return [line.strip() for line in rest] or [head.removeprefix("schema error: ")]


def _named_refusal(schema: str, refused: dict[str, list[str]]) -> str:
    lines = [f"{codec}: {line}" for codec, found in refused.items() for line in found]
    names = ", ".join(refused)
    return (
        f"--codecs: {names} cannot carry {schema} ({len(lines)} fields; leave "
        "them out, or change the fields):" + "".join(f"\n  {line}" for line in lines)
    )


def _check_payload(
    schema: UserSchema,
    built: dict[str, Codec[Any]],
    payload: dict[str, Any],
    index: int,
    report: CheckReport,
) -> None:
    shape, root = schema.shape, schema.shape.name
    wire: dict[str, bytes] = {}
    read: dict[str, dict[str, Any]] = {}
    for name, codec in built.items():
        step = "from_builtins"
        try:
            obj = codec.from_builtins(payload)
            step = "encode"
            wire[name] = codec.encode(obj)
            step = "decode"
            read[name] = read_native(codec.decode(wire[name]), shape)
        except Exception as exc:  # any failure is a finding, whatever raised it
            where, why = failed_at(exc, payload, shape, name)
            report.add(
                name, where, f"{step} failed: {why}", index, carried=why != NAIVE
            )
    if not read:
        return
    ref = report.reference if report.reference in read else next(iter(read))
    for name, value in read.items():
        for path, what in diff(read[ref], value, shape, root):
            below = path.removeprefix(root)
            naive = naive_read_back(read[ref], value, below, name)
            said = naive or what
            report.add(
                name, path, f"{path}: {said} (vs {ref})", index, carried=not naive
            )
    json_codecs = [n for n in wire if built[n].content_type == JSON]
    for writer in json_codecs:
        for reader in json_codecs:
            if writer != reader:
                _cross(
                    built[reader],
                    wire[writer],
                    f"{writer} -> {reader}",
                    read[ref],
                    schema,
                    index,
                    report,
                )


def _cross(
    reader: Codec[Any],
    data: bytes,
    who: str,
    expected: dict[str, Any],
    schema: UserSchema,
    index: int,
    report: CheckReport,
) -> None:
    root = schema.shape.name
    try:
        value = read_native(reader.decode(data), schema.shape)
    except Exception as exc:  # any failure is a finding, whatever raised it
        report.add(who, root, f"decode failed: {error_text(exc)}", index)
        return
    for path, what in diff(expected, value, schema.shape, root):
        report.add(who, path, f"{path}: {what}", index)


__all__ = ["CheckReport", "Finding", "refusal_lines", "render", "run_check"]
