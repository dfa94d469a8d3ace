"""The metrics reference page, written from the worker's metric objects.

Part of `scripts/docs_reference.py` (which loads it from beside itself): the
metrics the worker registers, read from a `Metrics` built on a registry of its own.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

METRICS_MODULE = "service.telemetry.metrics"


def metric_families() -> list[tuple[str, str, list[str], str]]:
    """Every metric the worker exports: (name, type, labels, help)."""
    from prometheus_client import CollectorRegistry

    metrics = importlib.import_module(METRICS_MODULE)
    registry = CollectorRegistry()
    metrics.Metrics(registry, codec="msgspec-json", schema="medium")
    metrics.ShadowMetrics(registry, codec="msgspec-json", shadow="protobuf")
    found = {}
    for collector in list(registry._collector_to_names):
        declared = list(getattr(collector, "_labelnames", ()))
        for family in collector.collect():
            if family.name.startswith("process_"):
                continue
            labels = declared or sorted(
                {k for s in family.samples for k in s.labels if k not in ("le",)}
            )
            name = family.name + ("_total" if family.type == "counter" else "")
            found[name] = (name, family.type, labels, family.documentation)
    return sorted(found.values())


def page(cell: Callable[[str], str]) -> str:
    """reference/metrics.md: every metric the worker exports; `cell` makes a text
    one table cell (the escaping every reference page shares)."""
    out = [
        "# Metrics reference",
        "",
        "Written from the worker's metric objects (`service/telemetry/metrics.py`) at",
        "every build of this site. They are served on the worker's `/metrics`, beside",
        "`/healthz` and `/readyz`; the standard process collector adds",
        "`process_cpu_seconds_total` and `process_resident_memory_bytes`. Updates are",
        "aggregated per batch, never per message.",
        "",
        "| name | type | labels | what it counts |",
        "| --- | --- | --- | --- |",
    ]
    for name, kind, labels, documentation in metric_families():
        label_cell = ", ".join(f"`{label}`" for label in labels) or ""
        out.append(f"| `{name}` | {kind} | {label_cell} | {cell(documentation)} |")
    out.append("")
    return "\n".join(out)
