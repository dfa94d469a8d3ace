"""A codec that fell behind: what still holds, what it would need, what does not.

A worker that cannot keep up with the rate handles messages as fast as it can
while a backlog grows. Its CPU per message is still what each message cost it
(the kernel's accounting over the messages it handled), so the cores it needs
at the rate (that cost times the rate) hold, and so do its RSS (with its
prefetch queue full: librdkafka holds up to `queued.max.messages.kbytes` of
fetched messages, 64 MiB by default, which a worker that keeps up does not
fill) and what it rejected. Its latency does not: it is the time a message
waited in the backlog, which grows with the length of the run, not a cost of
decoding. So the answer compares the first and leaves out the second, saying
why, and says what the codec would need to carry the rate (`carry`).

A case that failed, lost messages or dead-lettered everything is another
matter: none of its figures compare (`abrunner.report.answer`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final

from abrunner.results import Report, Row

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
            f"cores, more than one worker process decodes with (its decoding runs "
            f"on one core): {processes} worker processes or more, the partitions "
            "spread over them"
        )
    got = "" if cpu is None else f", and it got {cpu:.0f} % of one here"
    return text + f"of a core{got} (the machine's other work took the rest)"


def note(report: Report, shown: Iterable[str]) -> str | None:
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
