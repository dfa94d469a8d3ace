"""Per-batch histograms and the stub business logic."""

from __future__ import annotations

import itertools
from bisect import bisect_right
from collections import Counter
from time import thread_time

import pytest
from hypothesis import given, settings, strategies as st
from prometheus_client import CollectorRegistry, generate_latest

from codec import REAL_CODECS, CodecName, get_codec
from loadgen.payloads import make_payloads
from schemas.errors import LogicError
from service.logic.builtin import Handler
from service.telemetry.histogram import (
    LATENCY_BUCKETS,
    AgeHistogramChild,
    BatchHistogram,
    HistogramChild,
    log_buckets,
)
from service.telemetry.metrics import Metrics

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
_EDGES_NS = [round(b * 1e9) for b in LATENCY_BUCKETS]


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

    def test_ages_in_ns_bucket_as_seconds_would(self) -> None:
        """Raw ages folded in bulk give the counts and sum of observing each."""
        ages_s = [0.0, 9e-6, 1e-5, 0.0042, 0.5, 1.0, 7.3, 3600.0, 25 * 3600.0]
        ages_ns = [round(a * 1e9) for a in ages_s]
        child = AgeHistogramChild(LATENCY_BUCKETS, max_ns=30 * 86_400 * 10**9)
        child.add_ages(ages_ns[:4])
        child.add_ages(ages_ns[4:])
        reference = HistogramChild(LATENCY_BUCKETS)
        reference.observe_many(ages_s)
        counts, total = child.snapshot()
        assert counts == reference.counts
        assert total == pytest.approx(sum(ages_s))

    def test_ages_that_cannot_be_latencies_are_counted_apart(self) -> None:
        oldest = 30 * 86_400 * 10**9
        child = AgeHistogramChild(LATENCY_BUCKETS, max_ns=oldest)
        child.add_ages([-5, 10**6, oldest, oldest + 1, -(10**9)], unparsable=2)
        counts, total, invalid = child.state()
        assert invalid == {"unparsable": 2, "negative": 2, "too_large": 1}
        assert sum(counts) == 2  # 1 ms and exactly the oldest allowed
        assert counts[-1] == 1  # that one above the top bucket
        assert total == pytest.approx(1e-3 + oldest * 1e-9)

    @settings(max_examples=300, deadline=None)
    @given(
        st.lists(
            st.one_of(
                st.integers(-(10**12), 10**15),  # negative to past the oldest allowed
                st.sampled_from(_EDGES_NS),  # exactly on a bucket's bound
                st.sampled_from(_EDGES_NS).map(lambda e: e - 1),
                st.sampled_from(_EDGES_NS).map(lambda e: e + 1),
            ),
            max_size=300,
        ),
        st.integers(1, 4),
    )
    def test_ages_fold_as_each_age_bisected(self, ages: list[int], reads: int) -> None:
        """The sorting fold puts each age where `bisect_right` over the bounds
        would, in however many reads, and sums exactly the valid ones."""
        oldest = 10**14
        child = AgeHistogramChild(LATENCY_BUCKETS, max_ns=oldest)
        step = -(-len(ages) // reads) or 1
        for i in range(0, len(ages), step):
            child.add_ages(ages[i : i + step])
            child.snapshot()
        counts, total, invalid = child.state()
        edges = [0, *_EDGES_NS, oldest + 1]
        places = Counter(bisect_right(edges, a) for a in ages)
        assert counts == [places[j] for j in range(1, len(LATENCY_BUCKETS) + 2)]
        assert invalid["negative"] == places[0]
        assert invalid["too_large"] == places[len(LATENCY_BUCKETS) + 2]
        valid = [a for a in ages if 0 <= a <= oldest]
        assert total == pytest.approx(sum(valid) * 1e-9, rel=1e-9, abs=1e-12)

    def test_ages_fold_without_a_read_when_many_wait(self) -> None:
        child = AgeHistogramChild(LATENCY_BUCKETS, max_ns=10**15)
        child.add_ages([10**6] * (AgeHistogramChild.FOLD_AT - 1))
        assert sum(child.counts) == 0  # bucketed when read, not per batch
        child.add_ages([10**6])
        assert sum(child.counts) == AgeHistogramChild.FOLD_AT  # memory is bounded

    def test_int_counters_and_ages_are_exposed(self) -> None:
        registry = CollectorRegistry()
        metrics = Metrics(registry, codec="protobuf", schema="small")
        metrics.ok.inc(3)
        metrics.bytes.inc(1000)
        metrics.e2e_latency.add_ages([2_000_000, -1], unparsable=1)
        get = registry.get_sample_value
        codec = {"codec": "protobuf"}
        assert get("worker_messages_total", {**codec, "outcome": "ok"}) == 3
        assert get("worker_messages_total", {**codec, "outcome": "decode_error"}) == 0
        assert get("worker_bytes_total", codec) == 1000
        assert get("worker_e2e_latency_seconds_count", codec) == 1
        assert get("worker_e2e_latency_seconds_sum", codec) == pytest.approx(0.002)
        for reason, n in (("unparsable", 1), ("negative", 1), ("too_large", 0)):
            labels = {**codec, "reason": reason}
            assert get("worker_e2e_latency_invalid_total", labels) == n

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
        # 4 messages x 50 ms = 200 ms of busy loop, to a deadline in the thread's
        # CPU time: however often a busy 2-core machine preempts it, all of it.
        burned = handler_cpu_seconds(Handler("large", "noop", work_us=50_000), batch)
        bare = handler_cpu_seconds(Handler("large", "noop"), batch)
        assert burned - bare >= 0.2, (burned, bare)
        assert bare < 0.01


class TestDeadLetterSeries:
    """Every dead-letter reason series exists at 0 before the first poison message."""

    def test_reasons_exist_at_zero(self) -> None:
        from service.telemetry.metrics import DEAD_LETTER_REASONS

        registry = CollectorRegistry()
        Metrics(registry, codec="protobuf", schema="small")
        for reason in DEAD_LETTER_REASONS:
            labels = {"codec": "protobuf", "reason": reason}
            assert registry.get_sample_value("worker_dead_letters_total", labels) == 0
