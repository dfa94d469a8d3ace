"""Per-batch histograms and the stub business logic."""

from __future__ import annotations

import itertools
from time import thread_time

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from codec import REAL_CODECS, CodecName, get_codec
from loadgen.payloads import make_payloads
from schemas.errors import LogicError
from service.handlers import Handler
from service.histogram import LATENCY_BUCKETS, BatchHistogram, log_buckets
from service.metrics import Metrics

DESIGN_METRICS = (
    "worker_messages_total",
    "worker_bytes_total",
    "worker_decode_seconds",
    "worker_handle_seconds",
    "worker_e2e_latency_seconds",
    "worker_batch_messages",
    "worker_info",
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
)
"""The metric names DESIGN.md promises on `/metrics`."""


class TestBatchHistogram:
    """A histogram fed per batch exposes what per-message observes would."""

    def test_observe_n_and_many(self) -> None:
        registry = CollectorRegistry()
        child = BatchHistogram(
            "h_seconds", "doc", (0.1, 1.0), ["codec"], registry
        ).labels("c")
        child.observe_n(0.05, 3)
        child.observe_many([0.5, 2.0])
        get = registry.get_sample_value
        assert get("h_seconds_bucket", {"codec": "c", "le": "0.1"}) == 3
        assert get("h_seconds_bucket", {"codec": "c", "le": "1.0"}) == 4
        assert get("h_seconds_bucket", {"codec": "c", "le": "+Inf"}) == 5
        assert get("h_seconds_count", {"codec": "c"}) == 5
        assert get("h_seconds_sum", {"codec": "c"}) == pytest.approx(2.65)

    def test_log_buckets_resolve_tens_of_microseconds_to_seconds(self) -> None:
        assert LATENCY_BUCKETS[0] == 1e-5 and LATENCY_BUCKETS[-1] >= 60
        ratios = {round(b / a, 2) for a, b in itertools.pairwise(LATENCY_BUCKETS)}
        assert max(ratios) <= 1.3
        assert log_buckets(1.0, 8.0, 1) == (1.0, 2.0, 4.0, 8.0)

    def test_exposition_has_the_design_names(self) -> None:
        registry = CollectorRegistry()
        Metrics(registry, codec="protobuf", schema="small")
        text = generate_latest(registry).decode()
        for name in DESIGN_METRICS:
            assert f"# TYPE {name.removesuffix('_total')}" in text, name
        assert 'worker_info{codec="protobuf",schema="small"' in text
        assert "_created" not in text


class TestHandler:
    """The logic reads fields by attribute on every codec's native type."""

    @pytest.mark.parametrize("name", REAL_CODECS)
    def test_same_totals_on_every_codec(self, name: CodecName) -> None:
        reference = Handler("medium", "aggregate")
        handler = Handler("medium", "aggregate")
        codec, ref_codec = (
            get_codec(name, "medium"),
            get_codec("msgspec-json", "medium"),
        )
        payloads = make_payloads("medium", 30, seed=5)
        assert handler.step is not None and reference.step is not None
        for p in payloads:
            handler.step(codec.from_builtins(p))
            reference.step(ref_codec.from_builtins(p))
        assert handler.totals == pytest.approx(reference.totals)
        assert handler.totals

    def test_a_broken_invariant_raises_logic_error(self) -> None:
        codec = get_codec("msgspec-msgpack", "small")
        good, bad = make_payloads("small", 2)
        step = Handler("small", "aggregate").step
        assert step is not None
        step(codec.from_builtins(good))
        with pytest.raises(LogicError, match="without tags or metrics"):
            step(codec.from_builtins(dict(bad, tags=[], metrics=[])))

    def test_noop_has_no_step_and_work_alone_has_one(self) -> None:
        assert Handler("large", "noop").step is None
        work = Handler("large", "noop", work_us=5).step
        assert work is not None and work(object()) is None


def handler_cpu_seconds(handler: Handler, batch: list[object]) -> float:
    """This thread's CPU time for running `handler` over `batch`."""
    start = thread_time()
    for obj in batch:
        if handler.step is not None:
            handler.step(obj)
    return thread_time() - start


class TestWork:
    """`work_us` burns that much CPU per message, not merely wall time."""

    def test_work_us_burns_cpu(self) -> None:
        batch = [object()] * 4
        # 4 messages x 50 ms = 200 ms of busy loop. The loop runs to a wall-clock
        # deadline, so a thread preempted on a busy 2-core machine burns less: ask
        # for a quarter (50 ms) against the microseconds a bare noop batch costs.
        burned = handler_cpu_seconds(Handler("large", "noop", work_us=50_000), batch)
        bare = handler_cpu_seconds(Handler("large", "noop"), batch)
        assert burned - bare >= 0.05, (burned, bare)
        assert bare < 0.01


class TestDeadLetterSeries:
    """Every dead-letter reason series exists at 0 before the first poison message."""

    def test_reasons_exist_at_zero(self) -> None:
        from service.metrics import DEAD_LETTER_REASONS

        registry = CollectorRegistry()
        Metrics(registry, codec="protobuf", schema="small")
        for reason in DEAD_LETTER_REASONS:
            labels = {"codec": "protobuf", "reason": reason}
            assert registry.get_sample_value("worker_dead_letters_total", labels) == 0
