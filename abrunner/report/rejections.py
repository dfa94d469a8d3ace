"""What each codec refused of the traffic: dead letters and replayed messages not carried.

A dead letter's `x-dlq-exception-message` names the field a decoder refused (msgspec:
``Expected `int`, got `str` - at `$.userId` ``; pydantic: ``1 validation error(s):
userId: int_parsing``); `reason` turns it into one `"<field path>: <reason>"` key, so
the report can say "msgspec-json would reject 75 % of your traffic: userId: Expected
`int`, got `str` in 2,250 messages", the answer a team needs before a switch. The
load generator counts the replayed messages a codec's format cannot carry the same
way (`loadgen.carry`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, NamedTuple

from abrunner.results import CaseResult

_MSGSPEC_AT: Final = re.compile(r"^(?P<what>.*?) - at `\$(?P<path>[^`]*)`$")
_UNKNOWN: Final = re.compile(r"^Object contains unknown field `(?P<name>[^`]*)`$")
_PYDANTIC: Final = re.compile(r"^\d+ validation error\(s\): (?P<errors>.*)$")
_INDEXES: Final = re.compile(r"\[[^\]]*\]")
"""A list index or map key in a path (`items[3]`, `lines[...]`): reasons are
counted by field, as a replay counts what it cannot carry (`loadgen.carry`)."""
SHOWN: Final = 3
"""Reasons the terminal lists per codec, most frequent first; report.md and
report.json list every one, and the terminal's line says where the rest are."""


def reason(dlq: Mapping[str, bytes | None]) -> str:
    """The `"<field path>: <reason>"` of one dead letter, from its `x-dlq-*` headers."""
    text = (dlq.get("x-dlq-exception-message") or b"").decode(errors="replace")
    text = " ".join(text.split())
    kind = (dlq.get("x-dlq-reason") or b"decode").decode(errors="replace")
    path = ""
    if (m := _MSGSPEC_AT.match(text)) is not None:
        text, path = m["what"], _INDEXES.sub("", m["path"]).lstrip(".")
    if (m := _UNKNOWN.match(text)) is not None:
        name = m["name"]
        return (
            f"{path}.{name}: an unknown field" if path else f"{name}: an unknown field"
        )
    if (m := _PYDANTIC.match(text)) is not None:
        first = m["errors"].split("; ")[0]
        return first if ": " in first else f"record: {first}"
    if path:
        return f"{path}: {text}"
    return f"record: {kind}: {text}" if text else f"record: {kind}"


class Cut(NamedTuple):
    """A shortened list: at most `shown` reasons per codec, the rest in `where`."""

    shown: int
    where: str


def _top(counts: Mapping[str, int], cut: Cut | None) -> str:
    """Every reason, most frequent first; with `cut`, the first `cut.shown` and
    where the others are."""
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    keep = ranked if cut is None else ranked[: cut.shown]
    shown = [f"{why} in {n:,} message{'s' * (n != 1)}" for why, n in keep]
    if cut is not None and len(ranked) > cut.shown:
        rest = len(ranked) - cut.shown
        shown.append(f"{rest} other reason{'s' * (rest != 1)}, listed in {cut.where}")
    return "; ".join(shown)


def rejected_all(runs: list[CaseResult]) -> str | None:
    """When every one of `runs` (measured repeats) dead-lettered every message it
    handled, the most frequent reason over them; else None.

    A codec that rejects all of a profile's traffic (a replay of another schema's
    recording, a strict codec on lax traffic) measured no decode: its row must not
    read `ok`.
    """
    if not runs or not all(
        r.processed and r.dead_lettered is not None and r.dead_lettered >= r.processed
        for r in runs
    ):
        return None
    reasons: dict[str, int] = {}
    for r in runs:
        for why, n in r.rejected.items():
            reasons[why] = reasons.get(why, 0) + n
    if not reasons:
        return "see the dead-letter topic"
    return min(reasons.items(), key=lambda kv: (-kv[1], kv[0]))[0]


def _pct(part: int, whole: int) -> str:
    share = 100 * part / whole if whole else 0.0
    return f"{share:.0f} %" if share >= 1 or share == 0 else f"{share:.2g} %"


def lines(results: list[CaseResult], cut: Cut | None = None) -> list[str]:
    """One line per codec (repeats summed) of what it dead-lettered or could not carry.

    Every reason is listed unless `cut` says how many and where the rest are (the
    terminal). Only cases measured with the figures (reports written before have
    none: no line).
    """
    codecs: dict[str, list[CaseResult]] = {}
    for r in results:
        if r.error is None and r.rejected_count is not None:
            codecs.setdefault(r.codec, []).append(r)
    out = []
    for codec, runs in codecs.items():
        acked = sum(r.acked or 0 for r in runs)
        rejected = sum(r.rejected_count or 0 for r in runs)
        reasons: dict[str, int] = {}
        for r in runs:
            for why, n in r.rejected.items():
                reasons[why] = reasons.get(why, 0) + n
        if rejected:
            line = (
                f"- `{codec}` would reject {_pct(rejected, acked)} of your traffic "
                f"({rejected:,} of {acked:,} messages dead-lettered): {_top(reasons, cut)}"
            )
        else:
            line = f"- `{codec}` dead-lettered none of {acked:,} messages"
        line += _not_carried(runs[0], cut)
        out.append(line)
    return out


def _not_carried(r: CaseResult, cut: Cut | None) -> str:
    """A replay's messages the codec's format could not carry (skipped), if any."""
    left = sum(r.not_carried.values())
    if not left:
        return "."
    total = r.recorded or left
    return (
        f"; it could not carry {left:,} of the {total:,} recorded messages "
        f"({_pct(left, total)}, skipped in its case): {_top(r.not_carried, cut)}."
    )


def section(
    results: list[CaseResult], profile: str, cut: Cut | None = None
) -> str | None:
    """report.md's "what each codec rejects" for one profile; None with no figures."""
    found = lines([r for r in results if r.profile == profile], cut)
    if not found:
        return None
    return "\n".join(
        [
            f"### What each codec rejects (`{profile}`)",
            "",
            "Dead letters of the measured runs by field and reason (from the "
            "dead-letter topic's `x-dlq-*` headers); for a replay, the recorded "
            "messages a codec's format cannot carry, left out of its case.",
            "",
            *found,
        ]
    )


def failures(results: list[CaseResult]) -> str | None:
    """The failed cases with their whole reason and their logs; None when none failed."""
    failed = [r for r in results if r.error is not None]
    if not failed:
        return None
    lines = ["### Failed cases", ""]
    for r in failed:
        logs = f" Logs: {', '.join(f'`{p}`' for p in r.logs)}." if r.logs else ""
        lines.append(
            f"- `{r.codec}` / `{r.profile}` / run {r.repeat + 1}: {r.error}.{logs}"
        )
    return "\n".join(lines)


def sections(
    results: list[CaseResult], profiles: list[str], cut: Cut | None = None
) -> str | None:
    """Every profile's rejections, then the failed cases; None when there is nothing.

    report.md lists every reason; the terminal passes a `cut`.
    """
    found = [section(results, p, cut) for p in profiles]
    found.append(failures(results))
    texts = [t for t in found if t]
    return "\n\n".join(texts) if texts else None
