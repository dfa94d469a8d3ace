"""A dead letter the topic refuses: cut to its essentials, and past that, a local spool.

A dead letter can be refused for what it is, not for where it goes: too large
(`MSG_SIZE_TOO_LARGE`: its value, or its headers alone, e.g. 1,100 headers of 1
KB against a topic's 1,000,000-byte `max.message.bytes`), a timestamp the topic
does not accept (`INVALID_TIMESTAMP`), or a record the topic's rules refuse
(`INVALID_RECORD`, `POLICY_VIOLATION`). Writing it again as it is fails again,
for ever. So each refusal takes it one step down (`ConfirmedProducer`):

1. as it is: key, value, headers, timestamp, plus the `x-dlq-*` context;
2. without its value (`x-dlq-value-dropped-bytes`, `x-dlq-value-sha256`);
3. its essentials (`essentials`): no value, no original timestamp (its
   `x-dlq-timestamp` stays), a key over `SMALL_BYTES` and every original header
   over `SMALL_BYTES` dropped, and original headers past `KEPT_HEADER_BYTES` in
   all; what was dropped is summed up in `x-dlq-key-dropped-bytes`,
   `x-dlq-key-sha256`, `x-dlq-headers-dropped` (count), `x-dlq-headers-dropped-bytes`
   and `x-dlq-headers-sha256` (of the dropped headers, each name and value
   preceded by its length);
4. refused even so: the last resort, `Spool`, a local file of JSON lines (one per
   letter, kept bytes in base64), with `worker_dead_letters_spooled_total` and a
   `dead_letter_spooled` error line (at most one every 30 s) to alert on. The
   partition moves on: the letter is on the worker's disk, not lost.

A refusal that is about the topic or the cluster (deleted, an ACL, timeouts) is not
the letter's fault: it is retried as it is, with the batch rewound
(`service.delivery.held_partitions`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Final

from confluent_kafka import KafkaError

from service.kafka.headers import DLQ_PREFIX
from service.kafka.protocols import Headers

REFUSED_AS_IS: Final = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.RECORD_LIST_TOO_LARGE,
        KafkaError.INVALID_RECORD,
        KafkaError.INVALID_TIMESTAMP,
        KafkaError.POLICY_VIOLATION,
        KafkaError.INVALID_MSG,
    }
)
"""Write errors about the record itself: the same record is refused again."""

SMALL_BYTES: Final = 256
"""A key, or an original header (name and value), this large or smaller is kept
in a letter cut to its essentials."""
KEPT_HEADER_BYTES: Final = 4096
"""The original headers a letter cut to its essentials keeps, in all."""
SPOOL_KEEP_BYTES: Final = 1 << 20
"""A spooled letter keeps its key, value and headers up to this many bytes in
all; past it, their sizes and sha256 only."""


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).hexdigest().encode()


def _header_bytes(name: str, value: bytes | None) -> int:
    return len(name.encode()) + len(value or b"")


def essentials(record: dict[str, Any], error_name: str) -> None:
    """Cut a dead letter (a `ConfirmedProducer` record) to its essentials, in
    place (step 3 of the module docstring)."""
    extra: Headers = []
    key = record.get("key")
    if key is not None and len(key) > SMALL_BYTES:
        extra += [
            (DLQ_PREFIX + "key-dropped-bytes", str(len(key)).encode()),
            (DLQ_PREFIX + "key-sha256", _sha(key)),
        ]
        record["key"] = None
    kept: Headers = []
    dropped: Headers = []
    room = KEPT_HEADER_BYTES
    for name, value in record.get("headers") or ():
        size = _header_bytes(name, value)
        if name.startswith(DLQ_PREFIX) and size <= SMALL_BYTES:
            kept.append((name, value))
        elif size <= SMALL_BYTES and size <= room:
            room -= size
            kept.append((name, value))
        else:
            dropped.append((name, value))
    if dropped:
        digest = hashlib.sha256()
        for name, value in dropped:
            for part in (name.encode(), value or b""):
                digest.update(len(part).to_bytes(8, "big") + part)
        extra += [
            (DLQ_PREFIX + "headers-dropped", str(len(dropped)).encode()),
            (
                DLQ_PREFIX + "headers-dropped-bytes",
                str(sum(_header_bytes(n, v) for n, v in dropped)).encode(),
            ),
            (DLQ_PREFIX + "headers-sha256", digest.hexdigest().encode()),
        ]
    extra.append((DLQ_PREFIX + "cut-reason", error_name.encode()))
    record["headers"] = kept + extra
    record.pop("timestamp", None)
    record["level"] = 3


class Spool:
    """The dead letters no topic took, as JSON lines in a local file (append only).

    Args:
        path: the file (its folder is created on first use; mode 0600).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()  # delivery reports may come from flush()

    def write(self, record: dict[str, Any], error: str) -> None:
        """Append one letter (the original bytes if they fit `SPOOL_KEEP_BYTES`).

        Raises:
            OSError: the file cannot be written (the caller retries the batch).
        """
        key, value = record.get("key"), record.get("original_value")
        if value is None:
            value = record.get("value")
        headers = record.get("original_headers") or record.get("headers") or []
        sizes = (
            len(key or b"")
            + len(value or b"")
            + sum(_header_bytes(n, v) for n, v in headers)
        )
        line: dict[str, Any] = {
            "topic": record.get("topic"),
            "refused": error,
            "dlq_headers": {
                n[len(DLQ_PREFIX) :]: (v or b"").decode(errors="replace")
                for n, v in (record.get("headers") or [])
                if n.startswith(DLQ_PREFIX)
            },
            "key_bytes": None if key is None else len(key),
            "value_bytes": None if value is None else len(value),
            "value_sha256": None if value is None else _sha(value).decode(),
        }
        if sizes <= SPOOL_KEEP_BYTES:
            line["key_b64"] = _b64(key)
            line["value_b64"] = _b64(value)
            line["headers_b64"] = [[n, _b64(v)] for n, v in headers]
        data = (json.dumps(line, separators=(",", ":")) + "\n").encode()
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()
