"""A staging report: two live sides (`abrunner.staging.slices`) as the lab run's `Report`.

`build` turns the sides' slices into a `Report` whose rows are keyed by side (`A:
json+pydantic`, `B: msgspec-json`: an A/A comparison has the same codec twice), whose
`results` hold one entry per side and block (the units the intervals are taken on, so
`codec-ab --compare` works on a staging report as on a lab one), and whose `staging`
part says where the figures came from, how the window was cut and what makes the
sides comparable or not. `markdown` and `write` give report.md, report.json and the
lab report's charts; the figures table is the lab report's (`abrunner.report.tables.table`),
drawn with the warnings and ratios by `abrunner.staging.sections`.
"""

from __future__ import annotations

from pathlib import Path

from abrunner.plan import Plan, Profile
from abrunner.report.decisions import add_cores
from abrunner.report.tables import aggregate, environment
from abrunner.results import CaseResult, Report, Staging, StagingSide
from abrunner.staging import comparability as sc, figures as sf
from abrunner.staging.sections import STALLED, stall_note, window_line
from abrunner.staging.slices import Side, Window
from schemas.errors import ConfigError


def _profile(schema: str) -> Profile:
    try:
        return Profile(schema) if ":" in schema else Profile.parse(schema)
    except ConfigError:  # a label no profile parses: kept, marked as a user's spec
        return Profile(f"staging:{schema}")


def build(
    url: str,
    window: Window,
    a: Side,
    b: Side,
    out: Path,
    within: float,
    target_rate: float | None = None,
) -> Report:
    """The staging report of sides `a` and `b` over `window`.

    Args:
        url: the Prometheus server read.
        window: the analysed span and its slices.
        a: side A (the baseline of the ratios).
        b: side B.
        out: the report directory.
        within: relative difference in message rate or size above which the sides
            are flagged as not comparable (0.10 = 10 %).
        target_rate: the cores column's rate (`--target-rate`); default the
            traffic's: side A's mean rate over the analysed slices.
    """
    profile = _profile(a.schema)
    usable = [i for i in range(window.count) if a.has_data(i) and b.has_data(i)]
    blocks, dropped = sf.layout(usable)
    decide = len(blocks) >= sf.MIN_BLOCKS
    label = profile.label
    results = {
        side.name: [
            sf.figures(side, block, window.slice_s, label, n)
            for n, block in enumerate(blocks)
        ]
        for side in (a, b)
    }
    per_slice = [
        sf.figures(side, [i], window.slice_s, label, i)
        for side in (a, b)
        for i in range(window.count)
        if side.has_data(i)
    ]
    refused = None
    if not decide:
        refused = (
            f"{len(usable)} usable slices (both sides handled messages): a verdict "
            "needs at "
            f"least {sf.MIN_SLICES} (3 blocks of 3 slices); run longer or with "
            "shorter --slice"
        )
    traffic = sc.rate_of(a, window)
    if target_rate:
        rate, basis = target_rate, "`--target-rate`"
    else:
        rate = traffic or 1.0
        basis = (
            "the traffic's rate: side A's mean over the analysed slices; "
            "`--target-rate` sets another"
        )
    plan = Plan(
        codecs=tuple(dict.fromkeys([a.codec, b.codec])),
        profiles=(profile,),
        rate=rate,
        duration=window.end - window.start,
        warmup=window.slice_s,
        repeat=max(1, len(blocks)),
        max_mode=False,
        max_messages=1,
        partitions=max(1, a.partitions),
        baseline=a.codec,
        out=str(out),
        verify=False,
        bench=False,
    )
    ordered = [r for side in ("A", "B") for r in results[side]]
    warnings, notes, same = sc.comparability(a, b, window, within)
    stalls = sc.stalls(a, b, window)
    touched = set().union(*(sc.stalled_slices(st, window) for st in stalls.values()))
    stall_blocks = [n for n, block in enumerate(blocks) if touched & set(block)]
    info = Staging(
        prometheus=url,
        start=window.start,
        end=window.end,
        slice_s=window.slice_s,
        slices=window.count,
        usable=len(usable),
        blocks=len(blocks),
        per_block=len(blocks[0]) if blocks else 0,
        dropped=dropped,
        sides=[_side(s, window) for s in (a, b)],
        warnings=warnings,
        notes=notes,
        same_messages=same,
        refused=refused,
        dashboard={s.name: s.dashboard for s in (a, b) if s.dashboard},
        slice_results=per_slice,
        window_note=window_line(window, a, b),
        rate_basis=basis,
        stalls={
            n: stall_note(
                sc.stall_text(st, window),
                stall_blocks,
                len(blocks),
                _without(results, stall_blocks, label),
            )
            for n, st in stalls.items()
        },
    )
    report = Report(
        plan=plan,
        environment=environment("n/a (staging: figures read from Prometheus)"),
        results=ordered,
        summary=aggregate(ordered),
        staging=info,
    )
    report.target_rate = plan.rate
    add_cores(report.summary, plan.rate)
    if results["A"]:
        report.ratios = sf.ratios(results["A"], results["B"], label, decide)
    return report


def _without(
    results: dict[str, list[CaseResult]], stalled: list[int], label: str
) -> dict[str, float]:
    """The latency ratios over the blocks that hold no stall, where some are left."""
    kept = [n for n in range(len(results["A"])) if n not in stalled]
    if not stalled or not kept:
        return {}
    pick = [[results[s][n] for n in kept] for s in ("A", "B")]
    return {
        r.figure: r.ratio
        for r in sf.ratios(pick[0], pick[1], label, False)
        if r.figure in STALLED
    }


def _side(side: Side, window: Window) -> StagingSide:
    counts = [int(p) for p in side.series["processes"] if p is not None]
    return StagingSide(
        name=side.name,
        selector=side.selector,
        codec=side.codec,
        schema=side.schema,
        version=side.version,
        topics=list(side.topics),
        processes=max(counts, default=0),
        restarts=sum(side.starts),
        slices_without_data=sum(not side.has_data(i) for i in range(window.count)),
        consumer_errors=round(
            sum(v for v in side.series["consumer_errors"] if v is not None)
        ),
    )
