"""`codec-schema check`: every wire codec decodes the same payloads to equal values.

For each synthetic payload, each codec builds its native object, encodes and decodes
it (its own round trip); then each JSON codec also decodes the bytes every other JSON
codec wrote (what a shadow decode or a mixed topic does during a migration). Every
decoded object is read field by field and compared with the reference: the decode of
the user's own form (json+pydantic for a model, msgspec-json for a Struct, protobuf
for a `.proto`), or the first codec that decoded at all.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from codec import Codec, codec_refusal
from codec.base import JSON
from schemas.compare import diff, read_native
from schemas.errors import ConfigError
from schemas.user.loader import UserSchema
from schemas.user.skipped_checks import Skipped, skipped_checks
from schemas.user.synthetic import SynthOptions, make_payloads
from schematool.codecs import REFUSABLE, WIRE_CODECS, user_codec

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
    left_out: dict[str, str] = field(default_factory=dict)
    """Codecs asked for that cannot carry the schema, with why (a failure)."""
    refused: dict[str, str] = field(default_factory=dict)
    """Formats of the default run that cannot hold the schema, with why (noted,
    not a failure: name the codec with --codecs to make it one)."""

    @property
    def ok(self) -> bool:
        """True when every codec asked for ran and agreed on every payload."""
        return not self.findings and not self.left_out

    def add(self, who: str, path: str, detail: str, payload: int) -> None:
        """Record a disagreement; repeats of the same (who, path) are counted."""
        key = (who, _general(path))
        if key in self.findings:
            self.findings[key].count += 1
        else:
            self.findings[key] = Finding(who, key[1], detail, payload)

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
    codecs: Sequence[str] = WIRE_CODECS,
) -> CheckReport:
    """Decode `count` seeded payloads of `schema` with every codec and compare.

    Raises:
        ConfigError: for an unknown codec name or an unsynthesizable field.
    """
    left_out: dict[str, str] = {}
    refused: dict[str, str] = {}
    for name in codecs:
        why = codec_refusal(name, schema) if name in WIRE_CODECS else None
        if why is None:
            continue
        # A newer format that cannot hold the schema is noted in the default run;
        # one of the six, or a codec named on the command line, must carry it.
        if name in REFUSABLE and tuple(codecs) == WIRE_CODECS:
            refused[name] = why
        else:
            left_out[name] = why
    built = {
        name: user_codec(name, schema)
        for name in codecs
        if name not in left_out and name not in refused
    }
    if not built:
        raise ConfigError(
            "; ".join(left_out.values()) or "--codecs: name at least one codec"
        )
    preferred = _REFERENCE[schema.source]
    reference = preferred if preferred in built else next(iter(built))
    report = CheckReport(schema.name, tuple(built), count, seed, reference)
    report.left_out = left_out
    report.refused = refused
    report.skipped = [
        Skipped(tuple(c for c in s.codecs if c in built), s.path, s.check)
        for s in skipped_checks(schema.shape, schema.source)
        if any(c in built for c in s.codecs)
    ]
    payloads = make_payloads(schema.shape, count, seed=seed, options=options)
    for index, payload in enumerate(payloads):
        _check_payload(schema, built, payload, index, report)
    return report


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
            report.add(name, root, f"{step} failed: {_error(exc)}", index)
    if not read:
        return
    ref = report.reference if report.reference in read else next(iter(read))
    for name, value in read.items():
        for path, what in diff(read[ref], value, shape, root):
            report.add(name, path, f"{path}: {what} (vs {ref})", index)
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
        report.add(who, root, f"decode failed: {_error(exc)}", index)
        return
    for path, what in diff(expected, value, schema.shape, root):
        report.add(who, path, f"{path}: {what}", index)


def _general(path: str) -> str:
    """`Order.items[2].price` -> `Order.items[].price`; map keys likewise."""
    return re.sub(r"\[[^\]]*\]", "[]", path)


def _error(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:160]}"


def render(report: CheckReport) -> str:
    """The report as text: one line per codec, then each disagreement."""
    lines = [
        f"checked {report.payloads} payloads of {report.schema} (seed {report.seed}) "
        f"with {len(report.codecs)} codecs; reference: {report.reference}",
    ]
    width = max(len(c) for c in (*report.codecs, *report.left_out, *report.refused))
    for codec in report.codecs:
        n = report.failing(codec)
        lines.append(
            f"  {codec:<{width}}  {'ok' if n == 0 else f'{n} disagreement(s)'}"
        )
    for codec, why in (report.left_out | report.refused).items():
        lines.append(f"  {codec:<{width}}  left out: " + why.replace("\n", "\n    "))
    if report.skipped:
        lines.append(
            f"checks your own form makes that a codec skips ({len(report.skipped)}; "
            "that codec's CPU figure does not include them):"
        )
        lines += [f"  {s.line()}" for s in report.skipped]
    if report.ok:
        lines.append("all codecs agree")
        return "\n".join(lines)
    if not report.findings:
        lines.append(
            f"the codecs checked agree; left out: {', '.join(report.left_out)}"
        )
        return "\n".join(lines)
    lines.append("disagreements (who: path: first occurrence):")
    for f in report.findings.values():
        more = f" [{f.count} times]" if f.count > 1 else ""
        lines.append(f"  {f.who}: {f.path}: payload {f.payload}: {f.detail}{more}")
    return "\n".join(lines)
