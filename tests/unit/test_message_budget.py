"""The per-message budget: a message over it is dead-lettered, the batch goes on.

Each slow message here would take 60 s without the budget: the budget's failure
shows as a failed assertion on where the message went (and a slow test), never as
an assertion on time.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from prometheus_client import CollectorRegistry

from codec import get_codec
from loadgen.payloads import make_payloads
from schemas.errors import LogicError
from service.delivery.dead_letters import PoisonHandler
from service.delivery.gated_writes import ConfirmedProducer
from service.logic.builtin import Handler
from service.loop import backstop
from service.loop.batch_loop import BatchLoop
from service.loop.hotpath import MessagePath
from service.loop.message_budget import HARD_MARGIN_S, hard_limit_s, protected_lines
from service.telemetry.metrics import Metrics
from tests.fakes import FakeConsumer, FakeMessage, FakeProducer

BUDGET_S = 0.3
SLOW_S = 60.0
PAYLOADS = make_payloads("medium", 8, seed=3)
CODEC = get_codec("msgspec-msgpack", "medium")
_aggregate = Handler("medium", "aggregate").step
assert _aggregate is not None


def _slow_on(slow: set[int], *, swallow: bool = False) -> Any:
    """The aggregate logic, but orders of a customer id in `slow` take 60 s; with
    `swallow`, a logic that catches every `Exception` and goes on sleeping."""

    def step(obj: Any) -> None:
        if obj.customer.customer_id in slow:
            end = time.monotonic() + SLOW_S
            while time.monotonic() < end:
                try:
                    time.sleep(end - time.monotonic())
                except Exception:
                    if not swallow:
                        raise
                    continue
        assert _aggregate is not None
        _aggregate(obj)

    return step


class Rig:
    """A loop with a budget, wired to fakes; `run` handles one batch as `run()` would."""

    def __init__(
        self,
        step: Any,
        *,
        budget_s: float = BUDGET_S,
        decode_every: int = 1,
        codec: Any = CODEC,
        max_attempts: int = 1,
        retry_backoff_ms: float = 0.0,
        record: Path | None = None,
    ) -> None:
        self.consumer = FakeConsumer()
        self.producer = FakeProducer()
        confirmed = ConfirmedProducer(self.producer, timeout_s=1.0)
        self.registry = CollectorRegistry()
        metrics = Metrics(self.registry, codec="msgspec-msgpack", schema="medium")
        poison = PoisonHandler(
            metrics, codec="msgspec-msgpack", group="g", dead_letters=(confirmed, "dlq")
        )
        self.loop = BatchLoop(
            self.consumer,
            codec=codec,
            step=step,
            metrics=metrics,
            poison=poison,
            output=(confirmed, "out"),
            max_payload_bytes=1 << 20,
            batch_size=100,
            batch_timeout_s=0.01,
            decode_sample_every=decode_every,
            max_attempts=max_attempts,
            retry_backoff_ms=retry_backoff_ms,
            message_budget=(budget_s, record),
        )
        self.loop.assign([TopicPartition("in", 0), TopicPartition("in", 1)])

    def msgs(self, n: int) -> list[FakeMessage]:
        out = []
        for i in range(n):
            payload = {**PAYLOADS[i % 8]}
            payload["customer"] = {**payload["customer"], "customer_id": 1000 + i}
            value = CODEC.encode(CODEC.from_builtins(payload))
            out.append(FakeMessage(value, i % 2, i, _key=str(i).encode()))
        return out

    def run(self, batch: list[FakeMessage], *, stopping: bool = False) -> None:
        self.consumer.batches.append(batch)
        with self.loop.budget.watching(lambda: stopping, self.loop):
            self.loop.process(self.consumer.consume(len(batch)))

    def dead(self) -> dict[int, dict[str, bytes]]:
        """Each dead letter's offset and headers."""
        return {
            int(dict(r["headers"])["x-dlq-offset"]): dict(r["headers"])
            for r in self.producer.acked
            if r["topic"] == "dlq"
        }

    def output_keys(self) -> list[bytes]:
        return [r["key"] for r in self.producer.acked if r["topic"] == "out"]


class TestOverBudget:
    """A message past its budget is a dead letter with reason budget; the rest goes on."""

    @pytest.mark.parametrize("decode_every", [1, 10_000], ids=["timed", "run"])
    def test_slow_logic_is_dead_lettered_and_the_batch_goes_on(
        self, decode_every: int
    ) -> None:
        rig = Rig(_slow_on({1002}), decode_every=decode_every)
        batch = rig.msgs(6)
        rig.run(batch)
        dead = rig.dead()
        assert list(dead) == [2]
        headers = dead[2]
        assert headers["x-dlq-reason"] == b"budget"
        assert headers["x-dlq-stage"] == b"process"
        assert b"message budget" in headers["x-dlq-exception-message"]
        assert headers["x-dlq-exception-type"] == b"OverBudget"
        assert rig.output_keys() == [b"0", b"1", b"3", b"4", b"5"]
        assert rig.consumer.stored[-1] == [("in", 0, 5), ("in", 1, 6)]
        dl = rig.registry.get_sample_value(
            "worker_dead_letters_total",
            {"codec": "msgspec-msgpack", "reason": "budget"},
        )
        assert dl == 1

    def test_a_logic_that_swallows_exceptions_is_still_interrupted(self) -> None:
        rig = Rig(_slow_on({1001}, swallow=True))
        rig.run(rig.msgs(3))
        assert list(rig.dead()) == [1]

    def test_retries_and_back_offs_count_against_the_budget(self) -> None:
        """A failing logic retried after a 60 s back-off: interrupted in the back-off."""

        def fails(obj: Any) -> None:
            if obj.customer.customer_id == 1001:
                raise LogicError("always")
            assert _aggregate is not None
            _aggregate(obj)

        rig = Rig(fails, max_attempts=3, retry_backoff_ms=SLOW_S * 1000)
        rig.run(rig.msgs(3))
        dead = rig.dead()
        assert list(dead) == [1]
        assert dead[1]["x-dlq-reason"] == b"budget"
        assert rig.output_keys() == [b"0", b"2"]

    def test_slow_decode_is_dead_lettered_at_the_decode_stage(self) -> None:
        class SlowCodec:
            """msgspec-msgpack whose decode of `b"slow"` takes 60 s in Python (an
            empty value never reaches a codec: it is dead-lettered `empty`)."""

            name = CODEC.name
            content_type = CODEC.content_type
            encode = CODEC.encode

            def decode_unchecked(self, data: bytes) -> Any:
                if data == b"slow":
                    time.sleep(SLOW_S)
                return CODEC.decode_unchecked(data)

        rig = Rig(_aggregate, codec=SlowCodec())
        batch = rig.msgs(3)
        batch[1]._value = b"slow"
        rig.run(batch)
        dead = rig.dead()
        assert list(dead) == [1]
        assert (dead[1]["x-dlq-reason"], dead[1]["x-dlq-stage"]) == (
            b"budget",
            b"decode",
        )

    def test_heartbeat_moves_while_a_message_is_in_hand(self) -> None:
        rig = Rig(_slow_on({1000}))
        rig.loop.heartbeat = 0.0
        rig.run(rig.msgs(1))
        assert rig.loop.heartbeat > 0.0


class TestStop:
    """A stop during a long message abandons its batch: nothing of it is stored."""

    def test_stop_abandons_the_batch(self) -> None:
        rig = Rig(_slow_on({1001}), budget_s=SLOW_S / 2)
        rig.run(rig.msgs(4), stopping=True)
        assert rig.dead() == {}
        assert rig.consumer.stored == []
        assert sorted(rig.loop.hold.held) == [0, 1]  # rewound, read again

    def test_a_stop_between_fast_messages_abandons_nothing(self) -> None:
        rig = Rig(_aggregate)
        rig.run(rig.msgs(4), stopping=True)
        assert rig.consumer.stored[-1] == [("in", 0, 3), ("in", 1, 4)]


class TestMechanism:
    """What the timer may interrupt, and when it is off."""

    def test_protected_lines_are_the_decode_logic_and_back_off_calls(self) -> None:
        path = MessagePath(
            CODEC,
            step=_aggregate,
            emit=None,
            max_payload_bytes=1,
            consumer_error=print,
            retried=lambda: None,
        )
        for code in path.hot_code:
            assert protected_lines(code), code.co_name

    def test_no_budget_no_timer(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import signal

        armed: list[Any] = []
        monkeypatch.setattr(signal, "setitimer", lambda *a: armed.append(a))
        rig = Rig(_aggregate, budget_s=0.0)
        budget = rig.loop.budget
        with budget.watching(lambda: False, rig.loop):
            pass
        assert armed == []
        assert budget.hard_s == 0.0

    def test_hard_limit(self) -> None:
        assert hard_limit_s(5.0, 0.005) == 10.005 + HARD_MARGIN_S
        assert hard_limit_s(0.0, 1.0) == 0.0


def _exited_on(record: Path, line: str) -> None:
    """What a backstop exit leaves: the record's line and the watchdog's traceback."""
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_bytes(line.encode().ljust(512))
    record.with_suffix(".backstop").write_text("Timeout (0:00:40)!\nThread 0x...\n")


class TestBackstop:
    """After a backstop exit the restart dead-letters the stuck message, not loops on it."""

    def test_an_exact_record_is_dead_lettered_on_sight(self, tmp_path: Path) -> None:
        record = tmp_path / "w.inhand"
        _exited_on(record, "in\t1\t3\texact")
        rig = Rig(_aggregate, record=record)
        rig.run(rig.msgs(6))
        dead = rig.dead()
        assert list(dead) == [3]
        assert dead[3]["x-dlq-reason"] == b"budget"
        assert b"exited twice" in dead[3]["x-dlq-exception-message"]
        assert rig.output_keys() == [b"0", b"1", b"2", b"4", b"5"]
        assert (tmp_path / "w.backstop.prev").exists()  # the traceback, kept
        assert not record.with_suffix(".backstop").exists()  # a stop: no evidence
        assert not record.exists()

    def test_a_tick_record_makes_the_restart_careful(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(backstop, "CAREFUL_AFTER", 2)
        record = tmp_path / "w.inhand"
        _exited_on(record, "in\t0\t2\ttick")
        noted: list[tuple[int, bool]] = []
        note = backstop.Backstop.note

        def spy(self: backstop.Backstop, m: Any, exact: bool = False) -> None:
            noted.append((m.offset(), exact))
            note(self, m, exact)

        monkeypatch.setattr(backstop.Backstop, "note", spy)
        rig = Rig(_aggregate, record=record, decode_every=3)
        rig.run(rig.msgs(8))
        assert rig.dead() == {}
        assert len(rig.output_keys()) == 8
        # each message recorded before it is handled, up to 2 past offset 2
        assert [o for o, exact in noted if exact] == [0, 1, 2, 3, 4]
        assert not rig.loop.budget.backstop.careful

    def test_an_exit_with_no_message_recorded_is_careful_from_the_start(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(backstop, "CAREFUL_AFTER", 3)
        record = tmp_path / "w.inhand"
        _exited_on(record, "")
        rig = Rig(_aggregate, record=record)
        assert rig.loop.budget.backstop.careful is False
        rig.consumer.batches.append(rig.msgs(5))
        with rig.loop.budget.watching(lambda: False, rig.loop):
            assert rig.loop.budget.backstop.careful
            rig.loop.process(rig.consumer.consume(5))
            assert not rig.loop.budget.backstop.careful  # 3 handled, careful ends
        assert len(rig.output_keys()) == 5

    def test_without_a_backstop_exit_nothing_is_careful(self, tmp_path: Path) -> None:
        record = tmp_path / "w.inhand"
        record.write_bytes(b"in\t1\t3\texact".ljust(512))
        record.with_suffix(".backstop").write_text("")  # killed otherwise: empty
        rig = Rig(_aggregate, record=record)
        rig.run(rig.msgs(6))
        assert rig.dead() == {}

    def test_the_record_follows_the_message_in_hand(self, tmp_path: Path) -> None:
        record = tmp_path / "w.inhand"
        lines: list[str] = []

        def step(obj: Any) -> None:
            if obj.customer.customer_id == 1001:
                time.sleep(0.5)  # under the budget: two or more ticks see it
                lines.append(record.read_bytes().decode().strip())
            assert _aggregate is not None
            _aggregate(obj)

        rig = Rig(step, budget_s=5.0, record=record)
        rig.run(rig.msgs(2))
        assert lines == ["in\t1\t1\ttick"]
