"""Each codec's decode cost in-process (`codecbench`), to set beside the Kafka path's.

Taken before the Kafka cases, never during them (a tight loop here would steal the
CPU the worker is measured on), over the load generator's pool: the same size
(1000) and seed, so both paths decode the same payloads. The figures are CPU time
(`time.thread_time_ns`), as the worker's sampled decodes are. codec-bench
knows the built-in schemas' synthetic payloads only: a user's schema, or a replay,
gets no in-process figures.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from rich import progress as bars
from rich.console import Console

import codecbench
from abrunner.lab import payload_sizing
from abrunner.plan import (
    FRAMED,
    INPROCESS_REPEATS as REPEATS,
    MEASURED_SEED,
    POOL_SIZE,
    Plan,
)
from abrunner.results import InProcess
from codecbench.bench import DEFAULT_MIN_TIME_S, Progress
from loadgen.payloads import DEFAULT_LARGE_BYTES


class Tuning(NamedTuple):
    """How codecbench samples (the names of `codecbench.run`'s arguments).

    Attributes:
        pool_size: distinct payloads, cycled.
        repeats: kept samples per figure.
        warmups: discarded samples per figure.
        min_time_s: the shortest sample.
        alloc_calls: calls of codecbench's allocation pass (not reported here, so
            10 instead of its 100).
    """

    pool_size: int = POOL_SIZE
    repeats: int = REPEATS
    warmups: int = 1
    min_time_s: float = DEFAULT_MIN_TIME_S
    alloc_calls: int = 10


DEFAULT_TUNING: Final = Tuning()


def measure(
    plan: Plan, note: Progress, tuning: Tuning = DEFAULT_TUNING
) -> list[InProcess]:
    """The in-process decode medians of every codec on every profile of `plan`.

    Args:
        plan: the codecs and profiles.
        note: progress, one call per codec and profile.
        tuning: how long to sample.

    Raises:
        ServiceError: a codec cannot decode its own encoding of the pool.
    """
    found = []
    for profile in plan.profiles:
        if profile.user or plan.replay is not None:
            # codec-bench measures the built-in schemas' synthetic payloads only.
            note(f"{profile.label}: no in-process figures (built-in payloads only)")
            continue
        # The load generator's pool, bounded by bytes like it (`abrunner.lab.payload_sizing`).
        pool = min(tuning.pool_size, payload_sizing.pool_size(profile))
        # Framed cases (`<codec>+confluent`): codec-bench measures them beside
        # their twins under the same names (its in-memory registry).
        wire = tuple(dict.fromkeys(c.removesuffix(FRAMED) for c in plan.codecs))
        report = codecbench.run(
            wire,
            [profile.schema],
            framing="confluent" if wire != plan.codecs else "none",
            seed=MEASURED_SEED,  # the measured load's payloads
            large_bytes=profile.large_bytes or DEFAULT_LARGE_BYTES,
            progress=note,
            **tuning._replace(pool_size=pool)._asdict(),
        )
        found += [
            InProcess(
                codec=r.codec,
                profile=profile.label,
                decode_us=r.decode.us.median,
                decode_read_us=r.decode_read.us.median,
                read_all_us=None if r.read_all is None else r.read_all.us.median,
                read_k_us=None if r.read_fields is None else r.read_fields.us.median,
            )
            for r in report.results
        ]
    return found


def shown(plan: Plan, console: Console) -> list[InProcess]:
    """The in-process decode figures, or none (said so) when they cannot be taken."""
    console.print("measuring each codec's decode in-process (codec-bench) ...")
    steps = len(plan.codecs) * len(plan.profiles)
    bar = bars.Progress(
        bars.TextColumn("{task.description}"),
        bars.BarColumn(),
        bars.MofNCompleteColumn(),
        bars.TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )

    def note(what: str) -> None:
        if console.is_terminal:
            bar.update(task, description=f"codec-bench: {what}", advance=1)
        else:
            console.print(f"  {what}")

    try:
        with bar:
            task = bar.add_task("codec-bench", total=steps)
            return measure(plan, note)
    except Exception as exc:  # an optional figure must not cost the run
        console.print(f"in-process figures left out: {type(exc).__name__}: {exc}")
        return []
