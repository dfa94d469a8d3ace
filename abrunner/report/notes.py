"""The prose around the A/B tables: warnings, the legend, the decode comparison.

report.md carries all of it; the terminal gets the warnings and the comparison.
Each is Markdown (it reads as plain text too).

A codec that fell behind (`behind`): a worker that cannot keep up with the rate
handles messages as fast as it can while a backlog grows. Its CPU per message is
still what each message cost it (the kernel's accounting over the messages it
handled), so the cores it needs at the rate (that cost times the rate) hold, and
so do its RSS (with its prefetch queue full: librdkafka holds up to
`queued.max.messages.kbytes` of fetched messages, 64 MiB by default, which a
worker that keeps up does not fill) and what it rejected. Its latency does not:
it is the time a message waited in the backlog, which grows with the length of
the run, not a cost of decoding. So the answer compares the first and leaves out
the second, saying why (`saturated`), and says what the codec would need to
carry the rate (`carry`). A case that failed, lost messages or dead-lettered
everything is another matter: none of its figures compare
(`abrunner.report.answer`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final

from abrunner.plan import INPROCESS_REPEATS as REPEATS, POOL_SIZE, Plan
from abrunner.results import Report, Row, Summary

DECODE_TOLERANCE: Final = 0.25
"""Kafka-path and in-process decode medians further apart than 25 % get a note:
the worker's histogram alone is within ~13 % (three buckets per doubling), and
repeated runs on the project's 2-core machine move by 10-15 %."""

_LEGEND: Final = {
    "GC ms/s": "milliseconds per second the worker spent in cyclic garbage "
    "collection, all generations (`worker_gc_seconds_total`, wall time), over the "
    "load window",
    "GC per 1k msgs": "cyclic garbage collections, all generations "
    "(`worker_gc_collections_total`), per 1,000 messages handled",
    "decode % of CPU": "the decode's share of the worker's CPU per message: the "
    "mean of its sampled single decodes (`decode_us` in report.json, CPU time of "
    "the worker's thread) over CPU us/msg, repeat by repeat; the rest is the "
    "consumer around the decode (librdkafka, batches, offsets, the logic, "
    "metrics). The decodes are a part of that CPU, so the share is at most 100 %; "
    "a share measured above it (a worker that timed its decodes in wall time, as "
    "workers did before, counting a preempted decode's wait) is not a share and "
    "reads `-` with why; report.json: `decode_share`, a fraction, as measured",
    "decode us": "median of the worker's sampled single decodes: every 128th "
    "message timed with `thread_time_ns` (the CPU time of the worker's thread, "
    "less the clock's own cost, `worker_timer_overhead_seconds`), from the "
    "`worker_decode_seconds` histogram; report.json keeps their mean too "
    "(`decode_us`)",
    "decode us in-process": "the same decoder in a tight loop in the runner's "
    f"process (`codec-bench`, CPU time, median of {REPEATS} samples) over the load "
    f"generator's pool ({POOL_SIZE} payloads, the same seed), before the Kafka "
    "cases",
    "Kafka/in-process": "`decode us` over `decode us in-process`",
    "decode+read us in-process": "as `decode us in-process`, plus the stub logic "
    "reading every field (the fair figure for protobuf, which parses lazily)",
    "+all us in-process": "decode, then every field read into Python values: the "
    "column that compares like with like across eager codecs and lazy ones "
    "(protobuf's upb, the FlatBuffers view), whose `decode us` defers work to the "
    "reads",
    "+3 fields us in-process": "decode, then only the first three top-level fields "
    "read: a narrow consumer's figure, where a lazy format can save (on Kafka: "
    "`--worker-arg=--logic=fields --worker-arg=--read-fields=3`)",
}
"""What the columns that need it mean, by header."""

_WHY: Final = (
    "Both are CPU time, but not the same measurement: a tight in-process loop "
    "keeps the decoder's code and data in the CPU caches, while the worker's loop "
    "also runs librdkafka, the business logic and the metrics between two "
    "decodes, which evict them (and on this shared machine the broker and the load "
    "generator run between them too)."
)


def interrupted(report: Report) -> str | None:
    """The line that opens an interrupted report, None for a complete one."""
    if not report.interrupted:
        return None
    done, total = len(report.results), len(report.plan.cases())
    return (
        f"**Interrupted**: the run was stopped after {done} of {total} cases; the "
        "tables hold the cases finished."
    )


def repeat_warning(plan: Plan) -> str | None:
    """The warning for a single run per case, None with repeats."""
    if plan.repeat > 1:
        return None
    return (
        "**Warning: one run per case** (`--repeat 1`), so the spread (run-to-run "
        "noise, ±10-15 % on the project's shared 2-core machine) is unknown; use "
        "`--repeat 3` or more before deciding."
    )


def cores(target_rate: float | None) -> str | None:
    """What the cores column means, None when the report has none."""
    if not target_rate:
        return None
    return (
        f"`cores at {target_rate:,.0f} msg/s`: CPU us/msg x {target_rate:,.0f} / 1e6, "
        "the worker cores that rate needs at the cost per message measured here "
        "(`--target-rate`, default the run's `--rate`)."
    )


def legend(headers: set[str]) -> list[str]:
    """A Markdown list explaining the columns among `headers` that need it."""
    return [f"- `{h}`: {text}." for h, text in _LEGEND.items() if h in headers]


def decode_differs(summary: Summary) -> str | None:
    """Where the Kafka path's decode median differs from the in-process one by more
    than `DECODE_TOLERANCE`, a paragraph saying so and why that may be; else None.
    """
    far = [
        f"`{codec}` on `{profile}` ({ratio:.2f}x)"
        for profile, rows in summary.items()
        for codec, row in rows.items()
        if (ratio := row.median("decode_vs_in_process")) is not None
        and math.isfinite(ratio)
        and abs(ratio - 1) > DECODE_TOLERANCE
    ]
    if not far:
        return None
    return (
        f"The Kafka path's decode median differs from the in-process one by more "
        f"than {DECODE_TOLERANCE:.0%} for {', '.join(far)}. {_WHY}"
    )


def baseline_behind(report: Report) -> str | None:
    """The caveat on ratios to a baseline that fell behind or failed; else None."""
    plan = report.plan
    if plan.max_mode:
        return None
    failed, slow = [], []
    for profile, rows in report.summary.items():
        base = rows.get(plan.baseline)
        if base is None or len(rows) < 2:
            continue
        if base.errors or not base.runs:
            failed.append(f"`{profile}`")
        elif not base.kept_up or base.not_drained:
            slow.append(f"`{profile}`")
    said = []
    if failed:
        said.append(
            f"**Caveat: the baseline `{plan.baseline}` failed** on "
            f"{', '.join(failed)}, so no ratio is printed against it there."
        )
    if slow:
        said.append(
            f"**Caveat: the baseline `{plan.baseline}` did not keep up** on "
            f"{', '.join(slow)}. Its figures were taken while a backlog grew: its "
            "CPU per message, cores at the rate, RSS (its prefetch queue full) and "
            "rejections still hold and are compared; its latency is the time "
            "messages waited in the backlog, so no latency ratio is taken against "
            "it. For a latency comparison choose a baseline that keeps up "
            "(`--baseline`) or a lower `--rate`."
        )
    return "\n\n".join(said) or None


def invalid_latencies(report: Report) -> str | None:
    """Which cases had sampled latencies the worker could not observe, None if none."""
    bad = [
        f"`{r.codec}` on `{r.profile}` (repeat {r.repeat}): {r.e2e_invalid:,}"
        for r in report.results
        if r.e2e_invalid
    ]
    if not bad:
        return None
    return (
        "**Invalid latencies**: the worker left out of its e2e figures sampled "
        f"messages whose `x-sent-ns` could not give a latency, for {', '.join(bad)} "
        "(`worker_e2e_latency_invalid_total`, by reason: `unparsable`, `negative`: "
        "a producer clock ahead of the worker's, `too_large`: older than 30 days)."
    )


def schema_limits(plan: Plan) -> list[str]:
    """The codecs left out for the schema, the checks a measured codec skips, and
    the model's code it does not run."""
    lines: list[str] = []
    for codec, why in plan.left_out:
        head, *fields = why.removeprefix("schema error: ").splitlines()
        if not fields:
            lines += [f"**Left out: `{codec}`**: {head}.", ""]
            continue
        lines += [f"**Left out: `{codec}`**: {head}", ""]
        lines += [f"- {line.strip()}" for line in fields] + [""]
    if plan.skipped:
        lines += [
            "Checks your own form makes on decode that a measured codec skips (its "
            "CPU figure does not include them; `codec-schema check` lists the same):",
            "",
            *(f"- {line}" for line in plan.skipped),
            "",
        ]
    if plan.validators or plan.not_run:
        lines += [
            "Code of your model a measured codec does not run (the pydantic codecs "
            "run it, and their CPU figure includes it; `codec-schema check` lists "
            "the same), and the validators a codec runs in its Struct "
            "(`--run-validators` runs the after validators in the msgspec, Avro and "
            "Cap'n Proto Structs):",
            "",
            *(f"- {line}" for line in (*plan.validators, *plan.not_run)),
            "",
        ]
    return lines


def left_out(plan: Plan) -> str | None:
    """The terminal's word on each codec the schema left out (report.md lists
    every field); None when none was."""
    said = []
    for codec, why in plan.left_out:
        head = why.removeprefix("schema error: ").splitlines()[0].rstrip(":")
        where = plan.out_dir / "report.md"
        said.append(f"Left out: `{codec}` ({head}; each is listed in {where}).")
    return "\n\n".join(said) or None


LATENCY: Final = frozenset({"e2e_p50_ms", "e2e_p99_ms", "e2e_p999_ms"})
"""The figures a backlog falsifies."""
WHY: Final = (
    "its latency is the time messages waited in its backlog, which grows with "
    "the run, not a cost of its decoding"
)


def behind(row: Row | None, max_mode: bool) -> bool:
    """The row's worker fell behind the rate (or was not drained), and its
    figures are otherwise measured: no failure, no loss, something decoded.

    A `--max` run drains a backlog on purpose: never behind.
    """
    if row is None or max_mode or not row.runs or row.errors or row.lost:
        return False
    if row.rejected_all is not None:
        return False
    return not row.kept_up or bool(row.not_drained)


def carry(report: Report, row: Row) -> str:
    """What a worker that fell behind did and would need, as a clause:
    `did not keep up with 40,000 msg/s here: it handled 26,243 msg/s with 97 %
    of a core (lag 312,622 when the load stopped); at 38.1 us of CPU a message
    the rate needs 1.52 cores, ...`."""
    rate = report.plan.rate
    text = f"did not keep up with {rate:,.0f} msg/s here"
    done, cpu = row.median("throughput"), row.median("cpu_pct")
    lag = row.median("lag_end")
    if done is not None and cpu is not None:
        text += f": it handled {done:,.0f} msg/s with {cpu:.0f} % of a core"
        if row.not_drained:
            text += f" ({row.not_drained:,} still queued after the drain)"
        elif lag:
            text += f" (lag {lag:,.0f} when the load stopped)"
    us = row.median("cpu_us_per_msg")
    if us is None:
        return text
    cores = us * rate / 1e6
    text += f"; at {us:.1f} us of CPU a message the rate needs {cores:.2f} "
    if cores > 1:
        processes = math.ceil(cores)
        return text + (
            f"cores, more than the one core a worker process decodes on: "
            f"{processes} worker processes or more, the partitions spread over them"
        )
    got = "" if cpu is None else f", and it got {cpu:.0f} % of one here"
    return text + f"of a core{got} (the machine's other work took the rest)"


def saturated(report: Report, shown: Iterable[str]) -> str | None:
    """The line under the short table naming the codecs whose latency is left
    out, and why; None when every codec kept up."""
    names = [f"`{c}`" for c in shown]
    if not names:
        return None
    return (
        f"Latency is left out for {', '.join(names)}: a worker that falls behind "
        f"still measures its CPU per message, cores at the rate, RSS (its prefetch "
        f"queue full) and rejections, but {WHY}. The full figures keep it."
    )
