"""Measuring a running worker from outside: its /metrics and the kernel's accounting.

Nothing here runs inside the measured process: CPU time and memory come from
/proc/<pid>/stat and /proc/<pid>/statm, counts and latency histograms from the
worker's own /metrics (read with prometheus_client's parser: the one /metrics
parser of the project's tools and tests). Snapshots taken at two instants give
rates, CPU per message and latency quantiles over the window between.
"""

from __future__ import annotations

import math
import os
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Final

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from service.telemetry.histogram import quantile

_TICKS: Final = os.sysconf("SC_CLK_TCK")
_PAGE: Final = os.sysconf("SC_PAGE_SIZE")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds `pid` has used."""
    with open(f"/proc/{pid}/stat") as f:
        # Fields 14 and 15 (utime, stime) counted after the ")" that ends the
        # command name, which may itself hold spaces.
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def rss_bytes(pid: int) -> int:
    """Resident set size of `pid` now."""
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * _PAGE


@dataclass
class Histogram:
    """A scraped histogram summed over its label sets: cumulative `le` -> count."""

    buckets: dict[float, float] = field(default_factory=dict)
    total: float = 0.0
    count: float = 0.0

    def minus(self, earlier: Histogram) -> Histogram:
        """The observations made since `earlier` (a scrape of the same histogram)."""
        return Histogram(
            {le: c - earlier.buckets.get(le, 0.0) for le, c in self.buckets.items()},
            self.total - earlier.total,
            self.count - earlier.count,
        )

    def quantile(self, q: float) -> float | None:
        """The `q` quantile as `service.telemetry.histogram.quantile` computes it.

        None with no observations, `math.inf` when the rank lies above the top
        finite bucket.
        """
        bounds = sorted(le for le in self.buckets if le != math.inf)
        cumulative = [self.buckets[le] for le in bounds]
        cumulative.append(self.buckets.get(math.inf, cumulative[-1] if bounds else 0))
        counts = [b - a for a, b in zip([0.0, *cumulative], cumulative, strict=False)]
        return quantile(bounds, counts, q)

    def mean(self) -> float | None:
        """The mean observation, None with none."""
        return self.total / self.count if self.count else None


class Metrics:
    """One scrape of /metrics: its samples, summed by name and label subset."""

    def __init__(self, samples: list[Sample]) -> None:
        self.samples = samples

    def has(self, name: str) -> bool:
        """Whether any sample is called `name`: the worker exports that metric."""
        return any(s.name == name for s in self.samples)

    def total(self, name: str, **labels: str) -> float:
        """The sum of the samples called `name` whose labels include `labels`.

        Labels not named are summed over: `total("worker_gc_seconds_total")` is
        the time of every generation's collections.
        """
        wanted = labels.items()
        return sum(
            s.value
            for s in self.samples
            if s.name == name and wanted <= s.labels.items()
        )

    def histogram(self, name: str) -> Histogram:
        """Histogram family `name` summed over its label sets (empty if absent)."""
        h = Histogram()
        for s in self.samples:
            if s.name == f"{name}_bucket":
                le = float(s.labels["le"])
                h.buckets[le] = h.buckets.get(le, 0.0) + s.value
            elif s.name == f"{name}_sum":
                h.total += s.value
            elif s.name == f"{name}_count":
                h.count += s.value
        return h

    def flat(self) -> dict[str, float]:
        """Every sample as `{'name{label="value",...}': value}`, as exposed."""
        return {_sample_key(s): s.value for s in self.samples}


def _sample_key(sample: Sample) -> str:
    if not sample.labels:
        return sample.name
    pairs = ",".join(f'{k}="{_escape(v)}"' for k, v in sample.labels.items())
    return f"{sample.name}{{{pairs}}}"


def _escape(value: str) -> str:
    """A label value as the exposition format writes it."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def parse(text: str) -> Metrics:
    """Parse Prometheus text exposition."""
    return Metrics(
        [s for family in text_string_to_metric_families(text) for s in family.samples]
    )


def scrape(port: int, host: str = "127.0.0.1", timeout: float = 5.0) -> Metrics:
    """Read and parse `http://host:port/metrics`.

    Raises:
        OSError: nothing answers there (yet).
    """
    url = f"http://{host}:{port}/metrics"
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return parse(response.read().decode())


@dataclass(frozen=True)
class Snapshot:
    """The worker's state at one instant."""

    at: float
    cpu_s: float
    rss: int
    metrics: Metrics

    @property
    def processed(self) -> float:
        """Messages the worker finished, whatever the outcome."""
        return self.metrics.total("worker_messages_total")

    @property
    def lag(self) -> float:
        """Consumer lag summed over the worker's partitions."""
        return self.metrics.total("worker_consumer_lag_messages")


def snapshot(pid: int, port: int) -> Snapshot:
    """Read the worker's CPU, RSS and metrics now.

    Raises:
        OSError: the process is gone or its /metrics does not answer.
    """
    metrics = scrape(port)
    return Snapshot(time.monotonic(), cpu_seconds(pid), rss_bytes(pid), metrics)
