"""The fault suite's checker: each message's fate in a run (RELIABILITY.md 6.1).

Inputs are plain records, so the checks run on synthetic data in unit tests as well
as on a real run: the verifying producer's delivery reports (`Sent`, and the seqs
that were not acknowledged), the output and dead-letter topics read back to their
end (`Written`), the poison the run injected and what the DLQ must hold for it
(`Expected`), rebalance and process events (`Event`), and the group's committed
offsets sampled during the run (`CommitSample`).

| check | fails when |
| --- | --- |
| missing | an acknowledged seq is in neither the output nor the DLQ |
| unexpected | a written record has no seq, or one the producer never sent |
| misrouted | a good seq is in the DLQ, or a poison seq in the output |
| duplicates | more extra copies than the run's bound X (0 on clean paths) |
| dead letters | a poison record is not byte-identical (or, over the DLQ limit, does not name its size and sha256), lacks an `x-dlq-*` header, or names the wrong source |

A letter of reason `unreadable` (a range of a partition the worker could not read,
`x-dlq-offset` to `x-dlq-last-offset`) stands for every acknowledged seq in its
range (`expand_unreadable`); it is right only for poison the worker may be unable
to read (`Expected.unreadable_ok`, a compressed bomb).
| order | per input partition, output goes back or skips outside a rebalance (`checker_order`) |
| commits | a committed offset decreases, runs ahead of its writes, or ends short of the log (`checker_order`) |
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Final

from service.kafka.headers import DLQ_PREFIX
from tests.faults.checker_order import check_commits, check_order, resume_times
from tests.faults.model import (
    CommitSample,
    Event,
    Expected,
    RunData,
    Sent,
    Verdict,
    Written,
)

__all__ = [
    "CommitSample",
    "Event",
    "Expected",
    "RunData",
    "Sent",
    "Verdict",
    "Written",
    "check",
]

DLQ_HEADERS: Final = tuple(
    DLQ_PREFIX + name
    for name in (
        "reason",
        "stage",
        "exception-type",
        "exception-message",
        "codec",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "group",
        "worker",
    )
)
"""The error context README promises on every dead letter."""

VALUE_DROPPED: Final = DLQ_PREFIX + "value-dropped-bytes"
VALUE_SHA256: Final = DLQ_PREFIX + "value-sha256"
"""The hex sha256 of a value the dead letter was written without."""


def check(run: RunData) -> Verdict:
    """Every check of the module docstring, on one run.

    Returns:
        The figures (acked, handled, dead_lettered, missing, duplicates, ...) and
        one failure line per failed check.
    """
    verdict = Verdict()
    run = expand_unreadable(run)
    check_delivery(run, verdict)
    check_duplicates(run, verdict)
    check_dead_letters(run, verdict)
    check_order(run, verdict)
    check_commits(run, verdict)
    resume_times(run, verdict)
    return verdict


UNREADABLE: Final = b"unreadable"


def expand_unreadable(run: RunData) -> RunData:
    """`run` with each `unreadable` letter standing once for each acknowledged seq
    in its offset range (a letter whose range holds none stays, without a seq)."""
    letters = [r for r in run.dlq if r.header(DLQ_PREFIX + "reason") == UNREADABLE]
    if not letters:
        return run
    dlq = [r for r in run.dlq if r.header(DLQ_PREFIX + "reason") != UNREADABLE]
    for letter in letters:
        try:
            partition = int(letter.header(DLQ_PREFIX + "partition") or b"")
            first = int(letter.header(DLQ_PREFIX + "offset") or b"")
            last = int(letter.header(DLQ_PREFIX + "last-offset") or b"")
        except ValueError:
            dlq.append(letter)
            continue
        held = [
            s.seq
            for s in run.acked.values()
            if s.partition == partition and first <= s.offset <= last
        ]
        dlq += [replace(letter, seq=seq) for seq in held] or [letter]
    return replace(run, dlq=dlq)


def _seqs(records: Sequence[Written]) -> set[int]:
    return {r.seq for r in records if r.seq is not None}


def check_delivery(run: RunData, verdict: Verdict) -> None:
    """missing, unexpected and misrouted; the acked/handled/dead-lettered figures."""
    handled, dead = _seqs(run.output), _seqs(run.dlq)
    missing = sorted(set(run.acked) - handled - dead)
    known = set(run.acked) | run.not_acked
    unexpected = sorted(
        (r.seq for r in [*run.output, *run.dlq] if r.seq is None or r.seq not in known),
        key=lambda s: -1 if s is None else s,
    )
    misrouted = sorted((dead - set(run.poison)) | (handled & set(run.poison)))
    verdict.figures.update(
        acked=len(run.acked),
        not_acked=len(run.not_acked),
        handled=len(handled),
        dead_lettered=len(dead),
        missing=len(missing),
        unexpected=len(unexpected),
        misrouted=len(misrouted),
    )
    if missing:
        verdict.fail(
            "missing (acked, in neither output nor DLQ)", len(missing), missing
        )
    if unexpected:
        verdict.fail("unexpected records (unknown x-seq)", len(unexpected), unexpected)
    if misrouted:
        verdict.fail(
            "misrouted (good in DLQ or poison in output)", len(misrouted), misrouted
        )


def check_duplicates(run: RunData, verdict: Verdict) -> None:
    """Extra copies in output and DLQ against the bound X; the worst partition."""
    counts = Counter(r.seq for r in [*run.output, *run.dlq] if r.seq is not None)
    extra = {seq: n - 1 for seq, n in counts.items() if n > 1}
    total = sum(extra.values())
    per_partition: Counter[int] = Counter()
    for seq, n in extra.items():
        sent = run.acked.get(seq)
        per_partition[sent.partition if sent else -1] += n
    verdict.figures.update(
        duplicates=total,
        dup_bound=run.dup_bound,
        dup_max_partition=max(per_partition.values(), default=0),
    )
    if total > run.dup_bound:
        examples = [f"x-seq {s} x{n + 1}" for s, n in sorted(extra.items())]
        verdict.fail(f"duplicates over the bound X={run.dup_bound}", total, examples)


def check_dead_letters(run: RunData, verdict: Verdict) -> None:
    """Each dead letter against what was injected: value, key, headers, source."""
    problems: list[str] = []
    for record in run.dlq:
        expected = run.poison.get(record.seq) if record.seq is not None else None
        if expected is None:
            continue  # a good message in the DLQ: counted as misrouted
        problems += [
            f"x-seq {record.seq}: {p}"
            for p in _dead_letter_problems(record, expected, run)
        ]
    verdict.figures["dlq_bad_records"] = len(problems)
    if problems:
        verdict.fail("dead letters not as injected", len(problems), problems)


def _dead_letter_problems(
    record: Written, expected: Expected, run: RunData
) -> list[str]:
    out = []
    if record.header(DLQ_PREFIX + "reason") == UNREADABLE:
        missing = [h for h in DLQ_HEADERS if record.header(h) is None]
        if not expected.unreadable_ok:
            out.append("a letter of an unreadable range for a readable message")
        return out + ([f"headers missing: {', '.join(missing)}"] if missing else [])
    if record.value != expected.value:
        dropped = record.header(VALUE_DROPPED)
        size = len(expected.value or b"")
        if not (expected.droppable and record.value is None):
            got = "None" if record.value is None else f"{len(record.value)} bytes"
            out.append(f"value differs ({got}, sent {size} bytes)")
        else:
            if dropped != str(size).encode():
                out.append(f"value dropped but {VALUE_DROPPED}={dropped!r}, not {size}")
            out += _digest_problems(record, expected, required=run.value_digest)
    if record.key != expected.key:
        out.append(f"key {record.key!r} != {expected.key!r}")
    missing = [h for h in DLQ_HEADERS if record.header(h) is None]
    if missing:
        out.append(f"headers missing: {', '.join(missing)}")
    lost = [(k, v) for k, v in expected.headers if (k, v) not in record.headers]
    if lost and record.header(HEADERS_DROPPED) is not None:
        out += _dropped_headers_problems(record, lost)
    elif lost:
        out.append(f"original headers lost: {', '.join(k for k, _ in lost[:10])}")
    sent = run.acked.get(record.seq) if record.seq is not None else None
    if sent is not None:
        where = (
            record.header(DLQ_PREFIX + "partition"),
            record.header(DLQ_PREFIX + "offset"),
        )
        if where != (str(sent.partition).encode(), str(sent.offset).encode()):
            out.append(f"names {where}, sent to {sent.partition}@{sent.offset}")
        if (
            not record.append_time
            and sent.timestamp_ms
            and record.timestamp_ms != sent.timestamp_ms
        ):
            out.append(
                f"timestamp {record.timestamp_ms} != original {sent.timestamp_ms}"
            )
    return out


HEADERS_DROPPED: Final = DLQ_PREFIX + "headers-dropped"


def _dropped_headers_problems(
    record: Written, lost: Sequence[tuple[str, bytes | None]]
) -> list[str]:
    """A letter cut to its essentials: the headers it lacks must be the ones it
    names (count, bytes and sha256: each name and value preceded by its length)."""
    digest = hashlib.sha256()
    for name, value in lost:
        for part in (name.encode(), value or b""):
            digest.update(len(part).to_bytes(8, "big") + part)
    size = sum(len(n.encode()) + len(v or b"") for n, v in lost)
    got = (
        record.header(HEADERS_DROPPED),
        record.header(DLQ_PREFIX + "headers-dropped-bytes"),
        record.header(DLQ_PREFIX + "headers-sha256"),
    )
    want = (str(len(lost)).encode(), str(size).encode(), digest.hexdigest().encode())
    return [] if got == want else [f"headers dropped as {got!r}, not {want!r}"]


def _digest_problems(
    record: Written, expected: Expected, *, required: bool
) -> list[str]:
    """A dropped value's `x-dlq-value-sha256` against the sha256 of what was sent."""
    digest = record.header(VALUE_SHA256)
    if digest is None:
        return [f"value dropped without {VALUE_SHA256}"] if required else []
    want = hashlib.sha256(expected.value or b"").hexdigest()
    if digest.decode(errors="replace").strip().lower() != want:
        return [f"{VALUE_SHA256}={digest[:80]!r}, not the sha256 of the value sent"]
    return []
