"""The async path's parts: telling an async handler, its settings, the CPU timer,
the contiguous prefix, the positions exactly-once commits, the first-call probe."""

from __future__ import annotations

import asyncio
import functools
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_INVALID, TopicPartition

from schemas.errors import ConfigError
from service.logic.user_handler import FirstCallProbe, awaits, load_handler
from service.loop.async_path.event_loop import CpuTimed, new_event_loop
from service.loop.async_path.inflight import PartitionTrack, ReleasedPositions
from service.settings.worker import load_settings
from tests.fakes import FakeConsumer, FakeMessage

HANDLERS = "tests.fixtures.handlers.async_orders"


async def _async(x: Any) -> Any:
    return x


def _sync(x: Any) -> Any:
    return x


class _Obj:
    async def __call__(self, x: Any) -> Any:
        return x

    async def method(self, x: Any) -> Any:
        return x


@functools.wraps(_async)
def _wrapped(x: Any) -> Any:
    return _async(x)


async def _gen(x: Any) -> Any:
    yield x


class TestAwaits:
    """An async handler is told by its definition, through the usual wrappers."""

    @pytest.mark.parametrize(
        "fn",
        [_async, functools.partial(_async), _Obj(), _Obj().method, _wrapped],
        ids=["async-def", "partial", "async-call", "bound-method", "wraps"],
    )
    def test_async_definitions(self, fn: Any) -> None:
        assert awaits(fn)

    @pytest.mark.parametrize("fn", [_sync, lambda x: _async(x), len])
    def test_plain_callables(self, fn: Any) -> None:
        assert not awaits(fn)

    def test_an_async_generator_is_refused_in_one_line(self) -> None:
        with pytest.raises(ConfigError, match="async generator yields many values"):
            load_handler(f"{__name__}:_gen")


class TestSettings:
    """--max-in-flight and --ordering: defaults, TOML, environment, refusals."""

    def test_defaults_and_layers(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        p = load_settings().processing
        assert (p.max_in_flight, p.ordering) == (100, "partition")
        toml = tmp_path / "w.toml"
        toml.write_text("[worker.processing]\nmax_in_flight = 7\nordering = 'key'\n")
        monkeypatch.setenv("WORKER_PROCESSING__ORDERING", "none")
        p = load_settings(config_file=toml).processing
        assert (p.max_in_flight, p.ordering) == (7, "none")

    @pytest.mark.parametrize(
        ("key", "value"), [("ordering", "offset"), ("max_in_flight", 0)]
    )
    def test_bad_values_name_the_setting(self, key: str, value: object) -> None:
        with pytest.raises(ConfigError, match=f"processing.{key}"):
            load_settings({"processing": {key: value}})


class TestCpuTimed:
    """The CPU of the awaitable's own steps, not of its waits; the same result."""

    def test_waiting_is_not_cpu(self) -> None:
        async def handler() -> str:
            await asyncio.sleep(0.05)
            deadline = time.thread_time() + 0.01
            while time.thread_time() < deadline:
                pass
            return "done"

        async def main() -> tuple[str, int]:
            timed = CpuTimed(handler())
            return await timed, timed.cpu_ns

        loop = new_event_loop()
        try:
            result, cpu_ns = loop.run_until_complete(main())
        finally:
            loop.close()
        assert result == "done"
        assert 0.01 <= cpu_ns * 1e-9 < 0.04  # the busy 10 ms, not the 50 ms sleep

    def test_an_exception_comes_through(self) -> None:
        async def handler() -> None:
            await asyncio.sleep(0)
            raise ValueError("no")

        loop = new_event_loop("asyncio")
        try:
            with pytest.raises(ValueError, match="no"):
                loop.run_until_complete(_await(CpuTimed(handler())))
        finally:
            loop.close()


async def _await(aw: Any) -> Any:
    return await aw


class TestPrefix:
    """Only the finished messages at a partition's front are released."""

    def test_the_prefix_stops_at_the_first_unfinished(self) -> None:
        track = PartitionTrack()
        entries = [track.add(FakeMessage(b"", 0, o)) for o in range(10, 14)]
        entries[1].done = entries[2].done = True
        assert track.done_prefix() == 0
        entries[0].done = True
        assert track.done_prefix() == 3
        done, offset = track.release(3)
        assert [e.message.offset() for e in done] == [10, 11, 12]
        assert offset == 13
        assert track.done_prefix() == 0


class TestReleasedPositions:
    """Exactly-once reads the released offsets, once there are any."""

    def test_consumer_positions_until_released(self) -> None:
        consumer = FakeConsumer(positions={0: 50})
        positions = ReleasedPositions(consumer)
        tps = [TopicPartition("in", 0), TopicPartition("in", 1)]
        assert [tp.offset for tp in positions.position(tps)] == [50, OFFSET_INVALID]
        positions.released = {1: 7}
        assert [tp.offset for tp in positions.position(tps)] == [OFFSET_INVALID, 7]
        assert positions.committed == consumer.committed  # the rest: the consumer's


class TestProbe:
    """A plain callable's first call says which it is; nothing is dropped."""

    def test_a_sync_answer_hands_the_handler_itself_over(self) -> None:
        got: list[Any] = []
        probe = FirstCallProbe(_sync)
        probe.on_sync = got.append
        assert probe(1) == 1 and probe(2) == 2
        assert got == [_sync] and probe.kind == "sync"

    def test_an_awaitable_is_awaited_and_the_move_asked_for(self) -> None:
        moved: list[bool] = []
        probe = FirstCallProbe(lambda x: _async(x))
        probe.on_async = lambda: moved.append(True)
        assert probe(1) == 1 and probe(2) == 2
        assert moved == [True] and probe.kind == "async"
        probe.close()


class TestShadowHook:
    """The shadow decode sees each release's messages, once stored."""

    def test_released_messages_go_to_the_shadow(self) -> None:
        from prometheus_client import CollectorRegistry

        from codec import get_codec
        from service.delivery.dead_letters import PoisonHandler
        from service.loop.async_path.loop import AsyncLoop
        from service.telemetry.metrics import Metrics
        from tests.unit.test_app import msg

        seen: list[int] = []
        stop: list[bool] = []
        consumer = FakeConsumer(batches=[[msg(i) for i in range(5)]])
        metrics = Metrics(CollectorRegistry(), codec="msgspec-msgpack", schema="medium")
        loop = AsyncLoop(
            consumer,
            codec=get_codec("msgspec-msgpack", "medium"),
            step=_async,
            metrics=metrics,
            poison=PoisonHandler(metrics, codec="x", group="g", dead_letters=None),
            output=None,
            max_payload_bytes=1 << 20,
            batch_size=10,
            batch_timeout_s=0.001,
            max_in_flight=10,
            shadow=lambda ms: seen.extend(int(m.offset() or 0) for m in ms),
        )
        consumer.on_drained = lambda: stop.append(loop.processed == 5)
        loop.run(lambda: any(stop), lambda: None)
        assert seen == [0, 1, 2, 3, 4]
        assert consumer.stored == [[("in", 0, 5)]]
