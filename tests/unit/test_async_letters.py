"""What the sync loop sets aside, the async path sets aside the same way: the same
messages dead-lettered with the same reason and stage, the same offsets stored;
`on_decode_error = fail` stops it as it stops the sync loop; a message over its
budget is cancelled where it awaits and dead-lettered `budget`.

The whole worker on fake clients (`tests.unit.test_app.Rig`), a sync handler and
an async one that refuse the same messages, one after the other on the same batch.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from service.loop.async_path.loop import AsyncLoop
from service.loop.batch_loop import BatchLoop
from tests.fakes import FakeMessage
from tests.unit.test_app import PAYLOADS, TOPIC, Rig, msg, unfreeze  # noqa: F401 (a fixture)
from tests.unit.test_async_worker import run, stored

LIMIT = 4 * 1024 * 1024
"""The worker's default `max_payload_bytes`."""
SYNC = "tests.fixtures.handlers.basics:refuse_gifts"
ASYNC = "tests.fixtures.handlers.async_orders:refuse_gifts"


def batch() -> list[FakeMessage]:
    """Good messages (gift orders among them), and one of each kind of unusable."""
    msgs = [msg(i) for i in range(12)]
    msgs[1] = FakeMessage(None, 0, 1, _topic=TOPIC)
    msgs[3] = msg(3, value=b"\xc1 not msgpack")
    msgs[5] = msg(5, value=b"\x00" * (LIMIT + 1))
    msgs[7] = FakeMessage(b"", 0, 7, _topic=TOPIC)
    return msgs


def letters(rig: Rig) -> list[tuple[int, bytes, bytes]]:
    """Each dead letter's (offset, reason, stage), in offset order."""
    out = []
    for record in rig.producer.acked:
        h = dict(record["headers"])
        out.append((int(h["x-dlq-offset"]), h["x-dlq-reason"], h["x-dlq-stage"]))
    return sorted(out)


@pytest.mark.usefixtures("unfreeze")
class TestLikeTheSyncLoop:
    def test_the_same_messages_are_set_aside_the_same_way(self) -> None:
        seen = {}
        for spec, kind in ((SYNC, BatchLoop), (ASYNC, AsyncLoop)):
            rig = Rig(logic=spec, max_attempts=1)
            assert run(rig, [batch()]) == 0
            assert isinstance(rig.worker.loop, kind)
            seen[kind] = (letters(rig), stored(rig))
        gifts = [i for i in range(12) if PAYLOADS[i]["gift"] and i not in (1, 3, 5, 7)]
        assert gifts
        expected = sorted(
            [(1, b"empty", b"decode"), (3, b"decode", b"decode")]
            + [(5, b"oversize", b"decode"), (7, b"empty", b"decode")]
            + [(i, b"logic", b"process") for i in gifts]
        )
        assert seen[AsyncLoop] == seen[BatchLoop] == (expected, {0: 12})

    def test_on_decode_error_fail_stops_at_the_message(self) -> None:
        rig = Rig(logic=ASYNC, on_decode_error="fail")
        assert run(rig, [[msg(0), msg(1, value=b"\xc1 not msgpack"), msg(2)]]) == 1
        assert stored(rig).get(0, 0) <= 1  # nothing stored past it
        assert rig.producer.acked == []


CANCELLED: list[str] = []


async def hangs_on_gifts(order: Any) -> None:
    """A gift order's call never comes back (until cancelled)."""
    try:
        await asyncio.sleep(3600 if order.gift else 0)
    except asyncio.CancelledError:
        CANCELLED.append(order.event_id)
        raise


@pytest.mark.usefixtures("unfreeze")
class TestBudget:
    def test_a_message_over_its_budget_is_cancelled_and_dead_lettered(self) -> None:
        CANCELLED.clear()
        rig = Rig(logic=f"{__name__}:hangs_on_gifts", message_budget_ms=100)
        assert run(rig, [[msg(i) for i in range(12)]]) == 0
        gifts = [i for i in range(12) if PAYLOADS[i]["gift"]]
        assert gifts
        assert letters(rig) == [(i, b"budget", b"process") for i in gifts]
        assert [PAYLOADS[i]["event_id"] for i in gifts] == CANCELLED
        assert stored(rig) == {0: 12}
