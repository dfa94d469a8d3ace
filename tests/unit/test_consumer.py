"""The batch loop with a fake consumer and producer: no broker needed."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition
from prometheus_client import CollectorRegistry

from codec import Codec, CodecName, get_codec
from loadgen.payloads import make_payloads
from schemas.errors import FatalError
from service.delivery.dead_letters import PoisonHandler
from service.delivery.gated_writes import ConfirmedProducer
from service.kafka.headers import SENT_NS, SEQ
from service.logic.builtin import Handler
from service.loop import heap_trim
from service.loop.batch_loop import TIMER_WAIT_MAX_S, BatchLoop
from service.telemetry.metrics import Metrics
from tests.fakes import FakeConsumer, FakeMessage, FakeProducer


def _recent_ns() -> bytes:
    """A send stamp of now: a stamp taken at import grows older as the suite runs."""
    return str(time.time_ns()).encode()


"""A send time as the load generator stamps it (a 2023 one would be `too_large`)."""

PAYLOADS = make_payloads("medium", 50, seed=11)


@pytest.fixture(params=[1, 2, 10_000], ids=["timed", "alternate", "run"])
def decode_every(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> int:
    """Each test once per way through the loop (see `Rig`)."""
    every: int = request.param
    monkeypatch.setattr(Rig, "decode_every", every)
    return every


pytestmark = pytest.mark.usefixtures("decode_every")


class Rig:
    """A loop wired to fakes, with its metrics registry.

    `decode_every` (the loop's `decode_sample_every`) is set for each test by the
    `decode_every` fixture: every message through the timed path, every other
    one, or none of them, so both per-message paths meet every case.
    """

    decode_every = 1

    def __init__(
        self,
        codec_name: CodecName = "msgspec-msgpack",
        *,
        dead_letters: bool = True,
        output: bool = False,
        fail_with: Any = lambda record: None,
        refuse_with: Any = lambda record: None,
        limit: int = 1 << 20,
        step: Any = "aggregate",
        max_attempts: int = 1,
        every: int = 1,
        decode_every: int | None = None,
        store_interval_s: float = 0.0,
        codec: Codec[Any] | None = None,
    ) -> None:
        self.events: list[str] = []
        self.assigned: set[int] = set()
        self.codec = codec or get_codec(codec_name, "medium")
        self.consumer = FakeConsumer(events=self.events)
        self.producer = FakeProducer(
            fail_with=fail_with, refuse_with=refuse_with, events=self.events
        )
        confirmed = ConfirmedProducer(self.producer, timeout_s=1.0)
        self.registry = CollectorRegistry()
        self.metrics = Metrics(self.registry, codec=codec_name, schema="medium")
        poison = PoisonHandler(
            self.metrics,
            codec=codec_name,
            group="g",
            dead_letters=(confirmed, "in.dlq") if dead_letters else None,
        )
        self.loop = BatchLoop(
            self.consumer,
            codec=self.codec,
            step=Handler("medium", step).step if isinstance(step, str) else step,
            metrics=self.metrics,
            poison=poison,
            output=(confirmed, "out") if output else None,
            max_payload_bytes=limit,
            batch_size=100,
            batch_timeout_s=0.01,
            latency_sample_every=every,
            decode_sample_every=decode_every or self.decode_every,
            max_attempts=max_attempts,
            store_interval_s=store_interval_s,
        )

    def process(self, batch: list[FakeMessage]) -> None:
        """Hand `batch` to the loop through the fake consumer, as `run()` would
        (a partition seen for the first time is assigned first, as librdkafka's
        rebalance callback would)."""
        new = {m._partition for m in batch if m.error() is None} - self.assigned
        if new:
            self.loop.assign([TopicPartition("in", p) for p in sorted(new)])
            self.assigned |= new
        self.consumer.batches.append(batch)
        self.loop.process(self.consumer.consume(len(batch)))

    def msg(
        self,
        i: int,
        *,
        partition: int = 0,
        value: bytes | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
    ) -> FakeMessage:
        if value is None:
            value = self.codec.encode(self.codec.from_builtins(PAYLOADS[i % 50]))
        if headers is None:
            headers = [(SENT_NS, _recent_ns()), (SEQ, str(i).encode())]
        return FakeMessage(value, partition, i, _key=str(i).encode(), _headers=headers)

    def latency_bucket(self) -> tuple[float, float]:
        """The finite bucket (lower, upper bound) holding the only e2e latency."""
        counts, _total = self.metrics.e2e_latency.snapshot()
        bounds = self.metrics.e2e_latency.bounds
        assert sum(counts) == 1
        index = counts.index(1)
        assert index < len(bounds), "the latency fell in the overflow bucket"
        return (bounds[index - 1] if index else 0.0), bounds[index]

    def latency_sum(self) -> float:
        return self.sample("worker_e2e_latency_seconds_sum", codec=self.codec.name)

    def sample(self, name: str, **labels: str) -> float:
        value = self.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value

    def ok(self) -> float:
        return self.sample("worker_messages_total", codec=self.codec.name, outcome="ok")


def _record_waits(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float]]:
    """How the rig's loop waits, in order: ("sleep", s) and ("consume N", timeout)."""
    waits: list[tuple[str, float]] = []
    monkeypatch.setattr(
        "service.loop.batch_loop.time.sleep", lambda s: waits.append(("sleep", s))
    )
    scripted = rig.consumer.consume

    def consume(num_messages: int, timeout: float) -> list[Any]:
        waits.append((f"consume {num_messages}", timeout))
        return scripted(num_messages, timeout)

    monkeypatch.setattr(rig.consumer, "consume", consume)
    return waits


class TestHappyPath:
    """Good batches are handled, counted and their offsets stored (+1)."""

    def test_offsets_stored_per_partition(self) -> None:
        rig = Rig()
        batch = [rig.msg(i, partition=i % 3) for i in range(30)]
        rig.process(batch)
        assert sorted(rig.consumer.stored[0]) == [
            ("in", 0, 28),
            ("in", 1, 29),
            ("in", 2, 30),
        ]
        assert rig.ok() == 30
        assert rig.sample("worker_bytes_total", codec="msgspec-msgpack") == sum(
            len(m.value() or b"") for m in batch
        )
        assert (
            rig.sample("worker_e2e_latency_seconds_count", codec="msgspec-msgpack")
            == 30
        )
        assert (
            rig.sample("worker_decode_seconds_count", codec="msgspec-msgpack")
            == 30 // Rig.decode_every
        )
        assert rig.sample("worker_batch_messages_count") == 1
        assert rig.sample("worker_batch_messages_bucket", le="50.0") == 1
        assert rig.producer.produced == []

    def test_latency_from_kafka_timestamp_without_header(self) -> None:
        rig = Rig()
        message = rig.msg(0, headers=[])
        message._timestamp = time.time_ns() // 1_000_000 - 2_000  # ms, 2 s ago
        rig.process([message])
        low, high = rig.latency_bucket()
        # At least the 2 s since the timestamp, plus well under 1 s of processing.
        assert low < 3.0 and high >= 2.0
        assert 2.0 <= rig.latency_sum() < 3.0

    def test_sent_header_wins_over_kafka_timestamp(self) -> None:
        rig = Rig()
        sent_ns = time.time_ns() - 500_000_000  # 0.5 s ago; the timestamp is older
        rig.process([rig.msg(0, headers=[(SENT_NS, str(sent_ns).encode())])])
        low, high = rig.latency_bucket()
        assert low < 1.5 and high >= 0.5
        assert 0.5 <= rig.latency_sum() < 1.5

    def test_latency_sampled_every_kth_message_across_batches(self) -> None:
        rig = Rig(every=4)
        rig.process([rig.msg(i) for i in range(10)])
        rig.process([rig.msg(i) for i in range(10, 17)])
        # Stream positions 0, 4, 8, 12, 16.
        assert (
            rig.sample("worker_e2e_latency_seconds_count", codec="msgspec-msgpack") == 5
        )
        assert rig.ok() == 17

    def test_run_stops_and_ticks(self) -> None:
        rig = Rig()
        rig.consumer.batches = [[rig.msg(0)], [], [rig.msg(1)]]
        ticks: list[int] = []
        rig.loop.run(lambda: len(ticks) >= 3, lambda: ticks.append(1))
        assert rig.ok() == 2 and len(ticks) == 3

    def test_waits_on_a_timer_unless_the_last_batch_was_half_full(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Below half a batch (a steady rate, idle) the loop sleeps the wait and then
        takes what came; from half a batch up (a backlog) it waits on the queue,
        which returns as soon as the batch is full."""
        rig = Rig(step="noop")  # batch 100, wait 10 ms
        waits = _record_waits(rig, monkeypatch)
        rig.assigned.add(0)
        rig.loop.assign([TopicPartition("in", 0)])
        sizes = (10, 49, 50, 100, 0, 1)
        seq = iter(range(1000))
        rig.consumer.batches = [[rig.msg(next(seq)) for _ in range(n)] for n in sizes]
        rounds = iter(sizes)
        rig.loop.run(lambda: next(rounds, None) is None, lambda: None)
        assert waits == [
            ("sleep", 0.01),
            ("consume 100", 0),  # 10
            ("sleep", 0.01),
            ("consume 100", 0),  # 49
            ("sleep", 0.01),
            ("consume 100", 0),  # 50: half
            ("consume 100", 0.01),  # 100
            ("consume 100", 0.01),  # none
            ("sleep", 0.01),
            ("consume 100", 0),  # 1
        ]
        assert rig.ok() == 210

    def test_a_long_wait_always_waits_on_the_queue(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Over `TIMER_WAIT_MAX_S` a batch that fills early must not wait out the
        rest, and a sleep would count against `max.poll.interval.ms`."""
        rig = Rig(step="noop")
        rig.loop._timeout = TIMER_WAIT_MAX_S * 2
        waits = _record_waits(rig, monkeypatch)
        rig.consumer.batches = [[rig.msg(0)], []]
        rounds = iter(range(2))
        rig.loop.run(lambda: next(rounds, None) is None, lambda: None)
        assert waits == [("consume 100", TIMER_WAIT_MAX_S * 2)] * 2


class TestPaths:
    """Both per-message paths and every loop variant sort messages the same way."""

    def test_decode_timed_every_kth_message_across_batches(self) -> None:
        rig = Rig(decode_every=4)
        rig.process([rig.msg(i) for i in range(10)])
        rig.process([rig.msg(i) for i in range(10, 17)])
        # Stream positions 3, 7, 11 and 15; each timed decode is one observation.
        assert rig.sample("worker_decode_seconds_count", codec="msgspec-msgpack") == 4
        assert rig.sample("worker_handle_seconds_count", codec="msgspec-msgpack") == 4
        assert rig.ok() == 17

    def test_the_clock_cost_is_taken_off_each_sample(self) -> None:
        """Each decode and logic sample loses the clock bracket measured at start-up
        (exported as a gauge); a sample shorter than it counts as 0, not negative."""
        rig = Rig(decode_every=1)
        overhead = rig.sample("worker_timer_overhead_seconds")
        assert 0 < overhead == rig.loop._clock_ns * 1e-9
        rig.loop._clock_ns = 10**12  # longer than any decode here
        rig.process([rig.msg(i) for i in range(5)])
        for name in ("worker_decode_seconds", "worker_handle_seconds"):
            assert rig.sample(f"{name}_count", codec="msgspec-msgpack") == 5
            assert rig.sample(f"{name}_sum", codec="msgspec-msgpack") == 0.0

    @pytest.mark.parametrize("step", ["noop", "aggregate"])
    @pytest.mark.parametrize("codec", ["msgspec-msgpack", "auto"])
    def test_every_kind_of_message(self, step: str, codec: CodecName) -> None:
        """Good, undecodable, empty, oversize and a consumer error in one batch, with
        and without logic, plain and general loop: each counted once, as itself."""
        rig = Rig(codec, step=step, limit=1500)
        good = get_codec("msgspec-msgpack", "medium")
        headers: list[tuple[str, bytes | None]] = [
            (SENT_NS, _recent_ns()),
            ("content-type", b"application/vnd.msgpack"),
        ]
        values = [good.encode(good.from_builtins(PAYLOADS[i])) for i in range(3)]
        error = FakeMessage(
            b"transport", -1, -1001, _error=KafkaError(KafkaError._TRANSPORT)
        )
        batch = [
            rig.msg(0, value=values[0], headers=headers),
            rig.msg(1, value=b"\xc1", headers=headers),
            rig.msg(2, value=values[1], headers=headers),
            error,
            rig.msg(3, value=b"x" * 2000, headers=headers),
            rig.msg(4, value=values[2], headers=headers),
        ]
        batch.append(rig.msg(5, headers=headers))
        batch[-1]._value = None
        rig.process(batch)
        reasons = [dict(r["headers"])["x-dlq-reason"] for r in rig.producer.acked]
        assert reasons == [b"decode", b"oversize", b"empty"]
        assert rig.ok() == 3
        name = rig.codec.name
        assert (
            rig.sample("worker_messages_total", codec=name, outcome="decode_error") == 3
        )
        assert rig.sample("worker_consumer_errors_total", code="_TRANSPORT") == 1
        assert rig.sample("worker_bytes_total", codec=name) == sum(map(len, values))
        assert rig.consumer.stored == [[("in", 0, 6)]]

    def test_a_fatal_consumer_error_stops_before_the_store(self) -> None:
        rig = Rig(step="noop")
        fatal = KafkaError(KafkaError._FATAL, fatal=True)
        error = FakeMessage(b"fatal", -1, -1001, _error=fatal)
        with pytest.raises(FatalError, match="fatal consumer error"):
            rig.process([rig.msg(0), error, rig.msg(1)])
        assert rig.consumer.stored == []


class TestPoison:
    """Poison goes to the DLQ, acknowledged before the offset is stored."""

    def test_dead_letter_before_store(self) -> None:
        rig = Rig()
        batch = [rig.msg(0), rig.msg(1, value=b"\xc1 not msgpack"), rig.msg(2)]
        rig.process(batch)
        assert rig.events == ["ack:in.dlq", "store"]
        assert rig.consumer.stored == [[("in", 0, 3)]]
        [record] = rig.producer.acked
        assert record["value"] == b"\xc1 not msgpack"
        assert record["key"] == b"1"
        headers = dict(record["headers"])
        assert headers["x-seq"] == b"1"  # the original headers are kept
        assert headers["x-dlq-reason"] == b"decode"
        assert headers["x-dlq-stage"] == b"decode"
        assert headers["x-dlq-codec"] == b"msgspec-msgpack"
        assert headers["x-dlq-topic"] == b"in"
        assert (headers["x-dlq-partition"], headers["x-dlq-offset"]) == (b"0", b"1")
        assert headers["x-dlq-exception-type"] == b"msgspec.DecodeError"
        assert headers["x-dlq-group"] == b"g"
        assert rig.ok() == 2
        assert (
            rig.sample(
                "worker_messages_total", codec="msgspec-msgpack", outcome="decode_error"
            )
            == 1
        )
        assert (
            rig.sample(
                "worker_dead_letters_total", codec="msgspec-msgpack", reason="decode"
            )
            == 1
        )

    @pytest.mark.parametrize(
        ("value", "reason"), [(b"x" * 2000, "oversize"), (None, "empty")]
    )
    def test_oversize_and_empty(self, value: bytes | None, reason: str) -> None:
        rig = Rig(limit=1500)
        message = rig.msg(0)
        message._value = value
        rig.process([message])
        [record] = rig.producer.acked
        assert dict(record["headers"])["x-dlq-reason"] == reason.encode()
        assert record["value"] == value
        assert rig.consumer.stored == [[("in", 0, 1)]]

    def test_logic_error_is_dead_lettered(self) -> None:
        rig = Rig()
        broken = dict(PAYLOADS[0], items=[])
        value = rig.codec.encode(rig.codec.from_builtins(broken))
        rig.process([rig.msg(0), rig.msg(1, value=value)])
        [record] = rig.producer.acked
        headers = dict(record["headers"])
        assert headers["x-dlq-reason"] == b"logic"
        assert headers["x-dlq-stage"] == b"process"
        assert headers["x-dlq-exception-message"] == b"order without items"
        assert (
            rig.sample(
                "worker_messages_total", codec="msgspec-msgpack", outcome="logic_error"
            )
            == 1
        )
        assert rig.ok() == 1

    def test_fail_policy_stops_without_storing(self) -> None:
        rig = Rig(dead_letters=False)
        with pytest.raises(FatalError, match=r"in\[0\]@1"):
            rig.process([rig.msg(0), rig.msg(1, value=b"\xc1")])
        assert rig.consumer.stored == []

    def test_too_large_for_the_dlq_is_written_without_value(self) -> None:
        too_large = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
        rig = Rig(fail_with=lambda r: too_large if r["value"] else None)
        rig.process([rig.msg(0, value=b"\xc1" * 100)])
        [record] = rig.producer.acked
        assert record["value"] is None
        assert dict(record["headers"])["x-dlq-value-dropped-bytes"] == b"100"
        assert rig.consumer.stored == [[("in", 0, 1)]]

    def test_consumer_error_is_counted_not_dead_lettered(self) -> None:
        rig = Rig()
        error = FakeMessage(
            b"Broker: transport", -1, -1001, _error=KafkaError(KafkaError._TRANSPORT)
        )
        rig.process([rig.msg(0), error])
        assert rig.producer.produced == []
        assert rig.consumer.stored == [[("in", 0, 1)]]
        assert rig.sample("worker_consumer_errors_total", code="_TRANSPORT") == 1
        assert rig.ok() == 1


class TestOutput:
    """Results are re-encoded with the codec and confirmed before the store."""

    def test_output_records(self) -> None:
        rig = Rig(output=True)
        rig.process([rig.msg(i) for i in range(5)])
        assert rig.events[-1] == "store" and rig.events.count("ack:out") == 5
        record = rig.producer.acked[2]
        headers = dict(record["headers"])
        assert headers["content-type"] == b"application/vnd.msgpack"
        assert headers["x-seq"] == b"2"
        assert rig.codec.to_builtins(rig.codec.decode(record["value"])) == PAYLOADS[2]

    def test_result_that_does_not_encode_is_dead_lettered(self) -> None:
        """A result the output codec refuses is poison of stage `encode`: the
        message goes to the DLQ whole, the others to the output, all stored."""

        def spoil(obj: Any) -> None:
            if obj.order_id == PAYLOADS[1]["order_id"]:
                obj.tags.append(object())  # msgspec cannot encode it

        rig = Rig(output=True, step=spoil)
        rig.process([rig.msg(i) for i in range(3)])
        topics = [r["topic"] for r in rig.producer.acked]
        assert sorted(topics) == ["in.dlq", "out", "out"]
        [dead] = [r for r in rig.producer.acked if r["topic"] == "in.dlq"]
        headers = dict(dead["headers"])
        assert headers["x-dlq-stage"] == b"encode"
        assert headers["x-dlq-reason"] == b"encode"
        assert dead["value"] == rig.msg(1).value()
        assert rig.consumer.stored == [[("in", 0, 3)]]
        assert rig.ok() == 2


class TestAuto:
    """The auto codec decodes each message by its content-type header."""

    def test_mixed_batch(self) -> None:
        rig = Rig("auto")
        batch = []
        for i, name in enumerate(
            ["json+pydantic", "msgspec-msgpack", "protobuf", "msgspec-json"]
        ):
            codec = get_codec(name, "medium")  # type: ignore[arg-type]
            value = codec.encode(codec.from_builtins(PAYLOADS[i]))
            headers: list[tuple[str, bytes | None]] = [
                ("content-type", codec.content_type.encode())
            ]
            batch.append(rig.msg(i, value=value, headers=headers))
        legacy = get_codec("json+pydantic", "medium")
        batch.append(
            rig.msg(
                4, value=legacy.encode(legacy.from_builtins(PAYLOADS[4])), headers=[]
            )
        )
        batch.append(rig.msg(5, headers=[("content-type", b"text/csv")]))
        rig.process(batch)
        assert rig.sample("worker_messages_total", codec="auto", outcome="ok") == 5
        [record] = rig.producer.acked
        assert dict(record["headers"])["x-dlq-reason"] == b"content_type"


class TestInvalidLatency:
    """A send time that cannot give a latency is counted by reason, never observed."""

    @pytest.mark.parametrize(
        ("value", "reason"),
        [
            (b"abc", "unparsable"),
            (b"", "unparsable"),
            (b"1.7e18", "unparsable"),
            (b"\xff\xfe", "unparsable"),
            (b"9" * 5000, "unparsable"),
            (b"-5", "unparsable"),
            (b"0", "unparsable"),
            pytest.param(  # a stable id: each xdist worker collects its own time
                str(time.time_ns() + 3600 * 10**9).encode(), "negative", id="hour-ahead"
            ),
            (b"9" * 20, "negative"),
            (b"1700000000", "too_large"),
        ],
    )
    def test_reason(self, value: bytes, reason: str) -> None:
        rig = Rig()
        rig.process([rig.msg(0, headers=[(SENT_NS, value)]), rig.msg(1)])
        assert rig.ok() == 2
        counts = {
            r: rig.sample(
                "worker_e2e_latency_invalid_total", codec=rig.codec.name, reason=r
            )
            for r in ("unparsable", "negative", "too_large")
        }
        assert counts == {r: (1.0 if r == reason else 0.0) for r in counts}
        assert rig.sample("worker_e2e_latency_seconds_count", codec=rig.codec.name) == 1
        assert 0 <= rig.latency_sum() < 60

    def test_future_kafka_timestamp_is_negative(self) -> None:
        rig = Rig()
        message = rig.msg(0, headers=[])
        message._timestamp = time.time_ns() // 1_000_000 + 3_600_000
        rig.process([message])
        assert (
            rig.sample(
                "worker_e2e_latency_invalid_total",
                codec=rig.codec.name,
                reason="negative",
            )
            == 1
        )
        assert rig.sample("worker_e2e_latency_seconds_count", codec=rig.codec.name) == 0


class TestBatchBytes:
    """The batch is bounded by bytes: large messages shrink the next `consume()`."""

    def test_large_messages_shrink_the_batch_and_small_ones_restore_it(self) -> None:
        rig = Rig()
        small = [rig.msg(i) for i in range(10)]
        rig.process(small)
        assert rig.loop._size == 100  # no byte bound: the batch size
        size = len(small[0].value() or b"")
        rig.loop._max_bytes = size * 4  # as if each message were a quarter of it
        rig.process([rig.msg(i) for i in range(10, 20)])
        assert 2 <= rig.loop._size <= 5
        rig.loop._max_bytes = 1 << 30  # small again, relative to the bound
        rig.process([rig.msg(i) for i in range(20, 30)])
        assert rig.loop._size == 100

    def test_heap_trimmed_once_when_a_burst_ends(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Not per batch: once, when the large values stop."""
        trims: list[int] = []
        monkeypatch.setattr(heap_trim, "trim", lambda: trims.append(1))
        rig = Rig()
        size = len(rig.msg(0).value() or b"")
        rig.process([rig.msg(i) for i in range(10)])
        rig.loop._max_bytes = size * 4
        rig.process([rig.msg(i) for i in range(10, 20)])
        rig.process([rig.msg(i) for i in range(20, 30)])
        assert trims == []  # a burst: nothing returned while it lasts
        rig.loop._max_bytes = 1 << 30
        rig.process([rig.msg(i) for i in range(30, 40)])
        rig.process([rig.msg(i) for i in range(40, 50)])
        assert trims == [1]


class TestStoreInterval:
    """Positions are stored at most every `store_interval_s`, and never left behind:
    before a revoke, when no message came and when the loop stops; never past a
    batch that did not complete."""

    def test_a_batch_within_the_interval_waits_for_the_next_store(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        clock = [100.0]
        monkeypatch.setattr("service.loop.batch_loop.time.monotonic", lambda: clock[0])
        rig = Rig(step="noop", store_interval_s=0.1)
        rig.process([rig.msg(0), rig.msg(1)])
        clock[0] += 0.05
        rig.process([rig.msg(2)])
        assert rig.consumer.stored == [[("in", 0, 2)]]
        clock[0] += 0.06  # the interval has passed: this batch stores both
        rig.process([rig.msg(3)])
        assert rig.consumer.stored == [[("in", 0, 2)], [("in", 0, 4)]]
        assert rig.ok() == 4  # counted at once, whatever the store waits for

    def test_stored_before_a_revoke(self) -> None:
        rig = Rig(step="noop", store_interval_s=3600)
        rig.process([rig.msg(0, partition=0), rig.msg(1, partition=1)])
        rig.process([rig.msg(2, partition=0), rig.msg(3, partition=1)])
        assert rig.consumer.stored == [[("in", 0, 1), ("in", 1, 2)]]
        rig.loop.revoke([1])  # inside consume(): the commit on revoke follows
        assert rig.consumer.stored[-1] == [("in", 0, 3), ("in", 1, 4)]
        rig.process([rig.msg(4, partition=0)])
        rig.loop.flush()
        assert rig.consumer.stored[-1] == [("in", 0, 5)]  # partition 1 is gone

    def test_stored_when_idle_and_when_the_loop_stops(self) -> None:
        rig = Rig(step="noop", store_interval_s=3600)
        rig.assigned.add(0)
        rig.loop.assign([TopicPartition("in", 0)])
        rig.consumer.batches = [[rig.msg(0)], [rig.msg(1)], [], [rig.msg(2)]]
        rounds = iter(range(4))
        rig.loop.run(lambda: next(rounds, None) is None, lambda: None)
        # batch 1 stored at once, batch 2 when the empty consume came, batch 3 at
        # the stop
        assert rig.consumer.stored == [[("in", 0, 1)], [("in", 0, 2)], [("in", 0, 3)]]

    def test_not_stored_past_a_batch_that_failed(self) -> None:
        rig = Rig(step="noop", store_interval_s=3600)
        rig.process([rig.msg(0)])
        rig.process([rig.msg(1)])  # handled, its store waits
        fatal = KafkaError(KafkaError._FATAL, fatal=True)
        rig.consumer.batches = [
            [rig.msg(2), FakeMessage(b"fatal", -1, -1001, _error=fatal)]
        ]
        with pytest.raises(FatalError):
            rig.loop.run(lambda: False, lambda: None)
        # The fatal batch moved the position to 3: nothing is stored past 1, and
        # message 1 is read again (at least once).
        assert rig.consumer.stored == [[("in", 0, 1)]]
