"""Reading a worker's /metrics: the one parser, label sums, histogram deltas."""

from __future__ import annotations

import gc
import math

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from abrunner.lab import worker_probe
from abrunner.lab.case_figures import GC_COLLECTIONS, GC_SECONDS, figures
from abrunner.plan import Case, Profile
from service.telemetry.histogram import (
    LATENCY_BUCKETS,
    PER_MESSAGE_BUCKETS,
    HistogramChild,
    quantile,
)
from service.telemetry.metrics import Metrics


def exposition(latencies: list[float], ok: int = 0) -> tuple[str, Metrics]:
    registry = CollectorRegistry()
    metrics = Metrics(registry, codec="json+pydantic", schema="small")
    metrics.ok.inc(ok)
    metrics.decode_errors.inc(2)
    metrics.e2e_latency.observe_many(latencies)
    metrics.consumer_lag.labels("t", "0").set(5)
    metrics.consumer_lag.labels("t", "1").set(7)
    return generate_latest(registry).decode(), metrics


class TestMetrics:
    """Samples are summed by name over a label subset, and keyed as exposed."""

    def test_totals_and_flat_keys(self) -> None:
        text, _ = exposition([0.001], ok=40)
        scraped = worker_probe.parse(text)
        assert scraped.total("worker_messages_total") == 42
        assert scraped.total("worker_messages_total", outcome="ok") == 40
        assert scraped.total("worker_consumer_lag_messages") == 12
        flat = scraped.flat()
        assert flat['worker_messages_total{codec="json+pydantic",outcome="ok"}'] == 40
        assert flat['worker_e2e_latency_seconds_count{codec="json+pydantic"}'] == 1
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                assert flat[key] == float(value), key


class TestHistogram:
    """Deltas of scraped cumulative buckets give `service.telemetry.histogram.quantile`'s answer."""

    def test_delta_quantile(self) -> None:
        _, metrics = exposition([0.5] * 10)
        before = worker_probe.parse(generate_latest(metrics.registry).decode())
        window = [0.002] * 60 + [0.02] * 30
        metrics.e2e_latency.observe_many(window)
        after = worker_probe.parse(generate_latest(metrics.registry).decode())
        name = "worker_e2e_latency_seconds"
        delta = after.histogram(name).minus(before.histogram(name))
        expected = HistogramChild(LATENCY_BUCKETS)
        expected.observe_many(window)
        counts, _ = expected.snapshot()
        assert delta.count == 90
        assert delta.mean() == pytest.approx(sum(window) / 90)
        for q in (0.5, 0.99):
            want = quantile(LATENCY_BUCKETS, counts, q)
            assert delta.quantile(q) == pytest.approx(want)
        assert (
            0.0015 < (delta.quantile(0.5) or 0) <= 0.0026 < (delta.quantile(0.99) or 0)
        )

    def test_overflow_and_empty(self) -> None:
        top = LATENCY_BUCKETS[-1]
        scraped = worker_probe.parse(exposition([top * 2])[0])
        assert scraped.histogram("worker_e2e_latency_seconds").quantile(0.5) == math.inf
        assert worker_probe.Histogram().quantile(0.5) is None
        assert scraped.histogram("no_such_histogram").mean() is None


def gc_lines(collections: list[int], seconds: list[float]) -> str:
    """GC counters as the worker exposes them: one sample per generation."""
    lines = ["# TYPE worker_gc_collections counter"]
    lines += [
        f'worker_gc_collections_total{{codec="c",generation="{g}"}} {n}'
        for g, n in enumerate(collections)
    ]
    lines.append("# TYPE worker_gc_seconds counter")
    lines += [
        f'worker_gc_seconds_total{{codec="c",generation="{g}"}} {t}'
        for g, t in enumerate(seconds)
    ]
    return "\n".join(lines) + "\n"


class TestGcCounters:
    """The worker's GC counters are read by name and summed over generations."""

    def test_names_match_the_worker(self) -> None:
        registry = CollectorRegistry()
        metrics = Metrics(registry, codec="protobuf", schema="small")
        uninstall = metrics.gc.install()
        try:
            gc.collect(2)
        finally:
            uninstall()
        scraped = worker_probe.parse(generate_latest(registry).decode())
        assert scraped.has(GC_COLLECTIONS) and scraped.has(GC_SECONDS)
        assert scraped.total(GC_COLLECTIONS, generation="2") >= 1
        assert scraped.total(GC_COLLECTIONS) >= scraped.total(
            GC_COLLECTIONS, generation="2"
        )

    def test_summed_over_generations(self) -> None:
        scraped = worker_probe.parse(gc_lines([10, 3, 1], [0.25, 0.5, 1.0]))
        assert scraped.total(GC_COLLECTIONS) == 14
        assert scraped.total(GC_SECONDS) == 1.75
        assert not worker_probe.parse("").has(GC_COLLECTIONS)


def snapshot(
    at: float,
    processed: int,
    decodes: list[float],
    gc_text: str = "",
    *,
    dead: int = 0,
    ok_bytes: int = 0,
) -> worker_probe.Snapshot:
    """The worker's state: `processed` messages handled, `dead` of them dead-lettered
    (decode errors), `ok_bytes` the payload bytes of the others."""
    registry = CollectorRegistry()
    metrics = Metrics(registry, codec="c", schema="small")
    metrics.ok.inc(processed - dead)
    metrics.decode_errors.inc(dead)
    metrics.dead_letters("decode").inc(dead)
    metrics.bytes.inc(ok_bytes)
    metrics.decode_seconds.observe_many(decodes)
    # The registry's own GC counters would count this test process: replaced.
    own = generate_latest(registry).decode().splitlines(keepends=True)
    text = "".join(line for line in own if "worker_gc_" not in line) + gc_text
    return worker_probe.Snapshot(
        at, cpu_s=at / 10, rss=50 << 20, metrics=worker_probe.parse(text)
    )


class TestFigures:
    """A case's GC and decode figures come from the deltas between snapshots."""

    CASE = Case("c", Profile("small"), 0)

    def test_gc_and_decode_median(self) -> None:
        before = [4e-6] * 50
        window = [2e-6] * 70 + [30e-6] * 30
        s0 = snapshot(100.0, 1000, before, gc_lines([5, 1, 0], [0.01, 0.0, 0.0]))
        # The load window (s0-s1) lasts 10 s, the drain ends 2 s later.
        s1 = snapshot(
            110.0, 20_000, before + window, gc_lines([30, 4, 1], [0.04, 0.02, 0.01])
        )
        s2 = snapshot(
            112.0, 21_000, before + window, gc_lines([35, 4, 1], [0.05, 0.02, 0.01])
        )
        result = figures(self.CASE, s0, s1, s2, [], [])
        gc_seconds = (0.04 + 0.02 + 0.01) - 0.01
        assert result.gc_ms_per_s == pytest.approx(1e3 * gc_seconds / 10)
        collections = (35 + 4 + 1) - (5 + 1 + 0)
        assert result.gc_per_1k_msgs == pytest.approx(1e3 * collections / 20_000)
        expected = HistogramChild(PER_MESSAGE_BUCKETS)
        expected.observe_many(window)
        counts, _ = expected.snapshot()
        p50 = quantile(PER_MESSAGE_BUCKETS, counts, 0.5)
        assert result.decode_p50_us == pytest.approx(1e6 * (p50 or 0))
        assert result.decode_us == pytest.approx(1e6 * sum(window) / 100)
        assert (result.decode_p50_us or 0) < (result.decode_us or 0)  # skewed window

    def test_no_gc_counters_no_figure(self) -> None:
        s0, s1 = snapshot(0.0, 0, []), snapshot(10.0, 100, [])
        result = figures(self.CASE, s0, s1, s1, [], [])
        assert result.gc_ms_per_s is None and result.gc_per_1k_msgs is None
        assert result.decode_p50_us is None


class TestCounts:
    """The DLQ figure counts the messages `processed` counts (the measured run, the
    warm-up left out), and the wire size is the bytes sent, not those accepted."""

    CASE = Case("msgspec-json", Profile("small"), 0)

    def test_the_warm_ups_dead_letters_are_left_out_and_named(self) -> None:
        # Warm-up: 2,000 handled, 250 dead-lettered. Measured run: 6,000 handled
        # (23 of them before the first snapshot of the window), 300 dead-lettered.
        warm = snapshot(10.0, 2_000, [], dead=250)
        s0 = snapshot(11.0, 2_023, [], dead=251)
        s1 = snapshot(41.0, 7_900, [], dead=540)
        s2 = snapshot(42.0, 8_000, [], dead=550)
        result = figures(self.CASE, s0, s1, s2, [], [], start=warm)
        assert result.processed == 6_000
        assert result.dead_lettered == 300
        assert result.warmup_dead_lettered == 250
        assert 1e6 * (s2.cpu_s - s0.cpu_s) / (8_000 - 2_023) == pytest.approx(
            result.cpu_us_per_msg
        )  # the CPU per message keeps its own window

    def test_max_mode_counts_the_whole_backlog(self) -> None:
        s0 = snapshot(1.0, 500, [], dead=50)
        s1 = snapshot(5.0, 10_000, [], dead=1_000)
        result = figures(self.CASE, s0, s1, s1, [], [])
        assert (result.processed, result.dead_lettered) == (10_000, 1_000)
        assert result.warmup_dead_lettered is None

    def test_the_wire_size_is_the_bytes_sent(self) -> None:
        # 1,000 messages of 798 B sent; 100 dead-lettered were the shortest
        # (753 B), so the 900 accepted average 803 B: the worker's bytes say 803.
        s0 = snapshot(0.0, 0, [])
        s2 = snapshot(10.0, 1_000, [], dead=100, ok_bytes=900 * 803)
        result = figures(self.CASE, s0, s2, s2, [], [], wire_bytes=798.0)
        assert result.wire_bytes == 798.0
        assert figures(self.CASE, s0, s2, s2, [], []).wire_bytes is None
