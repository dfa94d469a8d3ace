"""The message headers of DESIGN.md, named once for every part of the project.

| header | meaning |
| --- | --- |
| `content-type` | the wire format: `application/json`, `application/vnd.msgpack`, `application/x-protobuf` |
| `x-seq` | the message's sequence number within its run (no-loss checks) |
| `x-sent-ns` | the intended send time, ns since the epoch (latency without coordinated omission) |
| `x-run-id` | the load-generation run the message belongs to |

Dead letters carry the original headers plus `x-dlq-*` context (`service.delivery.letter_headers`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from service.kafka.protocols import KafkaMessage

CONTENT_TYPE: Final = "content-type"
SEQ: Final = "x-seq"
SENT_NS: Final = "x-sent-ns"
RUN_ID: Final = "x-run-id"
DLQ_PREFIX: Final = "x-dlq-"

STAMPED: Final = frozenset({CONTENT_TYPE, SEQ, SENT_NS, RUN_ID})
"""The headers the load generator writes itself (a replay stamps them anew)."""

_MAX_STAMP_CHARS: Final = 32
"""Longer `x-sent-ns` values are unparsable (ns since the epoch take 19 digits)."""


def last_header(
    headers: Iterable[tuple[str, bytes | None]] | None, name: str
) -> bytes | None:
    """The value of the last header called `name`, None if there is none.

    Kafka's convention (the Java client's `Headers.lastHeader`): a header added
    later overrides an earlier one of the same name, so a message relabelled on
    its way (`content-type` added again by a proxy or a retry) is read by its
    last label."""
    found = None
    for key, value in headers or ():
        if key == name:
            found = value
    return found


def sent_ages(msgs: Sequence[KafkaMessage], now_ns: int) -> tuple[list[int], int]:
    """Nanoseconds from each message's intended send time to `now_ns` (real
    messages only), and how many stamps were unparsable.

    The send time is `x-sent-ns`, else the Kafka timestamp. A header from any
    producer may hold anything: a value that is not a positive decimal integer is
    `unparsable`; ages that cannot be latencies (negative: the producer's clock is
    ahead; older than `MAX_E2E_LATENCY_S`) are sorted out where the ages are
    bucketed (`AgeHistogramChild`), so clock skew shows instead of skewing the
    histogram. Only the sampled messages come here, never each one, and per
    message only what a bare loop reading the stamp does, plus the checks.
    """
    ages: list[int] = []
    append, unparsable = ages.append, 0
    for m in msgs:
        headers = m.headers()
        if headers:
            for key, value in headers:
                if key == SENT_NS and value is not None:
                    try:  # int() of a long digit string is quadratic: cap the length
                        sent = int(value) if len(value) <= _MAX_STAMP_CHARS else 0
                    except ValueError:
                        sent = 0
                    if sent > 0:
                        append(now_ns - sent)
                    else:
                        unparsable += 1
                    break
            else:
                if (ms := m.timestamp()[1]) > 0:
                    append(now_ns - ms * 1_000_000)
        elif m.error() is None and (ms := m.timestamp()[1]) > 0:
            append(now_ns - ms * 1_000_000)
    return ages, unparsable
