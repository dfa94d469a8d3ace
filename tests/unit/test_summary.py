"""The worker's summary line: dead letters per reason, an honest end-to-end p99."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import orjson
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from service.telemetry.histogram import LATENCY_BUCKETS, quantile
from service.telemetry.metrics import Metrics
from service.telemetry.summary_line import Summary


class Rig:
    """A summary over fresh metrics, logged on demand."""

    def __init__(self) -> None:
        self.metrics = Metrics(CollectorRegistry(), codec="c", schema="medium")
        self.summary = Summary(self.metrics)

    def line(self) -> MutableMapping[str, Any]:
        with capture_logs() as logs:
            self.summary.log(0)
        [line] = logs
        return line


class TestDeadLetters:
    """The line carries the interval's dead letters by reason, not running totals."""

    def test_each_interval_counts_its_own(self) -> None:
        rig = Rig()
        rig.metrics.dead_letters("decode").inc(12)
        rig.metrics.dead_letters("logic").inc(1)
        first = rig.line()
        rig.metrics.dead_letters("decode").inc(3)
        second = rig.line()
        assert first["dead_letters"] == {"decode": 12, "logic": 1}
        assert second["dead_letters"] == {"decode": 3}

    def test_a_quiet_interval_has_an_empty_map(self) -> None:
        assert Rig().line()["dead_letters"] == {}


class TestP99:
    """`e2e_p99_ms`: null with no samples, a marker above the top bucket."""

    def test_no_samples_is_null_not_zero(self) -> None:
        assert Rig().line()["e2e_p99_ms"] is None

    def test_samples_give_milliseconds(self) -> None:
        rig = Rig()
        rig.metrics.e2e_latency.observe_many([0.004] * 50 + [0.020] * 50)
        counts, _ = rig.metrics.e2e_latency.snapshot()
        expected = quantile(LATENCY_BUCKETS, counts, 0.99)
        assert expected is not None
        assert rig.line()["e2e_p99_ms"] == round(expected * 1000, 3)

    def test_above_the_top_bucket_is_a_marker_not_a_number(self) -> None:
        rig = Rig()
        beyond = LATENCY_BUCKETS[-1] * 2
        rig.metrics.e2e_latency.observe_many([0.004] * 98 + [beyond] * 2)
        p99 = rig.line()["e2e_p99_ms"]
        assert p99 == f"> {LATENCY_BUCKETS[-1] / 3600:.2g} h"
        # orjson writes an infinite float as null: the marker must stay a string.
        assert orjson.loads(orjson.dumps({"p": p99})) == {"p": p99}

    def test_only_the_interval_counts(self) -> None:
        rig = Rig()
        rig.metrics.e2e_latency.observe_many([LATENCY_BUCKETS[-1] * 2])
        rig.line()
        assert rig.line()["e2e_p99_ms"] is None
