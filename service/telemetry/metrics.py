"""Every metric the worker exports, built against an injected registry.

Performance note: a prometheus_client `observe()` costs about 1.2 us and `inc()` about
0.9 us here, against ~6 us for a bare msgspec consume+decode, so nothing here is
called per message, and the loop's own counters and histograms are not
prometheus_client's. At 2,000 msg/s a 5 ms consume returns ~10 messages, so what a
batch costs is paid ~200 times a second whatever the rate: the loop's counters are
plain ints read at scrape time (`IntCounter`: one attribute add, no lock; only the
loop's thread adds to them), its histograms are fed per batch through
`BatchHistogram`, whose children take many observations at once under one lock,
and end-to-end latencies go in as raw ages, bucketed in bulk when read
(`AgeHistogramChild`). Label children are resolved up front.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from time import perf_counter
from typing import Final

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric

from service import __version__
from service.telemetry.batch_counters import IntCounter
from service.telemetry.histogram import (
    LATENCY_BUCKETS,
    PER_MESSAGE_BUCKETS,
    AgeHistogramChild,
    BatchHistogram,
    cumulative_buckets,
)

DEAD_LETTER_REASONS: Final = (
    "decode",
    "empty",
    "oversize",
    "content_type",
    "logic",
    "encode",
    "budget",
)
"""The bounded set of `worker_dead_letters_total` reasons (never payload-derived)."""

E2E_INVALID_REASONS: Final = ("unparsable", "negative", "too_large")
"""Why a sampled message's end-to-end latency was not observed (see
`worker_e2e_latency_invalid_total`): its `x-sent-ns` is not a positive decimal
integer; it lies after the worker's clock (producer clock skew); or it is more than
`MAX_E2E_LATENCY_S` old (a stamp in s, ms or us, not ns)."""

MAX_E2E_LATENCY_S: Final = 30 * 24 * 3600.0
"""The oldest send time taken for a latency: 30 days. A stamp in seconds,
milliseconds or microseconds instead of nanoseconds reads as ~1970, decades old."""

BATCH_BUCKETS: Final = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)


class Metrics:
    """The worker's metrics (names in DESIGN.md); label children per codec cached."""

    def __init__(self, registry: CollectorRegistry, *, codec: str, schema: str):
        disable_created_metrics()  # type: ignore[no-untyped-call]  # `*_created` series: noise for every dashboard
        self.registry = registry
        ProcessCollector(registry=registry)
        messages = IntCounter(
            "worker_messages",
            "Messages handled, by outcome.",
            ["codec", "outcome"],
            registry,
        )
        self.ok = messages.labels(codec, "ok")
        self.decode_errors = messages.labels(codec, "decode_error")
        self.logic_errors = messages.labels(codec, "logic_error")
        self.bytes = IntCounter(
            "worker_bytes", "Payload bytes consumed.", ["codec"], registry
        ).labels(codec)
        self.decode_seconds = BatchHistogram(
            "worker_decode_seconds",
            "Wall time of single decodes (every 32nd message is timed), less the "
            "clock's own cost (worker_timer_overhead_seconds).",
            PER_MESSAGE_BUCKETS,
            ["codec"],
            registry,
        ).labels(codec)
        self.handle_seconds = BatchHistogram(
            "worker_handle_seconds",
            "Wall time of the business logic of single messages (those decode-timed; "
            "an async handler: every message, its awaits included), "
            "less the clock's own cost.",
            PER_MESSAGE_BUCKETS,
            ["codec"],
            registry,
        ).labels(codec)
        self.handle_cpu_seconds = BatchHistogram(
            "worker_handle_cpu_seconds",
            "An async handler's CPU time per message: its own steps only, not the "
            "time it waited for its awaits (every 32nd message is timed).",
            PER_MESSAGE_BUCKETS,
            ["codec"],
            registry,
        ).labels(codec)
        self.async_pauses = Counter(
            "worker_async_pauses",
            "Times an async handler's messages in flight held max_in_flight for a "
            "second and the partitions were paused.",
            registry=registry,
        )
        self.e2e_latency = _E2ELatency(registry, codec).child
        """Fed raw ages in ns (`add_ages`); also exported, by reason, are the
        sampled messages whose latency was not observed."""
        self.timer_overhead = Gauge(
            "worker_timer_overhead_seconds",
            "What two perf_counter_ns readings add to an interval, measured at "
            "start-up; subtracted from each decode and handle sample.",
            registry=registry,
        )
        self.batch_messages = BatchHistogram(
            "worker_batch_messages",
            "Messages per consumed batch.",
            tuple(map(float, BATCH_BUCKETS)),  # le="1.0", as prometheus_client wrote
            [],
            registry,
        ).labels()
        self.consumer_lag = Gauge(
            "worker_consumer_lag_messages",
            "High watermark minus the next offset to process, per partition.",
            ["topic", "partition"],
            registry=registry,
        )
        self.group_lag = Gauge(
            "worker_group_lag_messages",
            "Log end minus the group's committed offset, per partition of the input "
            "topic, as this worker reads it from the broker (every partition, held "
            "by this worker or not).",
            ["topic", "partition"],
            registry=registry,
        )
        self._dead_letters = Counter(
            "worker_dead_letters",
            "Messages written to the dead-letter topic, by reason.",
            ["codec", "reason"],
            registry=registry,
        )
        self.consumer_errors = Counter(
            "worker_consumer_errors",
            "Errors reported by the consumer (not per-message poison).",
            ["code"],
            registry=registry,
        )
        self.assigned_partitions = Gauge(
            "worker_assigned_partitions",
            "Partitions currently assigned to this worker.",
            registry=registry,
        )
        self.values_dropped = Counter(
            "worker_dead_letter_values_dropped",
            "Dead letters written without their value: too large for the DLQ "
            "producer or topic (x-dlq-value-sha256 identifies it).",
            registry=registry,
        )
        self.logic_retries = Counter(
            "worker_logic_retries",
            "Logic attempts after a message's first (the retry budget).",
            registry=registry,
        )
        self.delivery_failures = Counter(
            "worker_delivery_failures",
            "Batches whose dead letters or output were not acknowledged: their "
            "partitions were rewound and paused, and retried.",
            registry=registry,
        )
        self.registry_waits = Counter(
            "worker_registry_waits",
            "Times the schema registry could not give a message's schema (down, "
            "refusing this client): the message's partition was paused and retried, "
            "the message not dead-lettered.",
            registry=registry,
        )
        self.degraded = Gauge(
            "worker_degraded",
            "1 while partitions are paused for a failed write or an unusable schema "
            "registry (see /readyz).",
            registry=registry,
        )
        info = Gauge(
            "worker_info",
            "Constant 1, labelled with the worker's codec, schema and version.",
            ["codec", "schema", "version"],
            registry=registry,
        )
        info.labels(codec, schema, __version__).set(1)
        self.gc = GcMetrics(registry, codec)
        self._codec = codec
        # Every reason exists from the start at 0, so `increase()` sees the first one.
        for reason in DEAD_LETTER_REASONS:
            self.dead_letters(reason)

    def dead_letters(self, reason: str) -> Counter:
        """The dead-letter counter child for `reason` (a small, bounded set)."""
        return self._dead_letters.labels(self._codec, reason)


class _E2ELatency:
    """`worker_e2e_latency_seconds` and `worker_e2e_latency_invalid_total` of one
    codec, both read from one `AgeHistogramChild` in one consistent copy."""

    _HELP = "From x-sent-ns (else the Kafka timestamp) to processed, per message."
    _INVALID_HELP = (
        "Sampled messages whose latency was not observed, by reason: x-sent-ns "
        "unparsable, negative (sent after now: clock skew) or too_large."
    )

    def __init__(self, registry: CollectorRegistry, codec: str) -> None:
        self._codec = codec
        self.child = AgeHistogramChild(LATENCY_BUCKETS, int(MAX_E2E_LATENCY_S * 1e9))
        registry.register(self)

    def describe(self) -> list[Metric]:
        return [
            HistogramMetricFamily(
                "worker_e2e_latency_seconds", self._HELP, labels=["codec"]
            ),
            CounterMetricFamily("worker_e2e_latency_invalid", self._INVALID_HELP),
        ]

    def collect(self) -> Iterator[Metric]:
        counts, total, invalid = self.child.state()
        family = HistogramMetricFamily(
            "worker_e2e_latency_seconds", self._HELP, labels=["codec"]
        )
        family.add_metric(
            [self._codec], cumulative_buckets(LATENCY_BUCKETS, counts), total
        )
        yield family
        bad = CounterMetricFamily(
            "worker_e2e_latency_invalid",
            self._INVALID_HELP,
            labels=["codec", "reason"],
        )
        for reason in E2E_INVALID_REASONS:
            bad.add_metric([self._codec, reason], invalid[reason])
        yield bad


class GcMetrics:
    """Cyclic-GC collections and the time they take, per generation (gc.callbacks).

    The seeds' story is allocation and collector pressure: a codec whose objects the
    collector walks pays twice. The callback runs once per collection (not per
    message); it costs two `perf_counter` calls and one counter update.
    """

    def __init__(self, registry: CollectorRegistry, codec: str) -> None:
        collections = Counter(
            "worker_gc_collections",
            "Cyclic garbage collections, by generation.",
            ["codec", "generation"],
            registry=registry,
        )
        seconds = Counter(
            "worker_gc_seconds",
            "Wall time spent in cyclic garbage collections, by generation.",
            ["codec", "generation"],
            registry=registry,
        )
        gens = range(len(gc.get_count()))
        self._collections = [collections.labels(codec, str(g)) for g in gens]
        self._seconds = [seconds.labels(codec, str(g)) for g in gens]
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = perf_counter()
            return
        generation = info["generation"]
        self._collections[generation].inc()
        self._seconds[generation].inc(perf_counter() - self._started)

    def install(self) -> Callable[[], None]:
        """Start counting; return the function that stops it."""
        gc.callbacks.append(self._callback)
        return lambda: gc.callbacks.remove(self._callback)


SHADOW_OUTCOMES: Final = ("agree", "differ", "shadow_rejected", "primary_rejected")
"""`worker_shadow_total` outcomes: both codecs' verdicts on one sampled message."""

SHADOW_SAMPLE_RESULTS: Final = ("written", "rate_limited", "queue_full", "failed")
"""What became of a disagreement sample bound for `<topic>.shadow`."""


class ShadowMetrics:
    """The shadow decode's metrics, built only when a shadow codec is configured.

    Every outcome and sample result exists from the start at 0, so `increase()` sees
    the first one. Difference paths are label children made on first use: they come
    from the schema (list indexes and map keys stripped), a bounded set.

    Args:
        registry: the worker's registry.
        codec: the live (primary) codec's key.
        shadow: the shadow codec's key.
    """

    def __init__(self, registry: CollectorRegistry, *, codec: str, shadow: str):
        outcomes = Counter(
            "worker_shadow",
            "Sampled messages decoded by the shadow codec too, by outcome.",
            ["codec", "shadow", "outcome"],
            registry=registry,
        )
        self.outcomes = {o: outcomes.labels(codec, shadow, o) for o in SHADOW_OUTCOMES}
        self._differences = Counter(
            "worker_shadow_differences",
            "Messages whose two decodes differ at a field path (indexes stripped).",
            ["codec", "shadow", "path"],
            registry=registry,
        )
        self._paths: dict[str, Counter] = {}
        self.seconds = Counter(
            "worker_shadow_seconds",
            "Time the loop spent in the shadow decode (both decodes, compare, samples).",
            ["codec", "shadow"],
            registry=registry,
        ).labels(codec, shadow)
        samples = Counter(
            "worker_shadow_samples",
            "Disagreement samples for <topic>.shadow, by result.",
            ["codec", "shadow", "result"],
            registry=registry,
        )
        self.samples = {
            r: samples.labels(codec, shadow, r) for r in SHADOW_SAMPLE_RESULTS
        }
        self.errors = Counter(
            "worker_shadow_errors",
            "Failures of the shadow decode itself; the live path never sees them.",
            ["codec", "shadow"],
            registry=registry,
        ).labels(codec, shadow)
        self._labels = (codec, shadow)

    def difference(self, path: str) -> Counter:
        """The difference counter child for a schema field path (cached)."""
        child = self._paths.get(path)
        if child is None:
            child = self._paths[path] = self._differences.labels(*self._labels, path)
        return child
