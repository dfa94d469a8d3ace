"""A team's async handler in the worker, on fake Kafka clients: awaited, bounded,
stored for the contiguous completed prefix only, retried on the message as consumed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from service.loop.async_path import loop as loop_module
from service.loop.async_path.loop import AsyncLoop
from service.loop.batch_loop import BatchLoop
from tests.fakes import FakeMessage
from tests.unit.test_app import PAYLOADS, Rig, msg, unfreeze  # noqa: F401 (a fixture)

HANDLERS = "tests.fixtures.handlers.async_orders"
SEEN: list[tuple[int, int]] = []
"""(partition, offset) of each message `recorder` finished, in order."""
RUNNING: list[int] = []
PEAK: dict[str, int] = {}


async def recorder(order: Any) -> None:
    """Awaits long enough for the others to start; records the concurrency."""
    RUNNING.append(1)
    PEAK["running"] = max(PEAK.get("running", 0), len(RUNNING))
    await asyncio.sleep(0.002)
    RUNNING.pop()
    SEEN.append((0, 0))


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    SEEN.clear()
    RUNNING.clear()
    PEAK.clear()
    yield


def run(
    rig: Rig, batches: list[list[FakeMessage]], assign: tuple[int, ...] = (0,)
) -> int:
    """Run the worker on `batches`; stop once they are consumed and nothing is in
    flight (a stop with messages in flight is its own test)."""
    rig.consumer.to_assign = list(assign)
    rig.consumer.batches = batches

    def drained() -> None:
        loop = rig.worker.loop
        if not isinstance(loop, AsyncLoop) or not loop._in_flight:
            rig.worker.stop()

    rig.consumer.on_drained = drained
    return rig.worker.run()


def stored(rig: Rig) -> dict[int, int]:
    """The last offset stored per partition."""
    return {p: offset for call in rig.consumer.stored for _t, p, offset in call}


@pytest.mark.usefixtures("unfreeze")
class TestAwaited:
    """An async def handler is awaited on the event loop, every message."""

    def test_every_message_is_awaited_and_stored(self) -> None:
        rig = Rig(logic=f"{__name__}:recorder")
        batches = [[msg(i) for i in range(10)], [msg(i) for i in range(10, 15)]]
        assert run(rig, batches) == 0
        assert isinstance(rig.worker.loop, AsyncLoop)
        assert len(SEEN) == 15
        assert stored(rig) == {0: 15}
        ok = {"codec": "msgspec-msgpack", "outcome": "ok"}
        assert rig.sample("worker_messages_total", **ok) == 15
        assert rig.sample("worker_handle_seconds_count", codec="msgspec-msgpack") == 15

    @pytest.mark.parametrize(
        ("spec", "kind"),
        [
            ("partial_handle", AsyncLoop),
            ("handler_object", AsyncLoop),
            ("handle", AsyncLoop),
        ],
    )
    def test_async_definitions_are_told_before_any_call(
        self, spec: str, kind: type
    ) -> None:
        rig = Rig(logic=f"{HANDLERS}:{spec}")
        assert run(rig, [[msg(0), msg(1)]]) == 0
        assert isinstance(rig.worker.loop, kind)
        assert stored(rig) == {0: 2}


@pytest.mark.usefixtures("unfreeze")
class TestOrdering:
    """partition: one at a time per partition; key: one at a time per key; none:
    up to max_in_flight at once."""

    @pytest.mark.parametrize(
        ("ordering", "keys", "peak"),
        [
            ("partition", [b"a", b"b"], 1),
            ("key", [b"a"], 1),
            ("key", [b"a", b"b"], 2),
            ("none", [b"a"], 8),
        ],
    )
    def test_concurrency(self, ordering: str, keys: list[bytes], peak: int) -> None:
        rig = Rig(logic=f"{__name__}:recorder", ordering=ordering, max_in_flight=8)
        batch = [msg(i) for i in range(8)]
        for i, m in enumerate(batch):
            m._key = keys[i % len(keys)]
        assert run(rig, [batch]) == 0
        assert PEAK["running"] == peak
        assert stored(rig) == {0: 8}


@pytest.mark.usefixtures("unfreeze")
class TestBound:
    """At max_in_flight every assigned partition is paused, and resumed later."""

    def test_a_slow_handler_pauses_then_resumes(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(loop_module, "PAUSE_AFTER_S", 0.0)  # at once, here
        rig = Rig(logic=f"{__name__}:recorder", max_in_flight=4, ordering="partition")
        assert (
            run(rig, [[msg(i) for i in range(4)], [msg(i) for i in range(4, 6)]]) == 0
        )
        assert "pause" in rig.events and "resume" in rig.events
        assert (rig.sample("worker_async_pauses_total") or 0) >= 1
        assert stored(rig) == {0: 6}


async def zero_last(order: Any) -> None:
    """The first payload's message finishes long after all the others."""
    await asyncio.sleep(0.05 if order.event_id == FIRST else 0)
    SEEN.append((0, 0))


async def first_hangs(order: Any) -> None:
    """The first payload's message never finishes (a stop must not store it)."""
    await asyncio.sleep(3600 if order.event_id == FIRST else 0)


FIRST = PAYLOADS[0]["event_id"]


@pytest.mark.usefixtures("unfreeze")
class TestPrefix:
    """Offsets are stored for the contiguous completed prefix only."""

    def test_nothing_past_an_unfinished_message_is_stored(self) -> None:
        rig = Rig(logic=f"{__name__}:zero_last", ordering="none", max_in_flight=50)
        assert run(rig, [[msg(i) for i in range(10)]]) == 0
        assert len(SEEN) == 10
        assert rig.consumer.stored == [[("in", 0, 10)]]

    def test_a_stop_leaves_what_is_in_flight_unstored(self) -> None:
        rig = Rig(
            logic=f"{__name__}:first_hangs",
            ordering="none",
            shutdown_timeout_s=0.2,
        )
        rig.consumer.to_assign = [0, 1]
        rig.consumer.batches = [[msg(1), msg(0, partition=1), msg(2)]]
        rig.consumer.on_drained = rig.worker.stop
        assert rig.worker.run() == 0
        # Partition 1's only message hangs: cancelled after the grace, unstored.
        assert stored(rig) == {0: 3}


@pytest.mark.usefixtures("unfreeze")
class TestAttempts:
    """A raise is retried on the message as consumed, then dead-lettered."""

    @pytest.mark.parametrize("spec", [f"{HANDLERS}:audit_then_fail"])
    def test_a_retry_gets_the_message_as_consumed(self, spec: str) -> None:
        rig = Rig(logic=spec, max_attempts=2, retry_backoff_ms=0)
        assert run(rig, [[msg(i) for i in range(5)]]) == 0
        assert rig.producer.acked == []  # no dead letter: every retry passed
        ok = {"codec": "msgspec-msgpack", "outcome": "ok"}
        assert rig.sample("worker_messages_total", **ok) == 5
        assert rig.sample("worker_logic_retries_total") == 5

    def test_an_async_raise_goes_to_the_dead_letters_after_its_attempts(self) -> None:
        rig = Rig(logic=f"{HANDLERS}:refuse_gifts", max_attempts=2, retry_backoff_ms=0)
        batch = [msg(i) for i in range(20)]
        gifts = sum(1 for i in range(20) if PAYLOADS[i]["gift"])
        assert gifts
        assert run(rig, [batch]) == 0
        assert len(rig.producer.acked) == gifts
        headers = dict(rig.producer.acked[0]["headers"])
        assert headers["x-dlq-reason"] == b"logic"
        assert stored(rig) == {0: 20}
        assert rig.sample("worker_logic_retries_total") == gifts


@pytest.mark.usefixtures("unfreeze")
class TestProbe:
    """A plain callable: its first call says whether it returns awaitables."""

    def test_a_function_returning_a_coroutine_moves_to_the_event_loop(self) -> None:
        rig = Rig(logic=f"{HANDLERS}:returns_coroutine")
        assert run(rig, [[msg(0), msg(1)], [msg(2)], []]) == 0
        assert isinstance(rig.worker.loop, AsyncLoop)
        assert stored(rig) == {0: 3}
        ok = {"codec": "msgspec-msgpack", "outcome": "ok"}
        assert rig.sample("worker_messages_total", **ok) == 3

    def test_a_sync_handler_is_called_directly_after_its_first_call(self) -> None:
        rig = Rig(logic="tests.fixtures.handlers.basics:same_message")
        assert run(rig, [[msg(0)], [msg(1)]]) == 0
        loop = rig.worker.loop
        assert isinstance(loop, BatchLoop)
        from tests.fixtures.handlers import basics

        assert loop._path._step is basics.same_message
        assert stored(rig) == {0: 2}


@pytest.mark.usefixtures("unfreeze")
class TestUnconfirmedWrites:
    """A write the broker refuses stops the worker with its offsets unstored."""

    def test_a_refused_dead_letter_is_exit_1_and_nothing_stored(self) -> None:
        from confluent_kafka import KafkaError

        rig = Rig(logic=f"{HANDLERS}:refuse_gifts", max_attempts=1)
        rig.producer.fail_with = lambda record: KafkaError(KafkaError._MSG_TIMED_OUT)
        gift = next(i for i in range(20) if PAYLOADS[i]["gift"])
        assert run(rig, [[msg(i) for i in range(gift + 1)]]) == 1
        assert stored(rig) == {}
