"""Measuring a running worker from outside: its /metrics and the kernel's accounting.

Nothing here runs inside the measured process: CPU time and memory come from
/proc/<pid>/stat and /proc/<pid>/status, counts and latency histograms from the
worker's own /metrics (read with prometheus_client's parser). Snapshots taken at two
instants give rates, CPU per message and latency quantiles over the window between.
"""

from __future__ import annotations

import os
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Final

from prometheus_client.parser import text_string_to_metric_families

_TICKS: Final = os.sysconf("SC_CLK_TCK")
_PAGE: Final = os.sysconf("SC_PAGE_SIZE")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds `pid` has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def rss_bytes(pid: int) -> int:
    """Resident set size of `pid` now."""
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * _PAGE


@dataclass
class Histogram:
    """Cumulative bucket counts (`le` -> count), with sum and count."""

    buckets: dict[float, float] = field(default_factory=dict)
    total: float = 0.0
    count: float = 0.0

    def minus(self, earlier: Histogram) -> Histogram:
        return Histogram(
            {le: c - earlier.buckets.get(le, 0.0) for le, c in self.buckets.items()},
            self.total - earlier.total,
            self.count - earlier.count,
        )

    def quantile(self, q: float) -> float | None:
        """Prometheus' `histogram_quantile`: linear within the bucket holding `q`."""
        if self.count <= 0:
            return None
        rank = q * self.count
        lower, below = 0.0, 0.0
        for le in sorted(self.buckets):
            cumulative = self.buckets[le]
            if cumulative >= rank:
                if le == float("inf"):
                    return lower
                width = cumulative - below
                fraction = (rank - below) / width if width > 0 else 1.0
                return lower + (le - lower) * fraction
            lower, below = le, cumulative
        return lower


@dataclass
class Snapshot:
    """The worker's state at one instant."""

    at: float
    cpu_s: float
    rss: int
    counters: dict[str, float]
    histograms: dict[str, Histogram]
    lag: float

    def counter(self, name: str) -> float:
        return self.counters.get(name, 0.0)


def scrape(port: int, host: str = "127.0.0.1", timeout: float = 5.0) -> str:
    url = f"http://{host}:{port}/metrics"
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return str(response.read().decode())


def parse(text: str) -> tuple[dict[str, float], dict[str, Histogram], float]:
    """Counters by `name{outcome|reason}`, histograms by name, and the total lag."""
    counters: dict[str, float] = {}
    histograms: dict[str, Histogram] = {}
    lag = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if family.type == "counter" and sample.name.endswith("_total"):
                key = labels.get("outcome") or labels.get("reason") or ""
                name = f"{sample.name}{{{key}}}" if key else sample.name
                counters[name] = counters.get(name, 0.0) + sample.value
            elif family.type == "histogram":
                h = histograms.setdefault(family.name, Histogram())
                if sample.name.endswith("_bucket"):
                    le = float(labels["le"])
                    h.buckets[le] = h.buckets.get(le, 0.0) + sample.value
                elif sample.name.endswith("_sum"):
                    h.total += sample.value
                elif sample.name.endswith("_count"):
                    h.count += sample.value
            elif sample.name == "worker_consumer_lag_messages":
                lag += sample.value
    return counters, histograms, lag


def snapshot(pid: int, port: int) -> Snapshot:
    """Read the worker's CPU, RSS and metrics now."""
    counters, histograms, lag = parse(scrape(port))
    return Snapshot(
        time.monotonic(), cpu_seconds(pid), rss_bytes(pid), counters, histograms, lag
    )


def processed(snap: Snapshot) -> float:
    """Messages the worker finished, whatever the outcome."""
    return sum(
        v for k, v in snap.counters.items() if k.startswith("worker_messages_total{")
    )
