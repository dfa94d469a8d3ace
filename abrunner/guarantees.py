"""`codec-ab --processing-guarantee both`: what exactly-once costs each codec.

The run is made twice on the same load (the same rate, duration, warm-up, payload
seeds, partitions, codecs, logic and worker flags): once with every worker
at-least-once, then once exactly-once (`service.delivery.transactions`). Each run
writes its full report into a subdirectory named after its guarantee; this module
sets the two side by side, per profile and codec: the CPU per message and the p99
end-to-end latency under each guarantee and their ratio (exactly-once over
at-least-once), into `guarantees.md` and `guarantees.json` in the report directory.

The two runs follow each other, so the ratio carries whatever the machine did
between them; within each run the codecs ran as that run's mode says (paired: at
the same time, on the same traffic).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final

import msgspec
from rich.console import Console

from abrunner.config import AbSettings
from abrunner.results import Report

GUARANTEES: Final = ("at-least-once", "exactly-once")
"""The order the two runs are made in, and the ratio's denominator first."""
FIGURES: Final = (("cpu_us_per_msg", "CPU us/msg"), ("e2e_p99_ms", "p99 ms"))


class GuaranteeCost(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One codec on one profile under both guarantees (medians over repeats).

    Attributes:
        profile: the payload profile's label.
        codec: the codec's registry key.
        at_least_once: figure -> its median in the at-least-once run.
        exactly_once: figure -> its median in the exactly-once run.
        ratio: figure -> exactly-once over at-least-once (missing where either
            was not measured).
        lost: messages lost in either run (`lost` + `seq_missing`).
    """

    profile: str
    codec: str
    at_least_once: dict[str, float] = {}
    exactly_once: dict[str, float] = {}
    ratio: dict[str, float] = {}
    lost: int = 0


def costs(at_least_once: Report, exactly_once: Report) -> list[GuaranteeCost]:
    """Each profile and codec that either run measured, in the at-least-once
    run's order, with the figures each measured."""
    out = []
    for profile, rows in at_least_once.summary.items():
        other = exactly_once.summary.get(profile, {})
        for codec in [*rows, *(c for c in other if c not in rows)]:
            a, e = rows.get(codec), other.get(codec)
            cost = GuaranteeCost(
                profile=profile,
                codec=codec,
                lost=(a.lost if a else 0) + (e.lost if e else 0),
            )
            for key, _ in FIGURES:
                low = a.median(key) if a else None
                high = e.median(key) if e else None
                if low is not None:
                    cost.at_least_once[key] = low
                if high is not None:
                    cost.exactly_once[key] = high
                if low and high is not None:
                    cost.ratio[key] = high / low
            out.append(cost)
    return out


def markdown(rows: list[GuaranteeCost], at_least_once: Report) -> str:
    """The cost table, one per profile, with what the runs were."""
    plan = at_least_once.plan
    load = (
        f"{plan.max_messages:,} messages drained per codec"
        if plan.max_mode
        else f"{plan.rate:,.0f} msg/s for {plan.duration:g} s per codec"
    )
    lines = [
        "# Exactly-once: its cost per codec",
        "",
        f"The same load ({load}, {plan.repeat} repeat(s), {plan.mode}) run twice: "
        "every worker at-least-once, then every worker exactly-once (one Kafka "
        "transaction per batch). Medians over the repeats; the ratio is "
        "exactly-once over at-least-once. The full reports: "
        "[at-least-once](at-least-once/report.md), "
        "[exactly-once](exactly-once/report.md). The two runs follow each other: "
        "the ratio also carries what the machine did between them.",
        "",
    ]
    for profile in dict.fromkeys(r.profile for r in rows):
        lines += [
            f"## {plan.heading(profile)}",
            "",
            "| codec | CPU us/msg at-least-once | CPU us/msg exactly-once | "
            "CPU ratio | p99 ms at-least-once | p99 ms exactly-once | p99 ratio "
            "| lost |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in (r for r in rows if r.profile == profile):
            cells = [r.codec]
            for key, _ in FIGURES:
                cells += [
                    _cell(r.at_least_once.get(key)),
                    _cell(r.exactly_once.get(key)),
                    _ratio(r.ratio.get(key)),
                ]
            cells.append(str(r.lost))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def write(out: Path, at_least_once: Report, exactly_once: Report) -> list[Path]:
    """Write guarantees.md and guarantees.json into `out`; return their paths."""
    rows = costs(at_least_once, exactly_once)
    out.mkdir(parents=True, exist_ok=True)
    md, js = out / "guarantees.md", out / "guarantees.json"
    md.write_text(markdown(rows, at_least_once))
    js.write_bytes(msgspec.json.format(msgspec.json.encode(rows), indent=2) + b"\n")
    return [md, js]


def run_both(
    settings: AbSettings, run: Callable[[AbSettings], tuple[int, Report | None]]
) -> int:
    """`run` the A/B under each guarantee in turn, into `<out>/<guarantee>/`, then
    write exactly-once's cost per codec beside them; the worst exit status."""
    reports, statuses = [], []
    for guarantee in GUARANTEES:
        one = settings.model_copy(
            update={"processing_guarantee": guarantee, "out": settings.out / guarantee}
        )
        status, report = run(one)
        if report is None or report.interrupted:
            return status
        reports.append(report)
        statuses.append(status)
    paths = write(settings.out, reports[0], reports[1])
    sys.stdout.write(paths[0].read_text())
    Console(stderr=True).print(f"exactly-once's cost per codec: {paths[0]}")
    return max(statuses)


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"
