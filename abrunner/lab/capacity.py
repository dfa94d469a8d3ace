"""Can this machine run every codec's worker at the rate at once (a paired run)?

A paired run puts every codec's worker, one load generator writing every codec's
topic, and the broker on the machine at the same time. If they need more cores
than it has, each waits for the others: latency measures the queue for the CPU,
and a saturated worker falls behind. So before a paired run the runner adds up
what each part is expected to need at the rate, profile by profile, and runs
sequentially when the largest sum does not fit in `os.cpu_count()` cores:

- a worker: its codec's in-process decode + read cost (`codec-bench`'s figure,
  taken before the run; with `--no-bench`, a short calibration of the same
  figure, ~0.1 s per codec) plus `WORKER_US` of consuming, batching, metrics and
  offsets per message, times the rate;
- the load generator: `LOADGEN_US` per message per topic; the broker: `BROKER_US`
  per message per topic written and read once.

The constants are this project's measurements on its 2-core machine (docs/guide/ab-run.md,
"The A/B run"): at 20,000 msg/s a worker cost 23-28 us/msg with json+pydantic
(decode + read ~15 us in-process) and 10-12 us with msgspec-msgpack (~3 us), so
about 9 us is the worker's own; a bare confluent-kafka producer sends ~255k msg/s
on one core (~4 us each). The broker's share is an estimate of the same order.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Final

from abrunner.lab import inprocess_bench
from abrunner.plan import Plan
from abrunner.results import InProcess
from abrunner.windowed import Capacity

WORKER_US: Final = 9.0
"""A worker's own CPU per message beyond decoding and reading it, at ~20k msg/s."""
LOADGEN_US: Final = 4.0
"""The load generator's CPU per message per topic (a bare producer: ~255k msg/s)."""
BROKER_US: Final = 4.0
"""The broker's CPU per message per topic, written once and read once (estimate)."""
UNKNOWN_US: Final = 30.0
"""A codec with no in-process figure is assumed to cost the slowest built-in's
decode + read (json-stdlib+pydantic on a medium event, ~29 us)."""
QUICK: Final = inprocess_bench.Tuning(repeats=1, warmups=0, min_time_s=0.02)
"""The calibration without `--bench`: one short sample per codec."""

Calibrate = Callable[[Plan], list[InProcess]]
"""Measures the plan's codecs in-process when the run took no figures."""


def _calibrate(plan: Plan) -> list[InProcess]:
    try:
        return inprocess_bench.measure(plan, lambda _what: None, QUICK)
    except Exception:  # no figure: the conservative guess stands in
        return []


def check(
    plan: Plan,
    in_process: Sequence[InProcess],
    *,
    cores: int | None = None,
    calibrate: Calibrate = _calibrate,
) -> Capacity:
    """Whether `plan` can run paired here, and the figures that decided it.

    Args:
        plan: the run.
        in_process: the in-process figures taken before the run (may be none).
        cores: the machine's cores (default `os.cpu_count()`).
        calibrate: measures the codecs in-process when `in_process` is empty.
    """
    cores = cores or os.cpu_count() or 1
    if plan.max_mode or plan.replay is not None or len(plan.codecs) < 2:
        why = (
            "--max drains a backlog per codec: paired runs are paced"
            if plan.max_mode
            else "a replay is sent by one load generator per case"
            if plan.replay is not None
            else "one codec, nothing to pair"
        )
        return Capacity(
            cores=cores,
            needed=0.0,
            workers={},
            others=0.0,
            fits=False,
            basis=why,
        )
    basis = "in-process decode + read (codec-bench)"
    figures = list(in_process)
    if not figures:
        figures, basis = calibrate(plan), "a short in-process calibration"
    if not figures:
        basis = f"no in-process figures: {UNKNOWN_US:.0f} us/msg assumed per codec"
    cost = {(f.profile, f.codec): f.decode_read_us for f in figures}
    scale = plan.rate / 1e6
    others = len(plan.codecs) * scale * (LOADGEN_US + BROKER_US)
    worst: dict[str, float] = {}
    for profile in plan.profiles:
        workers = {
            codec: scale
            * (
                cost[(profile.label, codec)] + WORKER_US
                if (profile.label, codec) in cost
                else UNKNOWN_US
            )
            for codec in plan.codecs
        }
        if sum(workers.values()) > sum(worst.values()):
            worst = workers
    needed = sum(worst.values()) + others
    return Capacity(
        cores=cores,
        needed=needed,
        workers=worst,
        others=others,
        basis=basis,
        fits=needed <= cores,
        load=os.getloadavg()[0],
    )
