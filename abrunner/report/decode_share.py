"""The decode's share of the worker's CPU per message, and what a small one means.

`CPU us/msg` is everything the worker spends per message: polling and fetching in
librdkafka, building batches, storing offsets, the business logic, metrics,
garbage collection, and the decode. At a low rate batches are small, so the
consumer's fixed cost per poll and per batch is spread over few messages and
swamps the codec: a replay at 2,000 msg/s measured 32-37 us/msg for every codec,
at 10,000 msg/s 13-22. The share says how much of the CPU per message is the
decode, so that a small difference between codecs reads as what it is.

The share is the mean of the worker's sampled single decodes (`decode_us`: the
`worker_decode_seconds` histogram's sum over its count, every 128th message timed,
so every message is equally likely to be timed) over `cpu_us_per_msg`, in the
same repeat and the same window (the load and its drain). The mean, not the
median the table shows as `decode us`: a share of the time spent adds every
decode, slow ones too, as a mean does and a median does not. The decodes are
timed in the CPU time of the worker's thread (`service.loop.hotpath`), so they
are a part of the process's CPU per message and the share is at most 100 %, on
a shared machine too: a decode preempted by the broker, the load generator or
another worker does not count its wait.

Workers before timed their decodes in wall time, which counted such a wait: a
paired run of four workers on two cores read 655 % for json-stdlib+pydantic. A
share measured above 100 % is not a share, so `cell` shows none and says why;
report.json keeps the measured fraction.

`spread` gives a row's figure (per repeat, then median and min-max, like the
other figures); `cell` the table's text; `note` the paragraph report.md and the
terminal print when every codec measured on a profile decodes in under
`LOW_SHARE` of its CPU.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Final

from abrunner.results import CaseResult, Report, Spread

SHARE: Final = "decode_share"
"""The row figure (a fraction, 0.18 for 18 %) in report.json's `summary`."""
OVER: Final = "- (decode samples over 100 % of the CPU: not a share)"
"""The cell of a share measured above all of the CPU (wall-time decode samples
from a worker before they were CPU time, which counted preemption)."""
LOW_SHARE: Final = 0.25
"""Under this share the decode is not what the CPU per message is made of: even a
decoder twice as fast would save under an eighth of it, about the ±10-15 % that
repeated runs move by on the project's 2-core machine."""


def share(decode_us: float | None, cpu_us_per_msg: float | None) -> float | None:
    """The decode's share of the CPU per message: `decode_us` / `cpu_us_per_msg`.

    None when either is missing or not finite, or the CPU is not positive (a
    failed case, no decode samples, no CPU measured): never a division by zero.
    """
    if decode_us is None or cpu_us_per_msg is None:
        return None
    if not (math.isfinite(decode_us) and math.isfinite(cpu_us_per_msg)):
        return None
    if decode_us < 0 or cpu_us_per_msg <= 0:
        return None
    return decode_us / cpu_us_per_msg


def spread(runs: Sequence[CaseResult]) -> dict[str, Spread]:
    """`{SHARE: median, min, max}` over the measured repeats that have a share.

    Each repeat's decode is divided by the same repeat's CPU, then folded; empty
    when no repeat has both figures.
    """
    values = [
        s
        for r in runs
        if r.error is None and (s := share(r.decode_us, r.cpu_us_per_msg)) is not None
    ]
    if not values:
        return {}
    return {SHARE: Spread(statistics.median(values), min(values), max(values))}


def cell(figure: Spread | None, spread: bool) -> str:
    """The table's cell: the share, and with `spread` its min-max; "-" with why
    when a repeat measured over 100 % (not a share: `OVER`), "-" for none."""
    if figure is None:
        return "-"
    if figure.max > 1:
        return OVER
    text = f"{figure.median:.0%}"
    if spread and figure.min != figure.max:
        text += f" [{figure.min:.0%}-{figure.max:.0%}]"
    return text


def _pct(value: float) -> str:
    return f"{100 * value:.0f} %"


def note(report: Report) -> str | None:
    """Where every codec measured on a profile decodes in under `LOW_SHARE` of its
    CPU, a paragraph naming each codec's share and what that means at this rate,
    and which "no detectable difference" verdicts it explains; else None.

    Paced runs only: a `--max` run has no rate to raise.
    """
    plan = report.plan
    if plan.max_mode:
        return None
    low: dict[str, dict[str, float]] = {}
    for profile, rows in report.summary.items():
        shares = {
            codec: value
            for codec, row in rows.items()
            if (value := row.median(SHARE)) is not None
        }
        if shares and max(shares.values()) < LOW_SHARE:
            low[profile] = shares
    if not low:
        return None
    named = "; ".join(
        f"`{profile}`: "
        + ", ".join(f"`{codec}` {_pct(value)}" for codec, value in shares.items())
        for profile, shares in low.items()
    )
    rate = f"{plan.rate:,.0f} msg/s"
    text = (
        f"**Decoding is a small share of the CPU at {rate}**: the mean decode is "
        f"under {_pct(LOW_SHARE)} of CPU us/msg for every codec measured ({named}). "
        "At this rate the worker's CPU per message is mostly the consumer's fixed "
        "cost (polling, fetching and batching in librdkafka, storing offsets) and "
        "the work around each message (the business logic, metrics), not decoding "
        "(at a low rate batches are small, so the cost per poll and per batch is "
        "spread over few messages). A small difference between codecs here means "
        "decoding is not your cost at this rate, not that the codecs decode alike "
        "(see `decode us`). What a codec saves at a higher rate is shown by a run "
        "at that rate (`--rate`, or `--max` for one process's maximum)."
    )
    alike = [
        f"`{r.codec}` on `{r.profile}`"
        for r in report.ratios
        if r.figure == "cpu_us_per_msg"
        and r.verdict == "no detectable difference"
        and r.profile in low
    ]
    if alike:
        text += (
            f' The verdict "no detectable difference" in CPU us/msg from '
            f"`{plan.baseline}` for {', '.join(alike)} reads the same way: at {rate} "
            "decoding is not your cost, and a faster decoder has little to save."
        )
    return text
