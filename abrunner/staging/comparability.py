"""Why two live sides may not be comparable: the staging report's warnings and notes.

Warnings name what and when: slices in which a side handled nothing (and what the
other side handled meanwhile), a backlog over one second of a side's traffic (its
peak, when, and for how long), restarts, consumer errors, traffic or payloads that
differ. Notes say what supports the comparison (the same topic, the same messages;
A/A).
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Final

from abrunner.staging import backlog
from abrunner.staging.slices import Side, Window

SAME_WITHIN: Final = 0.02
"""Both sides saw the same messages when they read the same topics and their counts
and sizes over the window agree this closely (two consumers of one topic differ by
their lag at the window's edges)."""


def time_of(at: float) -> str:
    """`at` as `2026-11-28 16:03:12 UTC`."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _clock(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%H:%M:%S")


def _spans(indices: list[int] | tuple[int, ...]) -> str:
    """Slice numbers (1-based) as runs: `3-5, 9`."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(
        f"{r[0] + 1}" if len(r) == 1 else f"{r[0] + 1}-{r[-1] + 1}" for r in runs
    )


def rate_of(side: Side, window: Window) -> float:
    """The side's mean rate over the analysed slices (msg/s)."""
    seconds = window.count * window.slice_s
    return side.totals.get("messages", 0.0) / seconds if seconds else 0.0


def stalls(a: Side, b: Side, window: Window) -> dict[str, backlog.Stall]:
    """Each side's stall, where it had one."""
    found = {}
    for side, other in ((a, b), (b, a)):
        found_stall = backlog.stall(
            side.name,
            side.lag,
            rate_of(side, window),
            side.series["messages"],
            other.series["messages"],
        )
        if found_stall is not None:
            found[side.name] = found_stall
    return found


def stall_text(stall: backlog.Stall, window: Window) -> str:
    """One line: how much, when, for how long (the report's warnings, and beside
    the ratios it moves)."""
    parts = []
    if stall.lagged and stall.over is not None:
        seconds = stall.peak / max(stall.rate, 1.0)
        first, last = stall.over
        parts.append(
            f"its backlog peaked at {stall.peak:,.0f} messages at "
            f"{time_of(stall.peak_at)} ({seconds:.1f} s of its traffic at "
            f"{stall.rate:,.0f} msg/s), over {backlog.LAG_S:g} s of traffic from "
            f"{_clock(first)} to {_clock(last)} (slice "
            f"{_spans(_slices_between(window, first, last))}), {stall.end:,.0f} "
            "at the window's end" + ("; it fell behind" if stall.behind else "")
        )
    if stall.idle:
        first = window.edges[stall.idle[0]]
        parts.append(
            f"it handled no message in slice {_spans(stall.idle)} (from "
            f"{_clock(first)}) while the other side handled messages"
        )
    return "; ".join(parts)


def stalled_slices(stall: backlog.Stall, window: Window) -> set[int]:
    """The slices (0-based) a stall touches."""
    found = set(stall.idle)
    if stall.over is not None:
        found.update(_slices_between(window, *stall.over))
    return found


def _slices_between(window: Window, first: float, last: float) -> list[int]:
    edges = window.edges
    return [
        i
        for i in range(window.count)
        if edges[i + 1] >= first and edges[i] < last + 1e-9
    ]


def comparability(
    a: Side, b: Side, window: Window, within: float
) -> tuple[list[str], list[str], bool]:
    """Warnings (the sides may not be comparable), notes, and whether both sides
    saw the same messages."""
    warnings, notes = [], []
    totals = {}
    found = stalls(a, b, window)
    for side, other in ((a, b), (b, a)):
        msgs, sent = side.totals.get("messages", 0.0), side.totals.get("bytes")
        totals[side.name] = (msgs, sent / msgs if sent and msgs else None)
        missing = [i for i in range(window.count) if not side.has_data(i)]
        if missing:
            theirs = sum(other.series["messages"][i] or 0.0 for i in missing)
            warnings.append(
                f"side {side.name} handled no message in {len(missing)} of "
                f"{window.count} slices (slice {_spans(missing)}, from "
                f"{time_of(window.edges[missing[0]])}; side {other.name} handled "
                f"{theirs:,.0f} in them); only slices in which both sides handled "
                "messages are compared"
            )
        if (stall := found.get(side.name)) is not None and stall.lagged:
            warnings.append(
                f"side {side.name} lagged: "
                + stall_text(dataclasses.replace(stall, idle=()), window)
            )
        if started := sum(side.starts):
            at = ", ".join(str(i + 1) for i, n in enumerate(side.starts) if n)
            warnings.append(
                f"side {side.name} restarted: {started} worker process(es) started "
                f"during the window (slice {at}); counters that reset were read as "
                "resets, not as negative rates"
            )
        if (errors := round(_total(side.series["consumer_errors"]))) > 0:
            warnings.append(
                f"side {side.name} had {errors} Kafka consumer errors "
                "(worker_consumer_errors_total): its figures may include retries"
            )
    (ma, ba), (mb, bb) = totals["A"], totals["B"]
    rates = _differ(ma, mb)
    if rates > within:
        warnings.append(
            f"message rates differ by {100 * rates:.0f} % (A {ma:,.0f}, B {mb:,.0f} "
            f"messages in the window; threshold {100 * within:g} %): the "
            "sides did not see the same traffic"
        )
    sizes = _differ(ba, bb) if ba and bb else 0.0
    if sizes > within:
        warnings.append(
            f"payload bytes per message differ by {100 * sizes:.0f} % (A {ba:,.0f}, "
            f"B {bb:,.0f}): the sides did not decode the same bytes (different wire "
            "formats, as in compose's two lanes, or different traffic)"
        )
    if a.schema != b.schema:
        warnings.append(f"the sides decode different schemas: {a.schema}, {b.schema}")
    same = bool(
        a.topics
        and a.topics == b.topics
        and rates <= SAME_WITHIN
        and ba
        and bb
        and sizes <= SAME_WITHIN
    )
    if same:
        notes.append(
            f"Both sides read the same topic ({', '.join(a.topics)}) and handled the "
            f"same number of messages of the same size (within {100 * SAME_WITHIN:g} "
            "%): the data shows they saw the same messages."
        )
    if a.topics and b.topics and a.topics != b.topics:
        notes.append(
            f"The sides read different topics ({', '.join(a.topics)}; "
            f"{', '.join(b.topics)}): they decode the same values only if their "
            "producers send the same traffic (compose's lanes: same profile, seed and "
            "rate)."
        )
    if a.codec == b.codec:
        notes.append(
            f"A/A: both sides run `{a.codec}`; any verdict other than no detectable "
            "difference points at a difference between the deployments, not codecs."
        )
    return warnings, notes, same


def _total(values: list[float | None]) -> float:
    return sum(v for v in values if v is not None)


def _differ(x: float | None, y: float | None) -> float:
    if not x or not y:
        return float("inf") if (x or y) else 0.0
    return abs(x / y - 1) if x >= y else abs(y / x - 1)
