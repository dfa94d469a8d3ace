"""The checker's time-ordered checks: output order per partition, committed offsets.

Order (Jepsen's rule): within one output partition, the records of one input
partition must follow that partition's input offsets upwards with no gap, where a
gap is a handled offset between two consecutive ones. A step back or a gap is
excused only when a rebalance or process event touching that input partition lies
between the two records' timestamps (widened by `order_slack_ms`), or a lasting
event (a worker rewinding a batch whose writes failed) overlaps that span.

Commits (VerifiableConsumer's and confluent-kafka-go #209's rules): per partition,
sampled committed offsets never decrease; no sample commits an offset whose
message was not yet written (its earliest output or dead letter, where the topic
stamps LogAppendTime, landed after the sample; or it was never written); and the
last sample reaches the input's end offsets.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from itertools import accumulate, pairwise

from tests.faults.model import RunData, Verdict, Written

_NEVER = float("inf")
"""The write time of a message that was never written: later than any commit."""
_UNKNOWN = float("-inf")
"""The write time of a record whose timestamp is not the broker's: cannot disprove."""


def check_order(run: RunData, verdict: Verdict) -> None:
    """Steps back and gaps per input partition that no event explains."""
    lanes: dict[tuple[int, int], list[tuple[int, Written]]] = defaultdict(list)
    for record in sorted(run.output, key=lambda r: (r.partition, r.offset)):
        sent = run.acked.get(record.seq) if record.seq is not None else None
        if sent is not None:  # offsets of unacknowledged seqs are unknown
            lanes[record.partition, sent.partition].append((sent.offset, record))
    violations: list[str] = []
    for (out_partition, partition), lane in sorted(lanes.items()):
        handled = sorted({offset for offset, _ in lane})
        for (a, ra), (b, rb) in pairwise(lane):
            if b <= a:
                kind = "back"
            elif bisect.bisect_right(handled, a) < bisect.bisect_left(handled, b):
                kind = "gap"
            else:
                continue
            if not _explained(run, partition, ra.timestamp_ms, rb.timestamp_ms):
                where = f"out {out_partition}@{ra.offset}"
                violations.append(f"p{partition} {a}->{b} ({kind}, {where})")
    verdict.figures["order_violations"] = len(violations)
    if violations:
        verdict.fail("order violations outside rebalances", len(violations), violations)


def _explained(run: RunData, partition: int, start_ms: int, end_ms: int) -> bool:
    slack = run.order_slack_ms
    lo, hi = min(start_ms, end_ms) - slack, max(start_ms, end_ms) + slack
    return any(
        e.at_ms <= hi
        and lo <= (e.at_ms if e.until_ms is None else e.until_ms)
        and (e.partitions is None or partition in e.partitions)
        for e in run.events
    )


def check_commits(run: RunData, verdict: Verdict) -> None:
    """Regressions, commits ahead of their writes, and the final commit."""
    regressions: list[str] = []
    highest: dict[int, int] = {}
    for sample in sorted(run.commits, key=lambda s: s.at_ms):
        for partition, offset in sorted(sample.offsets.items()):
            if offset < 0:
                continue  # nothing committed (yet): not a value to compare
            if offset < highest.get(partition, -1):
                regressions.append(
                    f"p{partition} {highest[partition]}->{offset} at {sample.at_ms}"
                )
            highest[partition] = max(offset, highest.get(partition, -1))
    ahead = _commits_ahead(run)
    short = _final_shortfall(run)
    verdict.figures.update(
        commit_regressions=len(regressions), commits_ahead=len(ahead)
    )
    if regressions:
        verdict.fail("committed offset regressions", len(regressions), regressions)
    if ahead:
        verdict.fail("commits ahead of their writes", len(ahead), ahead)
    if short:
        verdict.fail("final commit short of the log end", len(short), short)


def _write_times(run: RunData) -> dict[int, tuple[list[int], list[float]]]:
    """Per input partition: acked offsets (sorted) and the running latest write time.

    The running maximum answers "was everything below offset c written by time t?"
    with one bisect per sample.
    """
    first: dict[int, float] = {}
    for record in [*run.output, *run.dlq]:
        if record.seq is None:
            continue
        when = record.timestamp_ms if record.append_time else _UNKNOWN
        first[record.seq] = min(first.get(record.seq, _NEVER), when)
    rows: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for seq, sent in run.acked.items():
        rows[sent.partition].append((sent.offset, first.get(seq, _NEVER)))
    out = {}
    for partition, row in rows.items():
        row.sort()
        out[partition] = (
            [o for o, _ in row],
            list(accumulate((t for _, t in row), max)),
        )
    return out


def _commits_ahead(run: RunData) -> list[str]:
    times = _write_times(run)
    ahead = []
    for sample in run.commits:
        for partition, committed in sorted(sample.offsets.items()):
            offsets, latest = times.get(partition, ([], []))
            below = bisect.bisect_left(offsets, committed)
            if below and latest[below - 1] > sample.at_ms:
                late = (
                    "never written" if latest[below - 1] == _NEVER else "written later"
                )
                ahead.append(f"p{partition}@{committed} at {sample.at_ms} ({late})")
    return ahead


def _final_shortfall(run: RunData) -> list[str]:
    if run.end_offsets is None:
        return []
    if not run.commits:
        return ["no commit sampled"]
    last = max(run.commits, key=lambda s: s.at_ms).offsets
    return [
        f"p{p} committed {last.get(p)} of {end}"
        for p, end in sorted(run.end_offsets.items())
        if end > 0 and last.get(p) != end
    ]


def resume_times(run: RunData, verdict: Verdict) -> None:
    """Seconds from each fault's end to the next output record (figure only)."""
    stamps = sorted(r.timestamp_ms for r in run.output)
    gaps = []
    for end in run.fault_ends_ms:
        i = bisect.bisect_left(stamps, end)
        gaps.append((stamps[i] - end) / 1000 if i < len(stamps) else None)
    if gaps:
        known = [g for g in gaps if g is not None]
        verdict.figures["resume_s_max"] = round(max(known), 2) if known else "never"
