"""deploy/grafana: provisioning and the dashboards' queries."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from tests.deploy.support import (
    DASHBOARD_FILES,
    GRAFANA_DIR,
    LOADGEN_METRIC_NAMES,
    PROMETHEUS_CONFIG,
    PROMETHEUS_OWN_NAMES,
    compose_services,
    dashboards,
    load_yaml,
    panel_queries,
    panels,
    promql_metric_names,
    recording_rules,
    run_tool,
    service_env,
    template_variables,
    tool,
    variable_query,
    worker_metric_names,
)


def _static_substitute(expr: str) -> str:
    """Replace Grafana variables with a placeholder, for checks without a server."""
    expr = re.sub(r"\$__(rate_interval|interval|range)\b", "1m", expr)
    return re.sub(r"\$\{?\w+\}?", ".+", expr)


class TestGrafana:
    """deploy/grafana: provisioning and the dashboards' queries."""

    def test_dashboards_parse_with_unique_ids(self) -> None:
        """Each dashboard is JSON with a uid, a title and unique panel ids."""
        assert DASHBOARD_FILES
        uids = set()
        for path, dash in dashboards():
            assert dash["uid"] and dash["title"], path.name
            ids = [p["id"] for p in dash["panels"]] + [
                p["id"] for row in dash["panels"] for p in row.get("panels", [])
            ]
            assert len(ids) == len(set(ids)), path.name
            uids.add(dash["uid"])
        assert len(uids) == len(DASHBOARD_FILES)

    def test_panels_fit_the_grid_without_overlapping(self) -> None:
        """Every panel lies inside Grafana's 24 columns and covers no other panel."""
        for path, dash in dashboards():
            owner: dict[tuple[int, int], str] = {}
            for panel in dash["panels"]:
                pos, title = panel["gridPos"], panel["title"]
                assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, title
                for x in range(pos["x"], pos["x"] + pos["w"]):
                    for y in range(pos["y"], pos["y"] + pos["h"]):
                        assert (x, y) not in owner, f"{path.name}: {title} {owner}"
                        owner[x, y] = title

    def test_panels_query_through_the_datasource_variable(self) -> None:
        """Every panel and variable uses ${datasource}, so any Prometheus works."""
        for path, dash in dashboards():
            names = {v["name"] for v in template_variables(dash)}
            assert "datasource" in names, path.name
            items = [
                *panels(dash),
                *(v for v in template_variables(dash) if v["type"] == "query"),
            ]
            for item in items:
                uid = item["datasource"]["uid"]
                assert uid == "${datasource}", (
                    f"{path.name}: {item.get('title') or item['name']}"
                )
                for target in item.get("targets", []):
                    assert target["datasource"]["uid"] == "${datasource}"

    def test_every_variable_used_is_defined_and_regex_safe(self) -> None:
        """Variables used in queries exist; those in =~ matchers are multi-value.

        Grafana regex-escapes a multi-value or All variable's values (`json\\+pydantic`)
        but not a single-value variable's, whose `+` would be a regex operator.
        """
        for path, dash in dashboards():
            variables = {v["name"]: v for v in template_variables(dash)}
            texts = [e for _, e in panel_queries(dash)]
            texts += [
                variable_query(v) for v in variables.values() if v["type"] == "query"
            ]
            for text in texts:
                for name in re.findall(r"\$\{?(\w+)\}?", text):
                    if name.startswith("__"):
                        continue
                    assert name in variables, f"{path.name}: ${name} in {text}"
                for name in re.findall(r'=~"\$\{?(\w+)\}?"', text):
                    var = variables[name]
                    assert var.get("multi") or var.get("includeAll"), name

    def test_queries_are_valid_promql(self, tmp_path: Path) -> None:
        """promtool parses every panel query (as a recording rule)."""
        rules = [
            {"record": f"dashboard:query_{i}:check", "expr": _static_substitute(expr)}
            for _, dash in dashboards()
            for i, (_, expr) in enumerate(panel_queries(dash))
        ]
        path = tmp_path / "dashboard-queries.yml"
        path.write_text(yaml.safe_dump({"groups": [{"name": "q", "rules": rules}]}))
        done = run_tool(tool("promtool"), "check", "rules", str(path))
        assert done.returncode == 0, done.stdout + done.stderr

    def test_queries_name_only_exported_metrics(self) -> None:
        """Dashboards select only metrics the worker or the load generator export."""
        known = worker_metric_names() | LOADGEN_METRIC_NAMES | PROMETHEUS_OWN_NAMES
        known |= {r["record"] for r in recording_rules()}  # the Verdict row's
        for path, dash in dashboards():
            texts = list(panel_queries(dash)) + [
                (v["name"], variable_query(v))
                for v in template_variables(dash)
                if v["type"] == "query"
            ]
            for title, expr in texts:
                unknown = promql_metric_names(expr) - known
                assert not unknown, f"{path.name}: {title}: {unknown}"

    def test_codec_ab_dashboard_covers_the_comparison(self) -> None:
        """The Codec A/B dashboard shows every figure of the comparison."""
        dash = json.loads((GRAFANA_DIR / "dashboards" / "codec-ab.json").read_text())
        assert dash["title"] == "Codec A/B"
        used = set().union(*(promql_metric_names(e) for _, e in panel_queries(dash)))
        for name in (
            "worker_messages_total",
            "process_cpu_seconds_total",
            "worker_decode_seconds_sum",
            "worker_e2e_latency_seconds_bucket",
            "process_resident_memory_bytes",
            "worker_consumer_lag_messages",
            "worker_dead_letters_total",
            "worker_gc_seconds_total",
            "worker_gc_collections_total",
            "loadgen_target_rate",
            "loadgen_achieved_rate",
        ):
            assert name in used, name
        assert {"codec", "instance"} <= {v["name"] for v in template_variables(dash)}

    def test_verdict_row_is_built_on_the_recording_rules(self) -> None:
        """The Verdict row shows B/A of CPU per message and p99 from the rules that
        `codec-ab staging` reads beside its report."""
        dash = json.loads((GRAFANA_DIR / "dashboards" / "codec-ab.json").read_text())
        rows = [p for p in dash["panels"] if p["type"] == "row"]
        assert rows[0]["title"].startswith("Verdict")
        top = rows[1]["gridPos"]["y"]
        shown = {
            t["expr"]
            for p in dash["panels"]
            if p["type"] != "row" and p["gridPos"]["y"] < top
            for t in p["targets"]
        }
        recorded = {r["record"] for r in recording_rules()}
        assert {
            "ab:worker_cpu_seconds_per_message:ratio_rate1m",
            "ab:worker_e2e_latency_seconds_p99:ratio_rate1m",
        } <= shown
        assert shown <= recorded

    def test_summary_stats_are_one_value_per_codec(self) -> None:
        """Each summary stat aggregates to the codec alone: codecs sit side by side.

        A stat grouped by instance or generation too would show several values per
        codec, and one without a grouping would mix the codecs into one.
        """
        dash = json.loads((GRAFANA_DIR / "dashboards" / "codec-ab.json").read_text())
        stats = [p for p in panels(dash) if p["type"] == "stat"]
        assert stats
        for panel in stats:
            for target in panel["targets"]:
                groupings = re.findall(
                    r"\b(?:by|without)\s*\(([^)]*)\)", target["expr"]
                )
                labels = [
                    {g.strip() for g in grouping.split(",")} for grouping in groupings
                ]
                assert labels, panel["title"]
                assert all(group - {"le"} == {"codec"} for group in labels), (
                    f"{panel['title']}: {groupings}"
                )
                assert target["legendFormat"] == "{{codec}}", panel["title"]

    def test_provisioning_matches_the_compose_mounts(self) -> None:
        """Datasource and dashboard providers point where compose mounts things."""
        grafana = compose_services()["grafana"]
        mounts = dict(v.split(":")[:2] for v in grafana["volumes"])
        dash_dir = mounts["./deploy/grafana/dashboards"]
        provider_files = list(
            (GRAFANA_DIR / "provisioning" / "dashboards").glob("*.yml")
        )
        paths = {
            p["options"]["path"]
            for f in provider_files
            for p in load_yaml(f)["providers"]
        }
        assert paths == {dash_dir}
        home = service_env(grafana)["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
        assert Path(home).name in {p.name for p in DASHBOARD_FILES}
        (source,) = [
            d
            for f in (GRAFANA_DIR / "provisioning" / "datasources").glob("*.yml")
            for d in load_yaml(f)["datasources"]
        ]
        assert source["type"] == "prometheus" and source["isDefault"]
        assert source["url"] == "http://prometheus:9090"
        interval = load_yaml(PROMETHEUS_CONFIG)["global"]["scrape_interval"]
        assert source["jsonData"]["timeInterval"] == interval
