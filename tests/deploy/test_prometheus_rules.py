"""deploy/prometheus: the scrape config, the rules and their promtool unit tests."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from abrunner.staging.slices import EXPRESSIONS, HISTOGRAMS
from tests.deploy.support import (
    PROMETHEUS_CONFIG,
    PROMETHEUS_DIR,
    PROMETHEUS_OWN_NAMES,
    alert_rules,
    load_yaml,
    promql_metric_names,
    recording_rules,
    run_tool,
    tool,
    worker_metric_names,
)


class TestPrometheusConfig:
    """deploy/prometheus: the scrape config, rules and their promtool unit tests."""

    def test_promtool_accepts_config_and_rules(self, tmp_path: Path) -> None:
        """`promtool check config` passes with the rule files resolved to the repo."""
        promtool = tool("promtool")
        config = load_yaml(PROMETHEUS_CONFIG)
        assert config["rule_files"] == ["/etc/prometheus/rules/*.yml"]
        config["rule_files"] = [str(PROMETHEUS_DIR / "rules" / "*.yml")]
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        done = run_tool(promtool, "check", "config", str(tmp_path / "prometheus.yml"))
        output = done.stdout + done.stderr
        assert done.returncode == 0, output
        found = sum(int(n) for n in re.findall(r"SUCCESS: (\d+) rules found", output))
        assert found == len(recording_rules()) + len(alert_rules()), output

    def test_promtool_rule_unit_tests_pass(self) -> None:
        """The alerting and recording rules pass deploy/prometheus/tests/*.yml."""
        tests = sorted((PROMETHEUS_DIR / "tests").glob("*.yml"))
        assert tests
        done = run_tool(
            tool("promtool"), "test", "rules", *map(str, tests), timeout=120
        )
        assert done.returncode == 0, done.stdout + done.stderr

    def test_rules_name_only_exported_metrics(self) -> None:
        """Rule expressions select only metrics the worker exports or rules record."""
        known = worker_metric_names() | PROMETHEUS_OWN_NAMES
        known |= {r["record"] for r in recording_rules()}
        for rule in recording_rules() + alert_rules():
            unknown = promql_metric_names(rule["expr"]) - known
            assert not unknown, f"{rule.get('record') or rule['alert']}: {unknown}"

    def test_recording_rules_follow_the_naming_convention(self) -> None:
        """Recorded names are level:metric:operations and unique."""
        names = [r["record"] for r in recording_rules()]
        assert len(names) == len(set(names))
        for name in names:
            assert re.fullmatch(r"[a-z_]+:[a-z0-9_]+:[a-z0-9_]+", name), name

    def test_recording_rules_cover_the_comparison(self) -> None:
        """CPU per message, decode time, latency, lag and GC each have a recorded series."""
        used = set().union(*(promql_metric_names(r["expr"]) for r in recording_rules()))
        for name in (
            "process_cpu_seconds_total",
            "worker_decode_seconds_sum",
            "worker_e2e_latency_seconds_bucket",
            "worker_consumer_lag_messages",
            "worker_gc_seconds_total",
            "worker_gc_collections_total",
        ):
            assert name in used, name

    def test_verdict_rules_are_the_staging_commands_expressions(self) -> None:
        """The side: rules are `codec-ab staging`'s per-slice expressions with
        `by (side)` and a 1m rate: the dashboard and the report cannot disagree."""
        rules = {r["record"]: r["expr"] for r in recording_rules()}

        def flat(text: str) -> str:
            return re.sub(r"\s+", "", text)

        for record, figure in (
            ("side:worker_messages:rate1m", "messages"),
            ("side:worker_cpu_usage:ratio_rate1m", "cpu_seconds"),
        ):
            command = (
                EXPRESSIONS[figure]
                .replace("{S}", "")
                .replace("[W]", "[1m]")
                .replace("increase(", "rate(")
                .replace("sum(", "sum by (side) (", 1)
            )
            assert flat(rules[record]) == flat(command), record
        p99 = HISTOGRAMS["e2e"].replace("{S}", "").replace("[W]", "[1m]")
        p99 = p99.replace("increase(", "rate(").replace("by (le)", "by (side, le)")
        assert flat(rules["side:worker_e2e_latency_seconds:p99_rate1m"]) == flat(
            f"histogram_quantile(0.99, {p99})"
        )

    def test_alerts_cover_the_failure_modes_and_are_documented(self) -> None:
        """Lag, dead letters, down and CPU alerts exist, each with severity and summary."""
        alerts = {r["alert"]: r for r in alert_rules()}
        for name in (
            "CodecWorkerDown",
            "CodecWorkerConsumerLagGrowing",
            "CodecWorkerDeadLetters",
            "CodecWorkerCpuSaturated",
        ):
            assert name in alerts
        for name, rule in alerts.items():
            assert rule["labels"]["severity"] in {"warning", "critical"}, name
            assert rule["annotations"]["summary"], name
            assert rule["annotations"]["description"], name
