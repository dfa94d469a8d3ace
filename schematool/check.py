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

The payloads hold the values a format may not carry faithfully whenever the model
allows them (`schemas.user.synthetic`: naive and aware datetimes, ints past 64 bits,
floats not exact in 32 bits, sets of several members), so a codec that changes one
is listed at that field; one that refuses one (protobuf's naive Timestamp) at the
field its error names, by attribute (`schematool.failures`). A naive datetime a
format of instants refuses or reads back in UTC is what a replay counts as not
carried (`loadgen.carry`): the check lists it, a line per codec and field, in the
replay's words, as a fact of the format (`not_carried`), not a disagreement; any
other difference is one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from codec import Codec, codec_refusal
from codec.base import JSON
from schemas.carried import carried
from schemas.compare import diff, read_native
from schemas.errors import ConfigError
from schemas.user.loader import UserSchema
from schemas.user.skipped_checks import Skipped, skipped_checks
from schemas.user.synthetic import SynthOptions, make_payloads
from schemas.user.validators import NotRun, not_run, ran_by
from schematool.codecs import WIRE_CODECS, user_codec
from schematool.failures import NAIVE, error_text, failed_at, naive_read_back

_REFERENCE: Final = {
    "pydantic": "json+pydantic",
    "msgspec": "msgspec-json",
    "proto": "protobuf",
}


@dataclass(slots=True)
class Finding:
    """One way a codec (or a writer -> reader pair) disagreed, with how often.

    Attributes:
        who: a codec name, or `writer -> reader` for bytes decoded across codecs.
        path: the field's path with indices and keys generalised (`Order.items[]`).
        detail: the first occurrence: its exact path and the two values.
        payload: the index of the first payload it happened on.
        count: how many times it happened over all payloads.
    """

    who: str
    path: str
    detail: str
    payload: int
    count: int = 1


@dataclass(slots=True)
class CheckReport:
    """What `run_check` compared and every disagreement it found."""

    schema: str
    codecs: tuple[str, ...]
    payloads: int
    seed: int
    reference: str
    findings: dict[tuple[str, str], Finding] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    """Checks your own form makes on decode that a codec skips (not a failure)."""
    not_run: list[NotRun] = field(default_factory=list)
    """Code of your model a codec does not run (not a failure)."""
    ran: list[str] = field(default_factory=list)
    """Validators a derived codec runs (`--run-validators`), a line each."""
    explained: dict[tuple[str, str], Finding] = field(default_factory=dict)
    """Differences on a field whose validator the codec does not run (`not_run`):
    what that code changes, shown, not counted as a disagreement."""
    refused: dict[str, list[str]] = field(default_factory=dict)
    """Codecs of the default run that cannot carry the schema, with one
    "PATH: REASON" line per field (noted, not a failure: name the codec with
    --codecs to make it one)."""
    changed: dict[str, list[str]] = field(default_factory=dict)
    """Codecs that ran and carry a field by conversion, "PATH: carried as FORM"
    a line per field (`schemas.carried`; a fact, not a failure)."""
    not_carried: dict[tuple[str, str], Finding] = field(default_factory=dict)
    """Values a codec's format cannot hold as sent (a naive datetime where it holds
    instants), by codec and field: what a replay counts as not carried; a fact of
    the format, listed, not a disagreement."""

    @property
    def ok(self) -> bool:
        """True when every codec that ran agreed on every payload."""
        return not self.findings

    def add(
        self, who: str, path: str, detail: str, payload: int, carried: bool = True
    ) -> None:
        """Record a disagreement; repeats of the same (who, path) are counted.

        A difference on a field whose own validator the decoding codec does not
        run is what that validator changes: it is kept apart (`explained`); a
        value the format cannot hold (`carried` False) likewise (`not_carried`).
        """
        key = (who, _general(path))
        reader = who.split(" -> ")[-1]
        if not carried:
            found = self.not_carried
        elif self._validated(reader, key[1]):
            found = self.explained
        else:
            found = self.findings
        if key in found:
            found[key].count += 1
        else:
            found[key] = Finding(who, key[1], detail, payload)

    def _validated(self, codec: str, path: str) -> bool:
        for n in self.not_run:
            where = re.sub(r"<[^>]*>", "", n.path)
            field_level = "." in where  # a model-wide one explains no one field
            if field_level and codec in n.codecs and path == where:
                return True
        return False

    def failing(self, codec: str) -> int:
        """How many distinct disagreements `codec` had as the decoding side."""
        return sum(
            1 for f in self.findings.values() if f.who.split(" -> ")[-1] == codec
        )


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
    payloads = make_payloads(schema.shape, count, seed=seed, options=edges)
    for index, payload in enumerate(payloads):
        _check_payload(schema, built, payload, index, report)
    return report


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


def _general(path: str) -> str:
    """`Order.items[2].price` -> `Order.items[].price`; map keys likewise."""
    return re.sub(r"\[[^\]]*\]", "[]", path)


def render(report: CheckReport) -> str:
    """The report as text: one line per codec, then every refused (codec, field),
    the code and checks a codec skips, and each disagreement."""
    lines = [
        f"checked {report.payloads} payloads of {report.schema} (seed {report.seed}) "
        f"with {len(report.codecs)} codecs; reference: {report.reference}",
    ]
    width = max(len(c) for c in (*report.codecs, *report.refused))
    for codec in report.codecs:
        n = report.failing(codec)
        state = "ok" if n == 0 else f"{n} disagreement(s)"
        if lost := sum(1 for who, _ in report.not_carried if who == codec):
            state += f", {lost} field(s) not carried (listed below)"
        lines.append(f"  {codec:<{width}}  {state}")
    for codec, found in report.refused.items():
        lines.append(
            f"  {codec:<{width}}  left out: cannot carry {len(found)} field(s)"
        )
    if report.refused:
        total = sum(len(found) for found in report.refused.values())
        lines.append(
            f"left out, a line per codec and field ({total}; name a codec with "
            "--codecs to make its refusal an error):"
        )
        lines += [
            f"  {codec}: {line}"
            for codec, found in report.refused.items()
            for line in found
        ]
    if report.changed:
        total = sum(len(found) for found in report.changed.values())
        lines.append(
            f"changed, a line per codec and field ({total}; the wire holds a "
            "string, the codec makes your type again):"
        )
        lines += [
            f"  {codec}: {path}: changed: {form}"
            for codec, found in report.changed.items()
            for path, _, form in (line.partition(": ") for line in found)
        ]
    if report.not_run:
        lines.append(
            f"code of your model a codec does not run ({len(report.not_run)}; the "
            "pydantic codecs run it, and their CPU figure includes it):"
        )
        lines += [f"  {n.line()}" for n in report.not_run]
    if report.ran:
        lines.append(
            "code of your model a derived codec runs (its CPU figure includes it):"
        )
        lines += [f"  {line}" for line in report.ran]
    if report.skipped:
        lines.append(
            f"checks your own form makes that a codec skips ({len(report.skipped)}; "
            "that codec's CPU figure does not include them):"
        )
        lines += [f"  {s.line()}" for s in report.skipped]
    if report.explained:
        lines.append(
            "differences on a field whose validator that codec does not run (what "
            "the validator changes; not a disagreement):"
        )
        for f in report.explained.values():
            more = f" [{f.count} times]" if f.count > 1 else ""
            lines.append(f"  {f.who}: {f.path}: payload {f.payload}: {f.detail}{more}")
    if report.not_carried:
        lines.append(
            "values a codec's format cannot hold as sent (a replay counts such "
            "records as not carried; a fact of the format, not a disagreement):"
        )
        for f in report.not_carried.values():
            more = f" [{f.count} times]" if f.count > 1 else ""
            lines.append(f"  {f.who}: {f.path}: payload {f.payload}: {f.detail}{more}")
    if report.ok:
        left = f" ({len(report.refused)} left out above)" if report.refused else ""
        lines.append(f"all codecs agree{left}")
        return "\n".join(lines)
    lines.append("disagreements (who: path: first occurrence):")
    for f in report.findings.values():
        more = f" [{f.count} times]" if f.count > 1 else ""
        lines.append(f"  {f.who}: {f.path}: payload {f.payload}: {f.detail}{more}")
    return "\n".join(lines)
