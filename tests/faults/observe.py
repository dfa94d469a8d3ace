"""What the fault suite reads back: topics to their end, commits, worker logs."""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaException,
    TopicPartition,
)

from abrunner.lab import worker_probe
from service.kafka.headers import DLQ_PREFIX, SEQ
from tests.faults.model import CommitSample, Event, Written
from tests.faults.producer import quiet

_BATCH: Final = 1000
READ_WAIT_S: Final = 0.1
"""librdkafka's `consume(n, timeout)` waits its whole timeout unless it has `n`
messages: a read to a topic's end waits this long at its end, not more."""
_TRACE_LINES: Final = 12
"""Lines of a traceback quoted in a report: the exception and its last frames."""


def now_ms() -> int:
    """Wall-clock milliseconds: the clock of broker timestamps and log lines."""
    return time.time_ns() // 1_000_000


def _reader(bootstrap: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"faults-reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **quiet(),
        }
    )


def read_to_end(
    bootstrap: str, topic: str, *, values: bool = False, timeout: float = 60
) -> list[Written]:
    """Every record of `topic` up to its high watermarks at the call.

    Args:
        bootstrap: the broker.
        topic: the topic to read.
        values: keep keys, values and headers (dead letters), not only `x-seq`.
        timeout: the longest the read may take.

    Raises:
        TimeoutError: the end was not reached in time.
    """
    consumer = _reader(bootstrap)
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        ends = {}
        for p in meta.partitions:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=10
            )
            if high > low:
                ends[p] = high
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        out: list[Written] = []
        deadline = time.monotonic() + timeout
        while ends:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: not read to the end in {timeout:.0f} s")
            for m in consumer.consume(_BATCH, READ_WAIT_S):
                if m.error() is not None:
                    continue
                out.append(_written(m, values))
                partition, offset = m.partition() or 0, m.offset() or 0
                if offset + 1 >= ends.get(partition, 0):
                    ends.pop(partition, None)
        return out
    finally:
        consumer.close()


def read_spool(folder: Path) -> list[Written]:
    """The dead letters workers spooled to `folder` (`*.spool`, JSON lines of
    `service.delivery.letter_ladder.Spool`), as records read from the DLQ."""
    out: list[Written] = []
    for path in sorted(folder.glob("*.spool")) if folder.is_dir() else ():
        for text in path.read_text().splitlines():
            line = json.loads(text)

            def raw(b64: str | None) -> bytes | None:
                return None if b64 is None else base64.b64decode(b64)

            headers = [(n, raw(v)) for n, v in line.get("headers_b64") or []]
            headers += [
                (DLQ_PREFIX + k, v.encode()) for k, v in line["dlq_headers"].items()
            ]
            seq = next((v for n, v in headers if n == SEQ and v), None)
            out.append(
                Written(
                    int(seq) if seq and seq.isdigit() else None,
                    -1,
                    len(out),
                    0,
                    append_time=True,  # its original time is in x-dlq-timestamp
                    key=raw(line.get("key_b64")),
                    value=raw(line.get("value_b64")),
                    headers=tuple(headers),
                )
            )
    return out


def _written(m: Any, values: bool) -> Written:
    headers = tuple(m.headers() or ())
    seq = None
    for key, value in headers:
        if key == SEQ and value is not None:
            with contextlib.suppress(ValueError):
                seq = int(value)
    kind, stamp = m.timestamp()
    return Written(
        seq,
        m.partition(),
        m.offset(),
        stamp,
        append_time=kind == TIMESTAMP_LOG_APPEND_TIME,
        key=m.key() if values else None,
        value=m.value() if values else None,
        headers=headers if values else (),
    )


def end_offsets(
    bootstrap: str, topic: str, partitions: int, *, timeout: float = 60
) -> dict[int, int]:
    """The high watermark of each partition of `topic`.

    Asked again for up to `timeout` s while the broker cannot answer yet: a
    broker thawed after a long SIGSTOP (D11) answered "Unknown partition" for a
    moment, and a fresh client's first metadata can lag on a loaded machine.
    """
    deadline = time.monotonic() + timeout
    while True:
        consumer = _reader(bootstrap)
        try:
            return {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[
                    1
                ]
                for p in range(partitions)
            }
        except KafkaException:
            if time.monotonic() > deadline:
                raise
        finally:
            consumer.close()
        time.sleep(1)


class Monitor:
    """Samples a group's committed offsets every `every` s in a thread.

    Args:
        bootstrap: the broker.
        group: the worker's consumer group (only read: this client never joins it).
        topic: the input topic.
        partitions: its partition count.
        every: seconds between samples.
        on_tick: also called every period (the harness samples its workers).
    """

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        partitions: int,
        *,
        every: float = 0.5,
        on_tick: Callable[[], None] | None = None,
    ) -> None:
        self.commits: list[CommitSample] = []
        self.failed_samples = 0
        self._tps = [TopicPartition(topic, p) for p in range(partitions)]
        self._every, self._on_tick = every, on_tick
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,  # it only reads the group's offsets
                **quiet(),
            }
        )
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def widen(self, partitions: int) -> None:
        """Sample `partitions` partitions from now on (some were added)."""
        topic = self._tps[0].topic
        self._tps = [TopicPartition(topic, p) for p in range(partitions)]

    def start(self) -> Monitor:
        """Start sampling."""
        self._thread.start()
        return self

    def sample(self, timeout: float = 5.0) -> CommitSample | None:
        """Take one sample now (None if the broker did not answer)."""
        try:
            with self._lock:
                got = self._consumer.committed(self._tps, timeout=timeout)
        except KafkaException:
            self.failed_samples += 1
            return None
        sample = CommitSample(now_ms(), {tp.partition: tp.offset for tp in got})
        self.commits.append(sample)
        return sample

    def latest(self) -> dict[int, int]:
        """The last sampled committed offsets (empty before the first sample)."""
        return dict(self.commits[-1].offsets) if self.commits else {}

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self.sample(timeout=min(5.0, 4 * self._every))
            if self._on_tick is not None:
                self._on_tick()

    def stop(self) -> None:
        """Stop sampling; close the client (once: a second call does nothing)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(15)
        with self._lock:
            self._consumer.close()


@dataclass
class RewindWatch:
    """One worker's failed writes, from its /metrics (`Run` feeds it every tick).

    When a batch's dead letters or output are not acknowledged in time (or
    fail), the worker rewinds the batch's partitions to its first offsets and
    retries it later (counting `worker_delivery_failures_total` and holding
    `worker_degraded` at 1 meanwhile). Each failed attempt may leave that batch's
    landed writes to be written again, and the retry steps back in the output:
    so each window from the last calm sample before a failure to the first calm
    one after is a lasting event for the order check.
    """

    failures: int = 0
    degraded_seen: bool = False
    windows: list[tuple[int, int]] = field(default_factory=list)
    _calm_ms: int | None = None
    _since_ms: int | None = None

    def observe(self, scraped: worker_probe.Metrics, at_ms: int) -> int:
        """Take one scrape made at `at_ms`; return the failures new since the last."""
        failures = int(scraped.total("worker_delivery_failures_total"))
        degraded = scraped.total("worker_degraded") > 0
        new = max(0, failures - self.failures)
        self.failures = max(failures, self.failures)
        self.degraded_seen = self.degraded_seen or degraded
        if (new or degraded) and self._since_ms is None:
            self._since_ms = at_ms if self._calm_ms is None else self._calm_ms
        if not degraded:
            self.close(at_ms)
            self._calm_ms = at_ms
        return new

    def close(self, at_ms: int) -> None:
        """End an open window at `at_ms` (the worker is calm, or gone)."""
        if self._since_ms is not None:
            self.windows.append((self._since_ms, at_ms))
            self._since_ms = None

    def events(self) -> list[Event]:
        """The windows as events of every partition."""
        return [Event(a, "rewind", None, until_ms=b) for a, b in self.windows]


def _stamp(line: dict[str, Any]) -> int | None:
    with contextlib.suppress(KeyError, TypeError, ValueError):
        return int(datetime.fromisoformat(line["timestamp"]).timestamp() * 1000)
    return None


def worker_lines(log: Path) -> list[dict[str, Any]]:
    """The JSON lines of a worker's log (other lines are left out)."""
    out = []
    with contextlib.suppress(FileNotFoundError):
        for text in log.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                line = json.loads(text)
                if isinstance(line, dict):
                    out.append(line)
    return out


def worker_events(log: Path) -> list[Event]:
    """Rebalances in one worker incarnation's log, each with the partitions it moved.

    `partitions_assigned` names every partition held after the assignment, so
    the newly assigned ones are the difference from what was held before.
    """
    held: set[int] = set()
    events = []
    for line in worker_lines(log):
        kind, at = line.get("event"), _stamp(line)
        if at is None or kind not in {
            "partitions_assigned",
            "partitions_revoked",
            "partitions_lost",
        }:
            continue
        named = {int(p) for p in line.get("partitions") or ()}
        moved = named - held if kind == "partitions_assigned" else named & held
        held = named if kind == "partitions_assigned" else held - named
        events.append(
            Event(at, str(kind).removeprefix("partitions_"), frozenset(moved))
        )
    return events


def tracebacks(log: Path) -> list[str]:
    """Each Python traceback in a log, as its last lines (the exception first).

    Uncaught exceptions reach stderr as raw tracebacks; logged ones sit in a JSON
    line's `exception` field. Both count.
    """
    try:
        lines = log.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []
    found = []
    for i, text in enumerate(lines):
        if text.startswith("Traceback (most recent call last)"):
            found.append(_last_frames(lines[i : i + 400]))
        elif '"exception"' in text:
            with contextlib.suppress(ValueError, AttributeError):
                block = str(json.loads(text)["exception"]).splitlines()
                found.append(_last_frames(block))
    return found


def _last_frames(block: list[str]) -> str:
    """A traceback's exception line and the frames above it, newest first."""
    end = next(
        (j for j, t in enumerate(block[1:], 1) if not t.startswith(" ")),
        len(block) - 1,
    )
    return " | ".join(reversed(block[max(1, end - _TRACE_LINES) : end + 1]))
