"""The worker's periodic summary line: rate, CPU, e2e p99, lag, dead letters by reason.

One `worker_summary` line every `--summary-interval-s` (and `worker_final` at a
graceful stop) tells a person what the last interval looked like at any rate: at
40k msg/s nothing else logs per message. Figures are deltas over the interval.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import structlog
from prometheus_client import CollectorRegistry

from service.telemetry.histogram import quantile
from service.telemetry.metrics import Metrics

log = structlog.get_logger(__name__)

_DEAD_LETTERS = "worker_dead_letters"


class Summary:
    """Periodic summary lines over the last interval.

    Args:
        metrics: the worker's metrics (latency histogram, dead-letter counters).
        clock: monotonic seconds (tests pass a fake).
        cpu: this process's CPU seconds.
    """

    def __init__(
        self,
        metrics: Metrics,
        *,
        clock: Callable[[], float] = time.monotonic,
        cpu: Callable[[], float] = time.process_time,
    ) -> None:
        self._m = metrics
        self._clock, self._cpu_clock = clock, cpu
        self._t, self._cpu = clock(), cpu()
        self._processed = 0
        self._counts, _ = metrics.e2e_latency.snapshot()
        self._dead = dead_letter_totals(metrics.registry)

    def due(self, now: float, interval: float) -> bool:
        """Whether `interval` seconds have passed since the last line."""
        return now - self._t >= interval

    def log(
        self, processed: int, *, lag: int | None = None, final: bool = False
    ) -> None:
        """Log the line for the interval that ends now; start the next one."""
        now, cpu = self._clock(), self._cpu_clock()
        wall = max(now - self._t, 1e-9)
        counts, _ = self._m.e2e_latency.snapshot()
        delta = [c - p for c, p in zip(counts, self._counts, strict=True)]
        dead = dead_letter_totals(self._m.registry)
        log.info(
            "worker_final" if final else "worker_summary",
            processed=processed,
            rate=round((processed - self._processed) / wall, 1),
            cpu_pct=round(100 * (cpu - self._cpu) / wall, 1),
            e2e_p99_ms=quantile_ms(delta, self._m.e2e_latency.bounds, 0.99),
            lag=lag,
            dead_letters={
                reason: int(n - self._dead.get(reason, 0))
                for reason, n in dead.items()
                if n > self._dead.get(reason, 0)
            },
        )
        self._t, self._cpu, self._processed = now, cpu, processed
        self._counts, self._dead = counts, dead


def dead_letter_totals(registry: CollectorRegistry) -> dict[str, float]:
    """`worker_dead_letters_total` by reason, as exported.

    Read from the registry once per summary line (every 10 s by default), so the
    dead-letter path stays as it is: one counter update per reason per batch.
    """
    for family in registry.collect():
        if family.name == _DEAD_LETTERS:
            return {
                s.labels["reason"]: s.value
                for s in family.samples
                if s.name.endswith("_total")
            }
    return {}


def quantile_ms(
    counts: Sequence[int], bounds: Sequence[float], q: float
) -> float | str | None:
    """Quantile `q` of a latency histogram, for a person.

    Returns:
        Milliseconds; None when there were no observations; the string `"> 7.5 h"`
        (the top bucket's bound) when the quantile lies above the top bucket, where
        any number would be a made-up cap.
    """
    value = quantile(bounds, counts, q)
    if value is None:
        return None
    if value == float("inf"):
        return f"> {_duration(bounds[-1])}"
    return round(value * 1000, 3)


def _duration(seconds: float) -> str:
    """`27100` -> `7.5 h`, `90` -> `1.5 min`, `2` -> `2 s` (two significant digits)."""
    for unit, size in (("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.2g} {unit}"
    return f"{seconds:.2g} s"
