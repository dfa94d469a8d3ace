"""Tick aggregation, percentiles, the summary and the Prometheus metrics."""

from __future__ import annotations

import io
import json
import random
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from loadgen.metrics import LoadgenMetrics, MetricsServer
from loadgen.report import (
    Aggregator,
    LogHistogram,
    ProgressDisplay,
    Tick,
    bucketize,
    render_table,
    to_json,
)

META = {"run_id": "r1", "topic": "t", "codec": "protobuf", "profile": "small"}
META |= {"pattern": "constant"}
NAMES = {
    "loadgen_messages_sent_total",
    "loadgen_messages_acked_total",
    "loadgen_delivery_errors_total",
    "loadgen_target_rate",
    "loadgen_achieved_rate",
    "loadgen_ack_latency_seconds_bucket",
    "loadgen_ack_latency_seconds_sum",
    "loadgen_ack_latency_seconds_count",
    "process_cpu_seconds_total",
}


def hist_of(values: list[float]) -> LogHistogram:
    hist = LogHistogram()
    idx, cnt = bucketize(values)
    hist.add(idx, cnt, sum(values), max(values))
    return hist


class TestLogHistogram:
    """Percentiles within one bucket (1.1 %) of the exact ones."""

    def test_quantiles_match_the_sorted_values(self) -> None:
        rng = random.Random(4)
        values = [rng.lognormvariate(-6, 1.2) for _ in range(20_000)]
        hist = hist_of(values)
        ordered = sorted(values)
        for q in (0.5, 0.99, 0.999):
            exact = ordered[int(q * len(ordered)) - 1]
            assert hist.quantile(q) == pytest.approx(exact, rel=0.025)
        assert hist.quantile(1.0) == max(values)

    def test_empty_and_out_of_range(self) -> None:
        assert LogHistogram().quantile(0.5) is None
        hist = hist_of([0.0, 1e-9, 5e3])
        assert hist.quantile(0.1) == pytest.approx(1e-6, rel=0.02)
        assert hist.quantile(1.0) == 5e3

    def test_weights(self) -> None:
        _, cnt = bucketize([0.001, 0.1], [3, 1])
        assert sum(cnt) == 4


class TestAggregator:
    """Ticks from several processes add up to one summary."""

    def test_two_processes(self) -> None:
        agg = Aggregator(2, 2.0, 4000)
        for shard in (0, 1):
            idx, cnt = bucketize([0.002] * 1000)
            agg.merge(
                Tick(
                    shard=shard,
                    elapsed_s=2.0,
                    sent=2000,
                    acked=1999,
                    failed=1,
                    value_bytes=200_000,
                    last_send_s=1.9995,
                    per_second={0: 1000, 1: 1000},
                    ack_idx=idx,
                    ack_cnt=cnt,
                    ack_sum=2.0,
                    ack_max=0.002,
                    errors={"_MSG_TIMED_OUT": 1},
                    done=True,
                )
            )
        assert agg.done
        s = agg.summary(META, interrupted=False)
        assert (s.sent, s.acked, s.failed) == (4000, 3998, 2)
        assert s.errors == {"_MSG_TIMED_OUT": 2}
        assert s.target_rate == 2000
        assert s.achieved_rate == 2000
        assert s.rate_error_pct == 0
        assert s.per_second == [2000, 2000]
        assert (s.per_second_min, s.per_second_max) == (2000, 2000)
        assert s.bytes_per_message == 100
        assert s.ack_latency.p50_ms == pytest.approx(2.0, rel=0.02)
        assert s.exit_code == 1
        assert s.processes == 2

    def test_a_late_run_stretches_the_window(self) -> None:
        agg = Aggregator(1, 10.0, 1000)
        agg.merge(Tick(shard=0, sent=1000, last_send_s=12.5, done=True))
        s = agg.summary(META, interrupted=False)
        assert s.achieved_rate == 80
        assert s.rate_error_pct == -20

    def test_unthrottled(self) -> None:
        agg = Aggregator(1, 0.0, None)
        agg.merge(Tick(shard=0, sent=500, acked=500, last_send_s=0.25, done=True))
        s = agg.summary(META, interrupted=False)
        assert (s.target_rate, s.achieved_rate, s.rate_error_pct) == (0, 2000, None)
        assert s.exit_code == 0

    def test_progress(self) -> None:
        agg = Aggregator(1, 5.0, 500)
        per_second = {0: 100, 1: 110}
        agg.merge(
            Tick(0, 2.2, sent=210, due=220, target_rate=100, per_second=per_second)
        )
        p = agg.progress()
        assert (p.sent, p.due, p.target_rate, p.last_second_rate) == (
            210,
            220,
            100,
            110,
        )


class TestOutput:
    """--json prints one object; the table names every figure."""

    def test_json_and_table(self) -> None:
        agg = Aggregator(1, 1.0, 100)
        agg.merge(Tick(shard=0, sent=100, acked=100, last_send_s=0.99, done=True))
        summary = agg.summary(META, interrupted=False)
        line = to_json(summary)
        assert "\n" not in line
        data = json.loads(line)
        assert data["achieved_rate"] == 100
        assert data["ack_latency"]["basis"] == "produce() call to delivery report"
        table = render_table(summary)
        for word in ("target rate", "achieved rate", "per second", "p99.9", "acked"):
            assert word in table

    def test_progress_is_quiet_off_a_terminal(self) -> None:
        stream = io.StringIO()
        with ProgressDisplay("auto", stream) as display:
            agg = Aggregator(1, 1.0, 10)
            display.update(agg.progress())
        assert stream.getvalue() == ""


class TestMetrics:
    """Exactly the names the dashboards query, updated per tick."""

    def test_names_and_values(self) -> None:
        registry = CollectorRegistry()
        hist = hist_of([0.001] * 10 + [0.5])
        metrics = LoadgenMetrics(registry, "protobuf", hist)
        metrics.update(sent=11, acked=10, failed=1, target=100.0, achieved=99.0)
        text = generate_latest(registry).decode()
        names = {
            line.split("{")[0].split(" ")[0]
            for line in text.splitlines()
            if line and not line.startswith("#")
        }
        assert names >= NAMES
        get = registry.get_sample_value
        labels = {"codec": "protobuf"}
        assert get("loadgen_messages_sent_total", labels) == 11
        assert get("loadgen_messages_acked_total", labels) == 10
        assert get("loadgen_delivery_errors_total", labels) == 1
        assert get("loadgen_target_rate", labels) == 100
        assert get("loadgen_achieved_rate", labels) == 99
        assert get("loadgen_ack_latency_seconds_count", labels) == 11
        inf = get("loadgen_ack_latency_seconds_bucket", labels | {"le": "+Inf"})
        assert inf == 11
        below = get("loadgen_ack_latency_seconds_bucket", labels | {"le": "0.0102"})
        assert below == 10

    def test_server_binds_and_closes(self) -> None:
        registry = CollectorRegistry()
        LoadgenMetrics(registry, "c", LogHistogram())
        server = MetricsServer(registry, "127.0.0.1", 0)
        try:
            url = f"http://127.0.0.1:{server.port}/metrics"
            with urllib.request.urlopen(url, timeout=5) as resp:
                assert b"loadgen_target_rate" in resp.read()
        finally:
            server.close()
