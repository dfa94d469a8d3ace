"""The async path meets what the sync loop meets: a schema registry that cannot
answer, writes the broker does not acknowledge, a rebalance, a handler that blocks.

The whole worker on fake clients whose partitions are logs (`tests.fakes.LogConsumer`:
a paused partition returns nothing, a seek reads it again from there): the waiting
or unwritable partition is paused and rewound, nothing of it stored past the held
message, `/readyz` says why, the other partitions go on, and once the registry or
the broker answers again it is handled from there and the worker is ready again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError
from structlog.testing import capture_logs

from codec import get_codec
from codec.registry import frame_codec
from codec.registry.client import RegisteredSchema, RegistryUnavailable, SchemaNotFound
from codec.registry.frame import id_header
from service.delivery import held_partitions
from service.kafka.headers import SENT_NS
from service.loop.async_path.loop import AsyncLoop
from tests.fakes import FakeMessage, LogConsumer
from tests.unit.test_app import (
    CODEC,
    DLQ,
    PAYLOADS,
    TOPIC,
    FakeAdmin,
    Rig,
    unfreeze,  # noqa: F401 (a fixture)
)

HANDLERS = "tests.fixtures.handlers.async_orders"
TIMED_OUT = KafkaError(KafkaError._MSG_TIMED_OUT)
WHERE = {PAYLOADS[p * 10 + o]["event_id"]: (p, o) for p in (0, 1) for o in range(10)}
"""Each payload's (partition, offset) in these tests' logs."""
SEEN: list[tuple[int, int]] = []
"""(partition, offset) of each message a handler finished, in order."""
CANCELLED: list[tuple[int, int]] = []


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    SEEN.clear()
    CANCELLED.clear()
    monkeypatch.setattr(held_partitions, "FIRST_BACKOFF_S", 0.01)  # retried soon
    yield


async def record(order: Any) -> None:
    await asyncio.sleep(0)
    SEEN.append(WHERE[order.event_id])


async def passes(order: Any) -> Any:
    await asyncio.sleep(0)
    return order


async def slowly(order: Any) -> None:
    await asyncio.sleep(0.02)
    SEEN.append(WHERE[order.event_id])


async def hangs_at_2(order: Any) -> None:
    """Partition 0's offset 2 never finishes (until cancelled)."""
    where = WHERE[order.event_id]
    try:
        await asyncio.sleep(3600 if where == (0, 2) else 0.001)
    except asyncio.CancelledError:
        CANCELLED.append(where)
        raise
    SEEN.append(where)


async def blocks_once(order: Any) -> None:
    """Partition 0's offset 0 holds the event loop for 0.3 s without awaiting
    (after its one await: the budget's sweep has no await to cancel it at)."""
    await asyncio.sleep(0)
    if WHERE[order.event_id] == (0, 0):
        time.sleep(0.3)
    SEEN.append(WHERE[order.event_id])


def log_msg(p: int, o: int, value: bytes | None = None) -> FakeMessage:
    """Partition `p`'s message at offset `o`: payload `p * 10 + o` (or `value`)."""
    if value is None:
        value = CODEC.encode(CODEC.from_builtins(PAYLOADS[p * 10 + o]))
    headers: list[tuple[str, bytes | None]] = [(SENT_NS, str(time.time_ns()).encode())]
    return FakeMessage(value, p, o, _headers=headers, _topic=TOPIC)


def logs_of(n: int) -> dict[int, list[FakeMessage]]:
    return {p: [log_msg(p, o) for o in range(n)] for p in (0, 1)}


def log_rig(
    logs: dict[int, list[FakeMessage]],
    admin: FakeAdmin | None = None,
    **processing: Any,
) -> tuple[Rig, LogConsumer]:
    """A worker on `logs`; it stops once every log is read and nothing is in
    flight or held."""
    rig = Rig(admin, **{"max_attempts": 1, **processing})
    consumer = LogConsumer(events=rig.events, logs=logs, to_assign=sorted(logs))
    rig.consumer = consumer
    rig.worker._consumer_factory = consumer

    def drained() -> None:
        loop = rig.worker.loop
        if (
            isinstance(loop, AsyncLoop)
            and not loop._in_flight
            and not getattr(loop.hold, "active", False)
            and consumer.at_end()
        ) or consumer.rounds > 50_000:
            rig.worker.stop()

    consumer.on_drained = drained
    return rig, consumer


def stored(consumer: LogConsumer) -> dict[int, int]:
    """The last offset stored per partition."""
    return {p: offset for call in consumer.stored for _t, p, offset in call}


class Registry:
    """Ids 1 and 2 name the codec's schema; those in `down` cannot be had."""

    def __init__(self, schema: RegisteredSchema) -> None:
        self.schema = schema
        self.down: set[int] = set()

    def schema_by_id(self, ref: int | str) -> RegisteredSchema:
        if ref in self.down:
            raise RegistryUnavailable("registry unavailable after 3 attempts")
        if ref not in (1, 2):
            raise SchemaNotFound(f"HTTP 404 for /schemas/ids/{ref}")
        return self.schema

    def lookup(self, subject: str, schema_type: str, text: str) -> int | None:
        return 1

    def register(self, subject: str, schema_type: str, text: str) -> int:
        return 1


@pytest.mark.usefixtures("unfreeze")
class TestRegistryWait:
    """A schema the registry cannot give holds its partition, not the worker."""

    def test_the_partition_waits_the_others_go_on_then_it_is_handled(self) -> None:
        plain = get_codec("avro", "medium")
        probe = frame_codec(plain, Registry(RegisteredSchema("AVRO", "")))
        registry = Registry(RegisteredSchema("AVRO", probe.schema_text()))

        def framed(p: int, o: int, schema_id: int) -> FakeMessage:
            body = plain.encode(plain.from_builtins(PAYLOADS[p * 10 + o]))
            return log_msg(p, o, id_header(schema_id) + body)

        logs = {
            0: [framed(0, o, 2 if o == 1 else 1) for o in range(4)],
            1: [framed(1, o, 1) for o in range(4)],
        }
        rig, consumer = log_rig(logs, logic=f"{__name__}:record")
        rig.worker.codec = frame_codec(plain, registry)
        registry.down = {2}
        held: dict[str, Any] = {}

        def script() -> None:
            waits = rig.sample("worker_registry_waits_total") or 0
            if registry.down and waits >= 2:  # held, retried, held again
                held.update(ready=rig.worker._ready(), stored=stored(consumer))
                held["degraded"] = rig.sample("worker_degraded")
                registry.down = set()

        consumer.script = script
        assert rig.worker.run() == 0
        assert held["stored"].get(0, 0) <= 1  # nothing past the waiting message
        assert held["stored"][1] == 4  # the other partition went on
        assert "schema registry" in held["ready"] and held["degraded"] == 1
        assert [o for p, o in SEEN if p == 0] == [0, 1, 2, 3]  # in order, once
        assert stored(consumer) == {0: 4, 1: 4}
        assert rig.producer.produced == []  # no dead letter
        assert rig.worker.loop is not None and rig.worker.loop.hold.reason is None
        assert rig.sample("worker_degraded") == 0


class FailFirst:
    """The first `n` writes to `topic` are not acknowledged; then all are."""

    def __init__(self, n: int, topic: str) -> None:
        self.n, self.topic = n, topic

    def __call__(self, record: dict[str, Any]) -> KafkaError | None:
        if record["topic"] == self.topic and self.n > 0:
            self.n -= 1
            return TIMED_OUT
        return None


@pytest.mark.usefixtures("unfreeze")
class TestUnacknowledgedWrites:
    """A write the broker does not acknowledge pauses and retries its partition."""

    def _ready_while_held(self, rig: Rig, consumer: LogConsumer) -> list[str]:
        reasons: list[str] = []

        def script() -> None:
            if (reason := rig.worker._ready()) is not None:
                reasons.append(reason)

        consumer.script = script
        return reasons

    def test_a_dead_letter_not_acknowledged_is_retried(self) -> None:
        gifts = {WHERE[p["event_id"]] for p in PAYLOADS if p["gift"]}
        gifts &= {(p, o) for p in (0, 1) for o in range(6)}
        assert gifts
        rig, consumer = log_rig(logs_of(6), logic=f"{HANDLERS}:refuse_gifts")
        rig.producer.fail_with = FailFirst(2, DLQ)
        reasons = self._ready_while_held(rig, consumer)
        assert rig.worker.run() == 0
        assert stored(consumer) == {0: 6, 1: 6}
        letters = [dict(r["headers"]) for r in rig.producer.acked if r["topic"] == DLQ]
        where = [(int(h["x-dlq-partition"]), int(h["x-dlq-offset"])) for h in letters]
        assert sorted(where) == sorted(gifts)  # each once, none lost
        assert (rig.sample("worker_delivery_failures_total") or 0) >= 1
        assert any("writes failed" in r for r in reasons)
        assert rig.sample("worker_degraded") == 0

    def test_an_output_not_acknowledged_is_retried(self) -> None:
        admin = FakeAdmin(topics={TOPIC: 2, DLQ: 1, "out": 1})
        rig, consumer = log_rig(
            logs_of(6), admin, logic=f"{__name__}:passes", output_topic="out"
        )
        rig.producer.fail_with = FailFirst(2, "out")
        assert rig.worker.run() == 0
        assert stored(consumer) == {0: 6, 1: 6}
        outputs = [r for r in rig.producer.acked if r["topic"] == "out"]
        assert len(outputs) >= 12  # every input's result, some twice
        assert (rig.sample("worker_delivery_failures_total") or 0) >= 1


@pytest.mark.usefixtures("unfreeze")
class TestRevoke:
    """A revoke waits for the partition's handlers up to the grace, stores the
    finished prefix and drops the rest; a loss does not wait."""

    def _revoke_at_round(
        self, consumer: LogConsumer, n: int, lost: bool = False
    ) -> dict[int, int]:
        at_revoke: dict[int, int] = {}

        def script() -> None:
            if consumer.rounds == n:
                consumer.take_away(0, lost=lost)
                at_revoke.update(stored(consumer))

        consumer.script = script
        return at_revoke

    def test_the_revoked_partitions_work_finishes_and_is_stored(self) -> None:
        rig, consumer = log_rig(logs_of(5), logic=f"{__name__}:slowly")
        at_revoke = self._revoke_at_round(consumer, 3)
        assert rig.worker.run() == 0
        assert at_revoke.get(0) == 5  # all five handled within the grace
        assert sorted(o for p, o in SEEN if p == 0) == [0, 1, 2, 3, 4]

    def test_past_the_grace_the_rest_is_dropped_unstored(self) -> None:
        rig, consumer = log_rig(
            logs_of(5), logic=f"{__name__}:hangs_at_2", revoke_grace_s=0.1
        )
        at_revoke = self._revoke_at_round(consumer, 3)
        with capture_logs() as logs:
            assert rig.worker.run() == 0
        assert at_revoke.get(0) == 2  # the prefix before the hanging message
        assert stored(consumer)[0] == 2
        assert CANCELLED == [(0, 2)]
        assert (0, 3) not in SEEN and (0, 4) not in SEEN
        dropped = [e for e in logs if e["event"] == "revoked_in_flight_dropped"]
        assert dropped and dropped[0]["messages"] == 3

    def test_a_lost_partition_is_not_waited_for(self) -> None:
        rig, consumer = log_rig(logs_of(5), logic=f"{__name__}:slowly")
        at_revoke = self._revoke_at_round(consumer, 3, lost=True)
        assert rig.worker.run() == 0
        assert at_revoke.get(0, 0) < 5


@pytest.mark.usefixtures("unfreeze")
class TestBlockedLoop:
    """A handler that holds the event loop is measured and reported."""

    def test_a_blocking_handler_is_reported(self) -> None:
        rig, _consumer = log_rig(
            logs_of(2), logic=f"{__name__}:blocks_once", message_budget_ms=100
        )
        with capture_logs() as logs:
            assert rig.worker.run() == 0
        (line,) = [e for e in logs if e["event"] == "event_loop_blocked"]
        assert line["blocked_s"] >= 0.25
        assert "message budget" in line["why"]
        lag = "worker_event_loop_lag_seconds"
        total = rig.sample(f"{lag}_count") or 0
        assert total > (rig.sample(f"{lag}_bucket", le="0.25") or 0)
        assert len(SEEN) == 4
