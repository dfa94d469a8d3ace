"""What `codec-schema check` found, and its text: a line per codec, then every fact and finding."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from schemas.formats import PYDANTIC_CODECS
from schemas.user.skipped_checks import Skipped
from schemas.user.validators import NotRun


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
    unread: int = 0
    """Payloads the team's model does not read back (not round-trip stable): no
    codec is compared on them."""
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


def _general(path: str) -> str:
    """`Order.items[2].price` -> `Order.items[].price`; map keys likewise."""
    return re.sub(r"\[[^\]]*\]", "[]", path)


def _per_codec(
    title: str, found: dict[str, list[str]], line: Callable[[str], str]
) -> list[str]:
    """`title` with the count of lines, then a line per codec and finding."""
    total = sum(len(lines) for lines in found.values())
    return [title.format(total)] + [
        f"  {codec}: {line(text)}" for codec, lines in found.items() for text in lines
    ]


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
        if report.unread == report.payloads and codec not in PYDANTIC_CODECS:
            state = "not compared: your model does not read back what it writes"
        if lost := sum(1 for who, _ in report.not_carried if who == codec):
            state += f", {lost} field(s) not carried (listed below)"
        lines.append(f"  {codec:<{width}}  {state}")
    for codec, found in report.refused.items():
        lines.append(
            f"  {codec:<{width}}  left out: cannot carry {len(found)} field(s)"
        )
    if report.refused:
        lines += _per_codec(
            "left out, a line per codec and field ({}; name a codec with "
            "--codecs to make its refusal an error):",
            report.refused,
            lambda line: line,
        )
    if report.changed:
        lines += _per_codec(
            "changed, a line per codec and field ({}; the wire holds a "
            "string, the codec makes your type again):",
            report.changed,
            lambda line: line.replace(": ", ": changed: ", 1),
        )
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
    if report.unread and report.unread < report.payloads:
        lines.append(
            f"{report.unread} of {report.payloads} payloads compared with no codec: "
            "your model does not read back what it writes (below)"
        )
    if report.ok:
        left = f" ({len(report.refused)} left out above)" if report.refused else ""
        lines.append(f"all codecs agree{left}")
        return "\n".join(lines)
    lines.append("disagreements (who: path: first occurrence):")
    for f in report.findings.values():
        more = f" [{f.count} times]" if f.count > 1 else ""
        lines.append(f"  {f.who}: {f.path}: payload {f.payload}: {f.detail}{more}")
    return "\n".join(lines)
