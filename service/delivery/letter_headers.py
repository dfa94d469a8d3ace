"""A dead letter's error context: the original headers plus `x-dlq-*` (never a
payload value)."""

from __future__ import annotations

import os
import socket
from typing import Final

from schemas.errors import CodecError
from service.delivery.unreadable import UnreadableBatch
from service.kafka.headers import DLQ_PREFIX
from service.kafka.protocols import Headers, KafkaMessage

_MAX_MESSAGE: Final = 200
WORKER_ID: Final = f"{socket.gethostname()}-{os.getpid()}"


def dead_letter_headers(
    msg: KafkaMessage,
    error: Exception,
    *,
    codec: str,
    group: str,
    stage: str,
    attempts: int = 1,
) -> Headers:
    """The original headers plus `x-dlq-*` error context (never payload values).

    A logic error's letter also says how many attempts the logic made
    (`x-dlq-attempts`, the retry budget); an unreadable range's names its first
    and last offsets (`x-dlq-offset`, `x-dlq-last-offset`)."""
    if isinstance(error, CodecError):
        reason, exc_type, text = error.reason, error.cause_type, str(error)
    else:  # a LogicError, whose text never quotes input (see service/delivery/dead_letters.py)
        cause = error.__cause__ or error
        reason = "logic"
        exc_type = f"{type(cause).__module__}.{type(cause).__qualname__}"
        text = str(error)
    offset = msg.offset()
    if isinstance(error, UnreadableBatch):
        offset = error.start
        headers: Headers = [(DLQ_PREFIX + "last-offset", str(error.last).encode())]
    else:
        headers = list(msg.headers() or ())
    headers += [
        (DLQ_PREFIX + "reason", reason.encode()),
        (DLQ_PREFIX + "stage", stage.encode()),
        (DLQ_PREFIX + "exception-type", (exc_type or type(error).__name__).encode()),
        (DLQ_PREFIX + "exception-message", text[:_MAX_MESSAGE].encode()),
        (DLQ_PREFIX + "codec", codec.encode()),
        (DLQ_PREFIX + "topic", (msg.topic() or "").encode()),
        (DLQ_PREFIX + "partition", str(msg.partition()).encode()),
        (DLQ_PREFIX + "offset", str(offset).encode()),
        (DLQ_PREFIX + "timestamp", str(msg.timestamp()[1]).encode()),
        (DLQ_PREFIX + "group", group.encode()),
        (DLQ_PREFIX + "worker", WORKER_ID.encode()),
    ]
    if stage == "process":
        headers.append((DLQ_PREFIX + "attempts", str(attempts).encode()))
    return headers
