"""A framed message whose schema the registry cannot give waits with its partition.

The batch loop with fakes (`tests.unit.test_consumer.Rig`) and a framed Avro codec
over a registry that can be taken down: the waiting partition is paused and rewound
to the message, nothing of it is stored or handled past it, no dead letter is
written, `/readyz`'s reason says why; the batch's other partitions go on; once the
registry answers again the partition is handled from that message. An id the
registry answers it does not know is a dead letter, as before.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError

from codec import get_codec
from codec.registry import frame_codec
from codec.registry.client import (
    RegisteredSchema,
    RegistryRefused,
    RegistryUnavailable,
    SchemaNotFound,
)
from codec.registry.frame import id_header
from service.delivery.held_partitions import FIRST_BACKOFF_S, Hold
from tests.unit.test_consumer import PAYLOADS, Rig, decode_every  # noqa: F401
from tests.unit.test_hold import Clock

KNOWN, NEW, UNKNOWN = 1, 2, 3

pytestmark = pytest.mark.usefixtures("decode_every")  # each way through the loop


class SwitchableRegistry:
    """Ids 1 and 2 name the codec's own schema; 3 is unknown; `down` (an error to
    raise, or None) stands for a registry that cannot be used."""

    def __init__(self, schema: RegisteredSchema) -> None:
        self.schemas = {KNOWN: schema, NEW: schema}
        self.down: Exception | None = None
        self.lookups: list[int | str] = []

    def schema_by_id(self, ref: int | str) -> RegisteredSchema:
        self.lookups.append(ref)
        if self.down is not None:
            raise self.down
        try:
            return self.schemas[ref]  # type: ignore[index]
        except KeyError:
            raise SchemaNotFound(f"HTTP 404 for /schemas/ids/{ref}") from None

    def lookup(self, subject: str, schema_type: str, text: str) -> int | None:
        return KNOWN

    def register(self, subject: str, schema_type: str, text: str) -> int:
        return KNOWN


def _rig() -> tuple[Rig, SwitchableRegistry, Clock, Any]:
    plain = get_codec("avro", "medium")
    probe = frame_codec(plain, SwitchableRegistry(RegisteredSchema("AVRO", "")))
    registry = SwitchableRegistry(RegisteredSchema("AVRO", probe.schema_text()))
    framed = frame_codec(plain, registry)
    rig = Rig("avro", codec=framed)
    clock = Clock()
    rig.loop.hold = Hold(rig.consumer, rig.metrics, clock=clock)
    return rig, registry, clock, plain


def _value(plain: Any, schema_id: int, i: int) -> bytes:
    body: bytes = plain.encode(plain.from_builtins(PAYLOADS[i % 50]))
    return id_header(schema_id) + body


def _ok(rig: Rig) -> float:
    return rig.sample("worker_messages_total", codec="avro", outcome="ok")


DOWN = [
    RegistryUnavailable(
        "registry unavailable after 3 attempts (ConnectionRefusedError: "
        "Connection refused)"
    ),
    RegistryRefused("registry refused GET /schemas/ids/2: HTTP 401", 401),
]


@pytest.mark.parametrize("down", DOWN, ids=["unreachable", "refused"])
class TestRegistryDown:
    """The registry fails after start: the partition waits, the others go on."""

    def test_the_partition_waits_and_the_others_go_on(self, down: Exception) -> None:
        rig, registry, _clock, plain = _rig()
        rig.process([rig.msg(5, partition=1, value=_value(plain, KNOWN, 5))])
        assert _ok(rig) == 1  # id 1 is known from now on
        registry.down = down
        rig.process(
            [
                rig.msg(10, partition=0, value=_value(plain, NEW, 10)),
                rig.msg(20, partition=1, value=_value(plain, KNOWN, 20)),
                rig.msg(11, partition=0, value=_value(plain, KNOWN, 11)),
                rig.msg(21, partition=1, value=_value(plain, KNOWN, 21)),
            ]
        )
        assert _ok(rig) == 3  # partition 1's two; not 0's second, though known
        assert rig.consumer.paused == {0}
        assert rig.consumer.seeks == [(0, 10)]
        assert rig.producer.produced == []  # no dead letter
        assert rig.sample("worker_registry_waits_total") == 1
        assert rig.sample("worker_degraded") == 1
        stored = [s for batch in rig.consumer.stored for s in batch]
        assert ("in", 1, 22) in stored
        assert [o for _, p, o in stored if p == 0] == [10]  # up to the waiting one
        reason = rig.loop.hold.reason
        assert reason is not None and "schema registry" in reason
        assert "schema id 2" in reason

    def test_it_is_handled_once_the_registry_answers(self, down: Exception) -> None:
        rig, registry, clock, plain = _rig()
        registry.down = down
        waiting = [
            rig.msg(10, partition=0, value=_value(plain, NEW, 10)),
            rig.msg(11, partition=0, value=_value(plain, KNOWN, 11)),
        ]
        rig.process(waiting)
        assert _ok(rig) == 0 and rig.consumer.paused == {0}
        clock.now += FIRST_BACKOFF_S + 0.1
        rig.loop.hold.due()  # still down: waits again, no dead letter
        assert rig.consumer.paused == set()
        rig.process(waiting)
        assert _ok(rig) == 0 and rig.consumer.paused == {0}
        assert rig.producer.produced == []
        registry.down = None
        clock.now += 10 * FIRST_BACKOFF_S
        rig.loop.hold.due()
        rig.process(waiting)
        assert _ok(rig) == 2
        assert rig.consumer.stored[-1] == [("in", 0, 12)]
        assert rig.loop.hold.reason is None
        assert rig.sample("worker_degraded") == 0


def test_an_id_the_registry_does_not_know_is_a_dead_letter() -> None:
    """A 404 is an answer about the message: dead-lettered, the partition goes on."""
    rig, _registry, _clock, plain = _rig()
    rig.process(
        [
            rig.msg(10, partition=0, value=_value(plain, UNKNOWN, 10)),
            rig.msg(11, partition=0, value=_value(plain, KNOWN, 11)),
        ]
    )
    assert _ok(rig) == 1
    assert rig.consumer.paused == set()
    (record,) = rig.producer.produced
    headers = dict(record["headers"])
    assert headers["x-dlq-reason"] == b"schema_unknown"
    assert rig.consumer.stored[-1] == [("in", 0, 12)]


def test_a_failed_write_after_a_wait_rewinds_to_the_batch_start() -> None:
    """A partition that waits for the registry, in a batch whose writes then fail,
    is rewound to the batch's first offset for it: its messages before the wait
    had their writes in that batch, unconfirmed."""
    rig, registry, _clock, plain = _rig()
    rig.producer.fail_with = lambda record: KafkaError(KafkaError._MSG_TIMED_OUT)
    registry.down = DOWN[0]
    rig.process(
        [
            rig.msg(10, partition=0, value=b"\xc1"),  # a dead letter to write
            rig.msg(11, partition=0, value=_value(plain, NEW, 11)),  # waits
        ]
    )
    assert rig.loop.hold.held[0].offset == 10
    assert rig.consumer.seeks[-1] == (0, 10)
    assert all(o <= 10 for batch in rig.consumer.stored for _, p, o in batch if p == 0)


def test_a_batch_whose_every_message_waits_after_large_values() -> None:
    """Nothing handled, while the next batch's size is being recomputed from the
    last one's (smaller after large values): no division by nothing."""
    rig, registry, _clock, plain = _rig()
    rig.loop._size = 10  # as after a burst of large values
    registry.down = DOWN[0]
    rig.process([rig.msg(10, partition=0, value=_value(plain, NEW, 10))])
    assert _ok(rig) == 0 and rig.consumer.paused == {0}
