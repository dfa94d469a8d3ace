"""The load generator's Prometheus metrics and their HTTP endpoint.

| name | type | labels |
| --- | --- | --- |
| `loadgen_messages_sent_total` | counter | `codec` |
| `loadgen_messages_acked_total` | counter | `codec` |
| `loadgen_delivery_errors_total` | counter | `codec` |
| `loadgen_target_rate` | gauge, msg/s the schedule asks for now | `codec` |
| `loadgen_achieved_rate` | gauge, msg/s sent over the last full second | `codec` |
| `loadgen_ack_latency_seconds` | histogram, produce() call to delivery report | `codec` |
| `process_*` | prometheus_client's process collector | |

Performance note: nothing here runs per message. Counters move once per tick
(~100 ms) by the tick's deltas, and the latency histogram is a view over the run's
log histogram (`report.LogHistogram`), collapsed to `LATENCY_BUCKETS` only when
scraped; a bucket boundary is therefore exact to within one log bucket (1.1 %).
"""

from __future__ import annotations

from collections.abc import Iterator
from threading import Thread
from typing import Final
from wsgiref.simple_server import WSGIServer

import numpy as np
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    ProcessCollector,
    disable_created_metrics,
    start_http_server,
)
from prometheus_client.core import HistogramMetricFamily, Metric

from loadgen.report import N_BUCKETS, LogHistogram, upper_edge
from service.telemetry.histogram import LATENCY_BUCKETS, cumulative_buckets

ACK_LATENCY: Final = "loadgen_ack_latency_seconds"


class _AckLatencyCollector:
    """Exposes a `LogHistogram` as a Prometheus histogram with fixed buckets."""

    def __init__(self, hist: LogHistogram, codec: str) -> None:
        self._hist, self._codec = hist, codec
        edges = np.array([upper_edge(i) for i in range(N_BUCKETS)])
        # How many log buckets lie wholly below each Prometheus bound (the 1e-6
        # slack counts a log edge equal to a bound, up to float rounding, in it).
        cuts = np.searchsorted(edges, np.array(LATENCY_BUCKETS) * 1.000001)
        # The Prometheus bucket of each log bucket; len(LATENCY_BUCKETS): overflow.
        self._target = np.searchsorted(cuts, np.arange(N_BUCKETS), side="right")

    def describe(self) -> list[Metric]:
        return [HistogramMetricFamily(ACK_LATENCY, self._doc(), labels=["codec"])]

    @staticmethod
    def _doc() -> str:
        return "Produce acknowledgement latency: produce() call to delivery report."

    def collect(self) -> Iterator[Metric]:
        counts, total = self._hist.snapshot()
        collapsed = np.bincount(
            self._target, weights=counts, minlength=len(LATENCY_BUCKETS) + 1
        )
        buckets = cumulative_buckets(LATENCY_BUCKETS, collapsed.tolist())
        family = HistogramMetricFamily(ACK_LATENCY, self._doc(), labels=["codec"])
        family.add_metric([self._codec], buckets, total)
        yield family


class LoadgenMetrics:
    """Every loadgen metric, label children resolved once for `codec`.

    Args:
        registry: where to register (a fresh one per run).
        codec: the `codec` label value.
        ack_latency: the run's acknowledgement-latency histogram.
    """

    def __init__(
        self, registry: CollectorRegistry, codec: str, ack_latency: LogHistogram
    ) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # `*_created` series: noise
        self.registry = registry
        ProcessCollector(registry=registry)

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, ["codec"], registry=registry).labels(codec)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, ["codec"], registry=registry).labels(codec)

        self.sent = counter("loadgen_messages_sent", "Messages handed to produce().")
        self.acked = counter("loadgen_messages_acked", "Messages acknowledged.")
        self.errors = counter("loadgen_delivery_errors", "Messages that failed.")
        self.target_rate = gauge("loadgen_target_rate", "Scheduled rate, msg/s.")
        self.achieved_rate = gauge(
            "loadgen_achieved_rate", "Messages sent over the last full second."
        )
        registry.register(_AckLatencyCollector(ack_latency, codec))

    def update(
        self, sent: int, acked: int, failed: int, target: float, achieved: float
    ) -> None:
        """Apply one tick's deltas and the current rates."""
        for counter, delta in (
            (self.sent, sent),
            (self.acked, acked),
            (self.errors, failed),
        ):
            if delta:  # most ticks fail nothing: skip the counter's lock
                counter.inc(delta)
        self.target_rate.set(target)
        self.achieved_rate.set(achieved)


class MetricsServer:
    """`/metrics` on `host:port` in a daemon thread; `close()` stops it.

    Args:
        registry: what to expose.
        host: bind address (127.0.0.1 by default: the endpoint is unauthenticated).
        port: TCP port; 0 picks a free one (see `port`).

    Raises:
        ConfigError: it cannot listen there (port in use, foreign address).
    """

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self._server: WSGIServer
        self._thread: Thread
        try:
            self._server, self._thread = start_http_server(port, host, registry)
        except OSError as exc:
            # Imported here: the control plane's web server costs ~0.3 s to import,
            # paid only on this error path.
            from service.telemetry.control_server import bind_error

            raise bind_error(exc, host, port, "--metrics-host/--metrics-port") from None

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._server.server_port)

    def close(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
