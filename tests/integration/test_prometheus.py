"""A real Prometheus scrapes a live worker and load generator with the shipped config.

The stack (tests/deploy/prometheus_stack.py): the session broker, `codec-loadgen`,
`codec-worker` with one poison message, and Debian's `prometheus` with the shipped
scrape config (targets on 127.0.0.1, 1 s intervals) and rules, the processes
configured with the environment docker-compose.yml gives worker-a and loadgen-a.

Every PromQL query of every dashboard panel (template variables resolved the way
Grafana does) and every recording rule must return data, every alerting rule must
evaluate without error, and every metric name the dashboards and rules use must be one
the live processes export.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.deploy.prometheus_stack import (
    CODEC,
    SCHEMA,
    Stack,
    api,
    get,
    has_finite_value,
    resolve_variables,
    running_stack,
    substitute,
)
from tests.deploy.support import (
    LOADGEN_METRIC_NAMES,
    PROMETHEUS_OWN_NAMES,
    alert_rules,
    dashboards,
    exposed_metric_names,
    panel_queries,
    promql_metric_names,
    recording_rules,
    template_variables,
    variable_query,
)

pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.slow,
]


def _two_sided(expr: str) -> bool:
    """A B/A ratio of the Verdict row (`ab:*`): this stack has side A only; the
    two-sided stack of tests/integration/test_staging.py checks those."""
    return expr.startswith("ab:")


@pytest.fixture(scope="module")
def stack(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """Worker, load generator and Prometheus, running; torn down after the module."""
    with running_stack(
        kafka_bootstrap, tmp_path_factory.mktemp("prometheus-stack")
    ) as running:
        yield running


class TestScrape:
    """The shipped scrape config reaches the live processes."""

    def test_every_target_is_up(self, stack: Stack) -> None:
        """Worker, load generator and Prometheus itself are scraped successfully."""
        jobs = {s["metric"]["job"]: s["value"][1] for s in stack.query("up")}
        assert jobs == {"codec-worker": "1", "codec-loadgen": "1", "prometheus": "1"}

    def test_worker_info_carries_the_codec(self, stack: Stack) -> None:
        """worker_info joins process metrics to the codec (the dashboards rely on it)."""
        (info,) = stack.query("worker_info")
        assert info["metric"]["codec"] == CODEC
        assert info["metric"]["schema"] == SCHEMA

    def test_loadgen_exports_its_contract(self, stack: Stack) -> None:
        """The load generator exports every metric the dashboards expect of it."""
        names = exposed_metric_names(get(stack.loadgen_metrics).decode())
        assert names >= LOADGEN_METRIC_NAMES


class TestDashboards:
    """Every dashboard query returns data from the live stack."""

    def test_queries_name_only_exported_metrics(self, stack: Stack) -> None:
        """Names in dashboards and rules are all in the live /metrics outputs."""
        exported = exposed_metric_names(get(stack.worker_metrics).decode())
        exported |= exposed_metric_names(get(stack.loadgen_metrics).decode())
        known = (
            exported | PROMETHEUS_OWN_NAMES | {r["record"] for r in recording_rules()}
        )
        used: dict[str, set[str]] = {}
        for path, dash in dashboards():
            for title, expr in panel_queries(dash):
                used[f"{path.name}: {title}"] = promql_metric_names(expr)
            for var in template_variables(dash):
                if var["type"] == "query":
                    used[f"{path.name}: ${var['name']}"] = promql_metric_names(
                        variable_query(var)
                    )
        for rule in recording_rules() + alert_rules():
            used[rule.get("record") or rule["alert"]] = promql_metric_names(
                rule["expr"]
            )
        unknown = {
            where: names - known for where, names in used.items() if names - known
        }
        assert not unknown

    def test_every_panel_query_returns_data(self, stack: Stack) -> None:
        """With variables at All, each panel query returns at least one finite value."""
        queries: dict[str, str] = {}
        for path, dash in dashboards():
            values = resolve_variables(stack, dash)
            for title, expr in panel_queries(dash):
                if not _two_sided(expr):
                    queries[f"{path.name}: {title}"] = substitute(expr, values)
        assert queries

        def failing() -> dict[str, str]:
            return {
                where: expr
                for where, expr in queries.items()
                if not has_finite_value(stack.query(expr))
            }

        stack.poll(lambda: not failing(), 30)
        assert failing() == {}

    def test_gc_panels_show_every_generation(self, stack: Stack) -> None:
        """Each per-generation GC panel shows a series for every collector generation.

        The worker creates each generation's series at start, so a generation not yet
        collected shows 0 rather than no data; the generations are this
        interpreter's, the worker's own.
        """
        generations = {str(g) for g in range(len(gc.get_count()))}
        exported = set(
            re.findall(
                r'^worker_gc_collections_total\{[^}]*generation="(\w+)"',
                get(stack.worker_metrics).decode(),
                re.M,
            )
        )
        assert exported == generations
        shown: dict[str, set[str]] = {}
        for path, dash in dashboards():
            values = resolve_variables(stack, dash)
            for title, expr in panel_queries(dash):
                if "worker_gc_" in expr and re.search(r"by \([^)]*generation", expr):
                    samples = stack.query(substitute(expr, values))
                    shown[f"{path.name}: {title}"] = {
                        s["metric"].get("generation", "") for s in samples
                    }
        assert len(shown) >= 2, "no per-generation GC panels (ms/s, per 1k messages)"
        assert shown == dict.fromkeys(shown, generations)


class TestRules:
    """The shipped rules evaluate against live data."""

    def test_every_recording_rule_returns_data(self, stack: Stack) -> None:
        """Each recorded series exists with a finite value."""
        names = [r["record"] for r in recording_rules() if not _two_sided(r["record"])]

        def missing() -> list[str]:
            return [n for n in names if not has_finite_value(stack.query(n))]

        stack.poll(lambda: not missing(), 30)
        assert missing() == []

    def test_every_rule_evaluates_without_error(self, stack: Stack) -> None:
        """The rules API lists every shipped rule with health ok and no error."""
        loaded = {
            rule["name"]: rule
            for group in api(stack.prometheus, "rules")["groups"]
            for rule in group["rules"]
        }
        shipped = {
            r.get("record") or r["alert"] for r in recording_rules() + alert_rules()
        }
        assert set(loaded) == shipped
        broken = {
            name: (rule["health"], rule.get("lastError"))
            for name, rule in loaded.items()
            if rule["health"] != "ok" or rule.get("lastError")
        }
        assert broken == {}

    def test_dead_letter_alert_fires_and_worker_is_not_down(self, stack: Stack) -> None:
        """The poison message fires CodecWorkerDeadLetters; CodecWorkerDown stays quiet."""

        def alerts() -> dict[str, dict[str, Any]]:
            return {
                a["labels"]["alertname"]: a
                for a in api(stack.prometheus, "alerts")["alerts"]
            }

        firing = stack.wait(
            "CodecWorkerDeadLetters",
            lambda: (found := alerts()).get("CodecWorkerDeadLetters") and found,
            30,
        )
        dead = firing["CodecWorkerDeadLetters"]
        assert dead["state"] == "firing"
        assert dead["labels"]["codec"] == CODEC
        assert dead["labels"]["job"] == "codec-worker"
        assert "CodecWorkerDown" not in firing
        assert "CodecWorkerStalled" not in firing
