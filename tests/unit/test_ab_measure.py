"""Reading a worker's /metrics: the one parser, label sums, histogram deltas."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from abrunner import measure
from service.histogram import LATENCY_BUCKETS, HistogramChild, quantile
from service.metrics import Metrics


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
        scraped = measure.parse(text)
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
    """Deltas of scraped cumulative buckets give `service.histogram.quantile`'s answer."""

    def test_delta_quantile(self) -> None:
        _, metrics = exposition([0.5] * 10)
        before = measure.parse(generate_latest(metrics.registry).decode())
        window = [0.002] * 60 + [0.02] * 30
        metrics.e2e_latency.observe_many(window)
        after = measure.parse(generate_latest(metrics.registry).decode())
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
        scraped = measure.parse(exposition([top * 2])[0])
        assert scraped.histogram("worker_e2e_latency_seconds").quantile(0.5) == math.inf
        assert measure.Histogram().quantile(0.5) is None
        assert scraped.histogram("no_such_histogram").mean() is None
