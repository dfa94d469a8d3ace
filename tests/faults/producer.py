"""The verifying producer: paced input whose every x-seq is known acked or not.

Each message carries `x-seq` (its key too), `x-sent-ns`, `content-type` and
`x-run-id`; it goes to partition `seq % partitions`. The producer is idempotent
with `acks=all`, and what the broker did with each seq comes from delivery reports
only: `acked` (partition, offset, timestamp) or `failed` (the error's name). A seq
neither acked nor failed when the run ends is counted as failed: its fate is
unknown, so the checker accepts it in the output but never demands it.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Self

from confluent_kafka import Producer

from codec import CodecName, get_codec
from loadgen.payloads import make_payloads
from schemas.registry import SchemaName
from service.kafka.headers import CONTENT_TYPE, RUN_ID, SENT_NS, SEQ
from tests.faults.model import Expected, Header, Sent

MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
"""The local broker's `message.max.bytes`: an 8 MB poison message must fit."""
_SLICE_S: Final = 0.005
"""Pacing slice: at 1-5k msg/s, 5-25 messages go out together every 5 ms."""
_POOL: Final = 64


@dataclass(frozen=True, slots=True)
class Payload:
    """One message's value and what the worker must do with it."""

    value: bytes | None
    poison: bool = False
    droppable: bool = False
    """Larger than the worker's dead-letter producer may write."""
    sent_ns: bytes | None = None
    """An `x-sent-ns` value in place of the intended send time (hostile headers)."""
    headers: tuple[Header, ...] = ()
    """Headers added after the four the producer stamps."""
    alone: bool = False
    """Sent in a record batch of its own (the producer flushes before and after):
    a batch the worker cannot read takes no good message with it."""
    unreadable_ok: bool = False
    """The worker may be unable to read it at all (a compressed bomb): a letter
    naming its offset range, with no value, may stand in."""


Plan = Callable[[int], Payload]
"""The value of each seq: good traffic with poison where the scenario wants it."""


def good_traffic(codec: CodecName, schema: SchemaName = "medium") -> Plan:
    """A plan of valid messages only, from the shared seeded payloads."""
    c = get_codec(codec, schema)
    pool = [c.encode(c.from_builtins(p)) for p in make_payloads(schema, _POOL)]
    return lambda seq: Payload(pool[seq % _POOL])


def quiet() -> dict[str, Any]:
    """librdkafka settings for the suite's own clients: no log lines.

    A broker the suite has just stopped makes every client log each refused
    reconnect; the worker's log is the one that matters.
    """
    return {"log_level": 0, "log.connection.close": False}


def _file_logger(path: Path) -> dict[str, Any]:
    """librdkafka settings that send its lines, warnings and up, to `path`."""
    logger = logging.getLogger(f"faults.producer.{path}")
    logger.propagate = False
    if not logger.handlers:
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    return {"logger": logger, "log.connection.close": False}


class VerifyingProducer:
    """Sends `count` messages at `rate` per second in a thread; see the module doc.

    Args:
        bootstrap: the broker.
        topic: the input topic.
        partitions: its partition count.
        plan: the value of each seq.
        content_type: the wire format's `content-type`.
        rate: messages per second.
        count: messages to send.
        timeout_s: the producer's `message.timeout.ms`: long enough to ride out a
            broker restart, so a fault yields late acks rather than failures.
        log: where librdkafka's lines go (warnings and up); None: nowhere.
        config: librdkafka settings over the producer's own
            (`compression.type`, a larger `message.max.bytes`).
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        plan: Plan,
        *,
        content_type: str,
        rate: float,
        count: int,
        timeout_s: float = 120.0,
        log: Path | None = None,
        config: dict[str, Any] | None = None,
    ) -> None:
        self.topic, self.partitions, self.plan = topic, partitions, plan
        self.rate, self.count = rate, count
        self.run_id = uuid.uuid4().hex[:12]
        self._content_type = content_type.encode()
        self.acked: dict[int, Sent] = {}
        self.failed: dict[int, str] = {}
        self.poison: dict[int, Expected] = {}
        self.sent = 0
        self.started_ms = self.finished_ms = 0
        self._timeout_s = timeout_s
        self.error: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._log = log
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.max.bytes": MAX_MESSAGE_BYTES,
                "message.timeout.ms": int(timeout_s * 1000),
                **(quiet() if log is None else _file_logger(log)),
                **(config or {}),
            }
        )

    def start(self) -> Self:
        """Start sending in the background."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sending and waiting for reports: what is unreported stays unacked."""
        self._stop.set()

    def end_after(self, seconds: float) -> None:
        """End the stream `seconds` from now (at its rate), if it would run longer.

        A scenario whose fault waits on the workers (a second worker joining on a
        loaded machine) sends a long stream and ends it once the fault is over,
        so the fault always lands mid-stream."""
        self.count = min(self.count, self.sent + int(seconds * self.rate))

    def wait(self, timeout: float) -> None:
        """Wait until every message is sent and its delivery reported.

        Raises:
            TimeoutError: the sends or their reports took longer than `timeout`.
            RuntimeError: the producer failed (a message it could not send).
        """
        self._thread.join(timeout)
        if self._thread.is_alive():
            self.stop()
            self._thread.join(10)
            raise TimeoutError(
                f"the verifying producer stalled: {len(self.acked)} of {self.sent} "
                f"sent acknowledged after {timeout:.0f} s"
            )
        if self.error is not None:
            raise RuntimeError(f"the verifying producer failed: {self.error!r}")

    def widen(self, partitions: int, timeout: float = 30) -> None:
        """Spread the next messages over `partitions` (some were just added), once
        this producer's metadata shows them."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            meta = self._producer.list_topics(self.topic, timeout=5)
            if len(meta.topics[self.topic].partitions) >= partitions:
                self.partitions = partitions
                return
            time.sleep(0.2)
        raise TimeoutError(f"the producer never saw {partitions} partitions")

    @property
    def running(self) -> bool:
        """Whether it still sends or waits for reports."""
        return self._thread.is_alive()

    def close(self) -> None:
        """Stop sending; close the log file (the client itself goes with the object)."""
        self.stop()
        self._thread.join(10)
        if self._log is not None:
            logger = logging.getLogger(f"faults.producer.{self._log}")
            for handler in list(logger.handlers):
                logger.removeHandler(handler)
                handler.close()

    @property
    def unacked(self) -> frozenset[int]:
        """Seqs sent but not acknowledged: failed, or no report by the end."""
        return frozenset(range(self.sent)) - frozenset(self.acked)

    def _run(self) -> None:
        try:
            self._send_all()
        except Exception as exc:  # reported by wait(): a thread cannot raise
            self.error = exc

    def _send_all(self) -> None:
        start = time.monotonic()
        self.started_ms = time.time_ns() // 1_000_000
        deadline = start + self.count / self.rate + self._timeout_s
        while self.sent < self.count and not self._stop.is_set():
            now = time.monotonic()
            if now > deadline:
                break
            due = min(self.count, int((now - start) * self.rate) + 1)
            while self.sent < due and not self._stop.is_set():
                self._send(self.sent, start + self.sent / self.rate)
                self.sent += 1
            self._producer.poll(0)
            time.sleep(_SLICE_S)
        self.finished_ms = time.time_ns() // 1_000_000
        # Flush in slices so that stop() ends the wait: a producer that never gets
        # its acknowledgements must not hold a scenario for a whole message timeout.
        deadline = time.monotonic() + self._timeout_s + 5
        while not self._stop.is_set() and time.monotonic() < deadline:
            if self._producer.flush(0.5) == 0:
                break

    def _send(self, seq: int, due: float) -> None:
        payload = self.plan(seq)
        key = str(seq).encode()
        sent_ns = time.time_ns() - int((time.monotonic() - due) * 1e9)
        stamp = str(sent_ns).encode() if payload.sent_ns is None else payload.sent_ns
        headers: list[Header] = [
            (SENT_NS, stamp),
            (CONTENT_TYPE, self._content_type),
            (SEQ, key),
            (RUN_ID, self.run_id.encode()),
            *payload.headers,
        ]
        if payload.poison:
            self.poison[seq] = Expected(
                payload.value,
                key,
                tuple(headers),
                droppable=payload.droppable,
                unreadable_ok=payload.unreadable_ok,
            )
        wire: list[tuple[str, str | bytes | None]] = list(headers)
        if payload.alone:
            self._producer.flush(self._timeout_s)
        for _ in range(1000):  # a full local queue drains in well under 1000 polls
            try:
                self._producer.produce(
                    self.topic,
                    value=payload.value,
                    key=key,
                    headers=wire,
                    partition=seq % self.partitions,
                    on_delivery=self._on_delivery,
                )
                if payload.alone:
                    self._producer.flush(self._timeout_s)
                return
            except BufferError:
                self._producer.poll(0.05)
        self.failed[seq] = "local queue full"

    def _on_delivery(self, err: Any, msg: Any) -> None:
        seq = int(msg.key())
        if err is not None:
            self.failed[seq] = err.name()
            return
        stamp = msg.timestamp()[1]
        self.acked[seq] = Sent(seq, msg.partition(), msg.offset(), stamp)
