"""The producer loop against a fake clock and a fake producer: pacing and stamping."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from loadgen.config import LoadgenSettings
from loadgen.producer import Clock, ProducerLoop
from loadgen.report import Aggregator, Tick
from loadgen.source import Source, synthetic_source, value_bytes_sent
from service.telemetry.log_setup import KafkaErrors, kafka_logger

WALL0 = 1_767_225_600_000_000_000


class FakeTime:
    """A clock that only moves when slept on or when the producer does work."""

    def __init__(self) -> None:
        self.t = 500.0

    def now(self) -> float:
        return self.t

    def sleep(self, dt: float) -> None:
        self.t += dt

    def wall_ns(self) -> int:
        return WALL0 + round((self.t - 500.0) * 1e9)

    def clock(self) -> Clock:
        return Clock(self.now, self.sleep, self.wall_ns)


class FakeMessage:
    def latency(self) -> float:
        return 0.002


class FakeError:
    def name(self) -> str:
        return "_MSG_TIMED_OUT"


@dataclass
class FakeProducer:
    """Records produce() calls; acknowledges them on poll(); may refuse (full)."""

    conf: dict[str, Any]
    time: FakeTime
    capacity: int = 10**9
    cost_s: float = 2e-6
    fail_seqs: frozenset[int] = frozenset()
    sent: list[dict[str, Any]] = field(default_factory=list)
    pending: list[bool] = field(default_factory=list)

    def produce(self, *args: Any) -> None:
        if len(self.pending) >= self.capacity:
            raise BufferError("queue full")
        topic, value, key, partition, _cb, _dr, timestamp, headers = args
        self.time.t += self.cost_s
        seq = int(dict(headers)["x-seq"])
        self.sent.append(
            {
                "topic": topic,
                "value": value,
                "key": key,
                "partition": partition,
                "timestamp": timestamp,
                "headers": headers,
                "at": self.time.t,
            }
        )
        self.pending.append(seq in self.fail_seqs)

    def poll(self, timeout: float = 0) -> int:
        done, self.pending = self.pending, []
        for failed in done:
            msg = FakeMessage()
            self.conf["on_delivery"](FakeError() if failed else None, msg)
        return len(done)

    def __len__(self) -> int:
        return len(self.pending)

    def list_topics(self, *args: Any, **kwargs: Any) -> None:
        return None

    def purge(self) -> None:
        self.pending.clear()

    def close(self) -> bool:
        return True


def run_loop(
    s: LoadgenSettings,
    *,
    shard: int = 0,
    source: Source | None = None,
    **producer: Any,
) -> tuple[FakeProducer, list[Tick], FakeTime]:
    fake_time = FakeTime()
    made: list[FakeProducer] = []

    def factory(conf: dict[str, Any]) -> FakeProducer:
        made.append(FakeProducer(conf, fake_time, **producer))
        return made[0]

    ticks: list[Tick] = []
    loop = ProducerLoop(
        s,
        source or synthetic_source(s),
        shard,
        ticks.append,
        clock=fake_time.clock(),
        producer_factory=factory,
    )
    loop.warm_up()
    loop.run(fake_time.wall_ns() + 100_000_000, lambda: False)
    loop.close()
    return made[0], ticks, fake_time


def settings(**kw: Any) -> LoadgenSettings:
    base: dict[str, Any] = {
        "codec": "msgspec-msgpack",
        "profile": "small",
        "pool_size": 50,
        "run_id": "run-1",
        "idempotence": False,
        "acks": "1",
    }
    return LoadgenSettings.model_validate(base | kw)


class TestPacing:
    """Messages leave at their intended time, stamped with it, in x-seq order."""

    def test_constant_rate_stamps_the_intended_time(self) -> None:
        producer, ticks, _ = run_loop(settings(rate=1000, count=2500))
        start = WALL0 + 100_000_000
        assert [int(dict(m["headers"])["x-seq"]) for m in producer.sent] == list(
            range(2500)
        )
        for k, m in enumerate(producer.sent):
            intended = start + k * 1_000_000
            sent_ns = int(m["headers"][0][1])
            assert abs(sent_ns - intended) <= 1
            assert m["timestamp"] == sent_ns // 1_000_000
            at_ns = WALL0 + round((m["at"] - 500.0) * 1e9)
            # Never early; at most one slice (plus the fake produce cost) late.
            assert at_ns >= sent_ns - 1000
            assert at_ns - sent_ns <= 2_000_000
        assert sum(t.sent for t in ticks) == 2500
        assert sum(t.acked for t in ticks) == 2500
        assert ticks[-1].done

    def test_header_order_and_values(self) -> None:
        s = settings(rate=100, count=3)
        producer, _, _ = run_loop(s)
        names = [name for name, _ in producer.sent[0]["headers"]]
        assert names == ["x-sent-ns", "content-type", "x-seq", "x-run-id"]
        headers = dict(producer.sent[2]["headers"])
        assert headers["content-type"] == b"application/vnd.msgpack"
        assert headers["x-run-id"] == b"run-1"
        assert headers["x-seq"] == b"2"
        assert producer.sent[0]["partition"] == -1
        assert producer.sent[1]["key"] == b"1"  # small: the payload's id

    def test_per_second_counts_follow_the_rate(self) -> None:
        _, ticks, _ = run_loop(settings(rate=2000, duration=3))
        agg = Aggregator(1, 3.0, 6000)
        for tick in ticks:
            agg.merge(tick)
        summary = agg.summary(
            {"run_id": "r", "topic": "t", "codec": "c", "profile": "p", "pattern": "x"},
            interrupted=False,
        )
        assert summary.sent == 6000
        assert summary.window_s == pytest.approx(3.0, abs=0.01)
        # Counted when sent: a slice may carry a message over a second boundary.
        assert all(abs(n - 2000) <= 3 for n in summary.per_second)
        assert summary.target_rate == 2000
        assert abs(summary.rate_error_pct or 0) < 0.1

    def test_a_late_loop_catches_up_and_reports_its_lag(self) -> None:
        # Each produce() takes 2 ms of fake time: 1000 msg/s cannot be held.
        producer, ticks, _ = run_loop(settings(rate=1000, count=300), cost_s=0.002)
        assert len(producer.sent) == 300
        assert max(t.lag_max for t in ticks) > 0.1

    def test_processes_stride_the_same_schedule(self) -> None:
        single, _, _ = run_loop(settings(rate=500, count=101))
        stamps = {
            int(dict(m["headers"])["x-seq"]): m["headers"][0][1] for m in single.sent
        }
        merged = {}
        for shard in range(3):
            part, _, _ = run_loop(
                settings(rate=500, count=101, processes=3), shard=shard
            )
            for m in part.sent:
                seq = int(dict(m["headers"])["x-seq"])
                assert seq % 3 == shard
                assert m["value"] == single.sent[seq]["value"]
                merged[seq] = m["headers"][0][1]
        assert sorted(merged) == list(range(101))
        for seq, stamp in merged.items():
            assert abs(int(stamp) - int(stamps[seq])) <= 1


class TestUnthrottled:
    """rate = 0: bursts until the queue is full, nothing lost or doubled."""

    def test_buffer_full_is_retried_not_dropped(self) -> None:
        producer, ticks, _ = run_loop(settings(rate=0, count=5000), capacity=700)
        seqs = [int(dict(m["headers"])["x-seq"]) for m in producer.sent]
        assert seqs == list(range(5000))
        assert sum(t.sent for t in ticks) == 5000

    def test_duration_bounds_an_unthrottled_run(self) -> None:
        producer, _, _ = run_loop(settings(rate=0, duration=0.05), cost_s=1e-5)
        assert 1000 < len(producer.sent) < 10_000


class TestDelivery:
    """Failures are counted by error name; nothing is dropped silently."""

    def test_failed_deliveries_are_counted(self) -> None:
        s = settings(rate=1000, count=100)
        _, ticks, _ = run_loop(s, fail_seqs=frozenset({3, 50, 99}))
        assert sum(t.failed for t in ticks) == 3
        assert sum(t.acked for t in ticks) == 97
        errors: dict[str, int] = {}
        for t in ticks:
            for k, v in t.errors.items():
                errors[k] = errors.get(k, 0) + v
        assert errors == {"_MSG_TIMED_OUT": 3}

    def test_client_errors_and_lines_go_through_structlog(self) -> None:
        s = settings(rate=1000, count=10, kafka={"bootstrap_servers": "k:9"})
        producer, _, _ = run_loop(s)
        assert producer.conf["logger"] is kafka_logger()
        report = producer.conf["error_cb"]
        assert isinstance(report, KafkaErrors) and report.bootstrap == "k:9"

    def test_value_bytes_are_exact(self) -> None:
        s = settings(rate=1000, count=120)
        source = synthetic_source(s)
        _, ticks, _ = run_loop(s, source=source)
        expected = sum(len(source.values[q % 50] or b"") for q in range(120))
        assert ticks[-1].value_bytes == expected

    @pytest.mark.parametrize("processes", [1, 2, 3, 4])
    def test_value_bytes_for_every_stride(self, processes: int) -> None:
        source = Source(values=[b"x" * i for i in range(1, 11)], keys=[None] * 10)
        s = settings(processes=processes)
        for shard in range(processes):
            for sent in (0, 1, 7, 23, 1234):
                seqs = range(shard, shard + sent * processes, processes)
                expected = sum(len(source.values[q % 10] or b"") for q in seqs)
                assert value_bytes_sent(source, s, shard, sent) == expected


class TestGeneralPath:
    """Seq keys, live encoding and replay-style sources take the general loop."""

    def test_seq_keys_and_live_encoding(self) -> None:
        s = settings(rate=1000, count=60, key="seq", encode_live=True)
        source = synthetic_source(s)
        producer, _, _ = run_loop(s, source=source)
        assert [m["key"] for m in producer.sent[:3]] == [b"0", b"1", b"2"]
        assert producer.sent[7]["value"] == source.values[7]

    def test_replay_source_headers_and_partitions(self) -> None:
        source = Source(
            values=[b"v0", b"v1"],
            keys=[b"k0", None],
            content_types=[b"application/json", None],
            extra_headers=[(("trace", b"t0"),), ()],
            partitions=[3, 1],
            times_s=[0.0, 0.01],
            period_s=0.02,
        )
        s = settings(replay=Path("x.rec"), count=4)
        producer, _, _ = run_loop(s, source=source)
        first, second = producer.sent[0], producer.sent[1]
        assert [h[0] for h in first["headers"]] == [
            "x-sent-ns",
            "content-type",
            "x-seq",
            "x-run-id",
            "trace",
        ]
        assert [h[0] for h in second["headers"]] == ["x-sent-ns", "x-seq", "x-run-id"]
        assert [m["partition"] for m in producer.sent] == [3, 1, 3, 1]
        gaps = [
            int(b["headers"][0][1]) - int(a["headers"][0][1])
            for a, b in itertools.pairwise(producer.sent)
        ]
        assert gaps == pytest.approx([10_000_000] * 3, abs=2)
