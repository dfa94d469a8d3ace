"""`codec-ab --compare`: one report against an older one, per codec, as a CI gate.

`codec-ab --compare OLD [run flags]` runs the A/B, then compares OLD with the new
report; `codec-ab --compare OLD NEW` compares two existing reports and runs nothing.
OLD and NEW are report.json files or the directories (`--out`) that hold one.

For every profile and codec in both, it prints CPU us/msg, e2e p99 and steady RSS:
old -> new medians, the change in %, and, when both reports have 3 repeats or more,
a 95 % Welch t interval on the change (`abrunner.report.stats.unpaired_ratio`: an old and a
new run are independent samples, nothing pairs their repeats). The gate fails a
codec whose gated figure (`--gate-figures`, default CPU us/msg) rose by more than
`--max-regression` with an interval that excludes no change; with fewer than 3
repeats on either side, by more than the threshold alone (said in the output). A
codec that failed or lost messages in NEW fails it too.

Exit status: 0 no regression, 1 a regression, 2 a report that cannot be read or
two reports with no codec on a profile in common (nothing was compared).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Final, NamedTuple, TextIO

import msgspec

from abrunner.report import stats
from abrunner.report.decisions import DECIDED, per_repeat
from abrunner.report.tables import COLUMNS, read
from abrunner.results import Report, by_cpu
from schemas.errors import ConfigError
from service.settings.cli_flags import Flag

PASSED: Final = 0
REGRESSED: Final = 1
UNREADABLE: Final = 2
DEFAULT_GATE: Final = ("cpu_us_per_msg",)
"""CPU per message is the figure that carries to other hardware; p99 and RSS on a
shared 2-core machine move with the broker's and load generator's scheduling, so
they are gated only when asked (`--gate-figures`)."""
_PLAN_FIELDS: Final = {
    "rate": "--rate",
    "duration": "--duration",
    "warmup": "--warmup",
    "partitions": "--partitions",
    "max_mode": "--max",
    "worker_args": "--worker-arg",
}
"""Plan settings that change the figures, so a difference is worth a note."""


class UnreadableReport(Exception):
    """A report that cannot be compared: its one-line reason is the message."""


class Change(NamedTuple):
    """One figure of one codec from the old report to the new one.

    Attributes:
        change: new median / old median - 1 (inf: new above the top latency
            bucket; nan: old was).
        interval: new over old with its 95 % interval, None with fewer than 3
            finite repeats on either side.
        gated: the figure is one the gate checks.
        regressed: gated, risen beyond the threshold, and the interval (if any)
            above 1.
    """

    profile: str
    codec: str
    figure: str
    old: float
    new: float
    change: float
    interval: stats.Interval | None
    gated: bool
    regressed: bool


def gate_flags(what: str) -> tuple[Flag, Flag]:
    """`--max-regression` and `--gate-figures`, for the lab run and the staging run
    (`what` is what fails the gate: "a codec", "a side")."""
    return (
        Flag(
            "--max-regression",
            ("max_regression",),
            f"--compare fails {what} whose gated figure rose by more than this "
            "fraction (0.10 = 10 %)",
            float,
        ),
        Flag(
            "--gate-figures",
            ("gate_figures",),
            "comma-separated figures --compare gates on: cpu_us_per_msg, "
            "e2e_p99_ms, rss_steady_mb",
            default=",".join(DEFAULT_GATE),
        ),
    )


def load(path: str | Path) -> Report:
    """A report from its report.json, or from the directory holding one.

    Raises:
        UnreadableReport: it cannot be read or is not a report.
    """
    given = Path(path)
    target = given / "report.json" if given.is_dir() else given
    try:
        return read(target)
    except OSError as exc:
        raise UnreadableReport(f"{target}: {exc.strerror or exc}") from None
    except (msgspec.DecodeError, ConfigError) as exc:
        raise UnreadableReport(f"{target}: not a codec-ab report: {exc}") from None


def changes(
    old: Report, new: Report, max_regression: float, gated: Sequence[str]
) -> list[Change]:
    """Every shown figure of every profile and codec in both reports."""
    found = []
    for profile, rows in new.summary.items():
        before = old.summary.get(profile, {})
        for codec in (c for c in by_cpu(rows) if c in before):
            for figure in DECIDED:
                a, b = before[codec].median(figure), rows[codec].median(figure)
                if a is None or b is None:
                    continue
                interval = stats.unpaired_ratio(
                    list(per_repeat(old.results, profile, codec, figure).values()),
                    list(per_repeat(new.results, profile, codec, figure).values()),
                )
                change = _change(a, b)
                worse = change > max_regression and (
                    interval is None or interval.low > 1
                )
                on = figure in gated
                found.append(
                    Change(
                        profile, codec, figure, a, b, change, interval, on, on and worse
                    )
                )
    return found


def _change(old: float, new: float) -> float:
    if not math.isfinite(old) or old <= 0:
        return math.nan  # no base to measure a change from; never a regression
    return math.inf if math.isinf(new) else new / old - 1


def failures(new: Report) -> list[str]:
    """The codecs that failed or lost messages in `new`, each as a few words."""
    found = []
    for profile, rows in new.summary.items():
        for codec, row in rows.items():
            if row.errors:
                found.append(f"{codec} on {profile} failed: {row.errors[0][:80]}")
            elif row.lost:
                found.append(f"{codec} on {profile} lost {row.lost} messages")
    return found


def differences(old: Report, new: Report) -> list[str]:
    """The run settings the two reports differ in, as `--flag old -> new`: the
    schema (or profiles) and the payloads' source (synthetic or a replay) too."""
    found = []
    schemas = [", ".join(p.label for p in r.plan.profiles) for r in (old, new)]
    if schemas[0] != schemas[1]:
        found.append(f"--schema {schemas[0]} -> {schemas[1]}")
    sources = [_source(r) for r in (old, new)]
    if sources[0] != sources[1]:
        found.append(f"payloads {sources[0]} -> {sources[1]}")
    modes = ["paired" if r.paired is not None else "sequential" for r in (old, new)]
    if modes[0] != modes[1]:  # as run: a paired plan may have fallen back
        found.append(f"--mode {modes[0]} -> {modes[1]}")
    for key, flag in _PLAN_FIELDS.items():
        a, b = getattr(old.plan, key), getattr(new.plan, key)
        if a != b:
            found.append(f"{flag} {_setting(a)} -> {_setting(b)}")
    return found


def _source(report: Report) -> str:
    replay = report.plan.replay
    return "synthetic" if replay is None else f"replayed from {replay}"


def _common(old: Report, new: Report) -> bool:
    """Whether some codec ran on some profile in both reports."""
    return any(
        codec in old.summary.get(profile, {})
        for profile, rows in new.summary.items()
        for codec in rows
    )


def _setting(value: object) -> str:
    if isinstance(value, tuple | list):
        return " ".join(map(str, value)) or "none"
    if isinstance(value, float | int) and not isinstance(value, bool):
        return f"{value:,g}"
    return str(value)


def gate(
    old: Report,
    new: Report,
    names: tuple[str, str],
    max_regression: float,
    gated: Sequence[str],
    out: TextIO,
) -> int:
    """Print the comparison on `out`; `REGRESSED` on a regression, else `PASSED`.

    Args:
        old: the reference report.
        new: the report under test.
        names: how to call them in the output (their paths).
        max_regression: the largest accepted rise, as a fraction (0.10 = 10 %).
        gated: the figures the gate checks (keys of `DECIDED`).
        out: where to print.
    """
    found = changes(old, new, max_regression, gated)
    broken = failures(new)
    threshold = f"{100 * max_regression:g} %"
    watched = ", ".join(DECIDED[f] for f in gated)
    lines = [
        f"codec-ab compare: OLD {names[0]} (--repeat {old.plan.repeat}) -> NEW "
        f"{names[1]} (--repeat {new.plan.repeat})",
        f"gate: exit 1 when a codec's {watched} rose by more than {threshold} and "
        "its 95 % interval lies above no change (the threshold alone with fewer "
        "than 3 repeats on either side), or it failed or lost messages in NEW",
        "",
        "| profile | codec | figure | old | new | change | 95 % interval | gate |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        *map(_row, found),
        "",
    ]
    if min(old.plan.repeat, new.plan.repeat) < stats.MIN_REPEATS:
        lines.append(
            "note: fewer than 3 repeats in OLD or NEW, so no intervals: the gate "
            f"uses the {threshold} threshold alone, and single runs on a shared "
            "machine move by 10-15 %; run both with --repeat 3 or more."
        )
    if moved := differences(old, new):
        lines.append(f"note: the runs differ in {'; '.join(moved)}.")
    only = sorted(
        {f"{c} on {p}" for p, rows in old.summary.items() for c in rows}
        ^ {f"{c} on {p}" for p, rows in new.summary.items() for c in rows}
    )
    if only:
        lines.append(f"note: in one report only, not compared: {', '.join(only)}.")
    worse = [
        f"{c.codec} on {c.profile}: {DECIDED[c.figure]} {_percent(c.change)}"
        for c in found
        if c.regressed
    ]
    if not _common(old, new):
        lines.append(
            "result: nothing to compare: no codec on a profile both reports hold; "
            "exit 2"
        )
        out.write("\n".join(lines) + "\n")
        return UNREADABLE
    if worse or broken:
        lines.append(f"result: REGRESSION: {'; '.join(worse + broken)}; exit 1")
    else:
        lines.append(f"result: no regression beyond {threshold}; exit 0")
    out.write("\n".join(lines) + "\n")
    return REGRESSED if worse or broken else PASSED


def _row(c: Change) -> str:
    fmt = COLUMNS[c.figure].fmt
    if c.interval is None:
        span = "- (fewer than 3 repeats)"
    else:
        span = f"{_percent(c.interval.low - 1)} to {_percent(c.interval.high - 1)}"
    verdict = "REGRESSION" if c.regressed else "ok" if c.gated else "not gated"
    cells = [c.profile, c.codec, DECIDED[c.figure], _value(fmt, c.old)]
    cells += [_value(fmt, c.new), _percent(c.change), span, verdict]
    return "| " + " | ".join(cells) + " |"


def _value(fmt: str, value: float) -> str:
    return "> top bucket" if math.isinf(value) else fmt.format(value)


def _percent(change: float) -> str:
    if math.isnan(change):
        return "-"
    return "+inf %" if math.isinf(change) else f"{100 * change:+.1f} %"


def reports(paths: Sequence[str]) -> list[Report]:
    """The reports `--compare` names: none, OLD, or OLD and NEW.

    Raises:
        UnreadableReport: one cannot be read, or more than two are named.
    """
    if len(paths) > 2:
        raise UnreadableReport(f"expected OLD [NEW], got {len(paths)} reports")
    return [load(path) for path in paths]
