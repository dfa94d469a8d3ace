"""The running stack asked from outside: Prometheus, the containers' health, Grafana's
provisioning, and `codec-ab staging` on the stack's Prometheus.

Dashboard queries are resolved as Grafana resolves them (`prometheus_stack`'s
`resolve_variables` and `substitute`, the same code as tests/integration's).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.deploy.prometheus_stack import (
    api,
    get,
    has_finite_value,
    instant_query,
    resolve_variables,
    substitute,
)
from tests.deploy.stack.checks import Check, Declared, Observed
from tests.deploy.stack.engine import Engine
from tests.deploy.support import (
    GRAFANA_DIR,
    compose_services,
    load_yaml,
    panel_queries,
    recording_rules,
)


@dataclass(frozen=True)
class Prometheus:
    """The stack's Prometheus, at its published port."""

    prometheus: str

    def ready(self) -> bool:
        try:
            return bool(get(f"{self.prometheus}/-/ready"))
        except OSError:
            return False

    def answers(self, expr: str) -> bool:
        """Whether `expr` answers with at least one finite value."""
        try:
            return has_finite_value(instant_query(self.prometheus, expr))
        except (OSError, AssertionError, ValueError):
            return False

    def targets(self) -> list[dict[str, str]]:
        """Each active target: job, instance, health, error."""
        return [
            {
                "job": t["labels"]["job"],
                "instance": t["labels"]["instance"],
                "health": t["health"],
                "error": t.get("lastError", ""),
            }
            for t in api(self.prometheus, "targets")["activeTargets"]
        ]

    def rule_answers(self) -> dict[str, bool]:
        """Each recording rule: healthy in the rules API and answering with data."""
        health = {
            rule["name"]: rule["health"] == "ok" and not rule.get("lastError")
            for group in api(self.prometheus, "rules")["groups"]
            for rule in group["rules"]
        }
        return {
            r["record"]: health.get(r["record"], False) and self.answers(r["record"])
            for r in recording_rules()
        }

    def panel_answers(
        self, dashboards: Iterable[tuple[Path, Mapping[str, Any]]]
    ) -> dict[str, bool]:
        """Each dashboard panel query, variables at All, answering with data."""
        answers: dict[str, bool] = {}
        for path, dash in dashboards:
            values = resolve_variables(self, dash)
            for title, expr in panel_queries(dash):
                answers[f"{path.name}: {title}"] = self.answers(
                    substitute(expr, values)
                )
        return answers


def declared_health() -> list[Declared]:
    """Each service's health as docker-compose.yml declares it.

    A health check counts when the service declares one that is not `NONE` (the
    workers; the load generators switch the image's off). A one-shot job is a
    service another waits for with `service_completed_successfully` (`topics`).
    """
    services = compose_services()
    one_shot = {
        name
        for svc in services.values()
        if isinstance(depends := svc.get("depends_on"), dict)
        for name, dep in depends.items()
        if dep.get("condition") == "service_completed_successfully"
    }
    declared = []
    for name, svc in services.items():
        test = (svc.get("healthcheck") or {}).get("test") or ["NONE"]
        declared.append(Declared(name, test[0] != "NONE", name in one_shot))
    return declared


def observe(engine: Engine, declared: Iterable[Declared]) -> dict[str, Observed]:
    """The containers' states; on podman, each declared health check is run first
    (podman schedules them with systemd timers, and a machine without systemd
    never runs them)."""
    wanted = list(declared)
    if engine.name == "podman":
        running = engine.containers()
        for d in wanted:
            found = running.get(d.service)
            if d.healthcheck and found is not None and found.status == "running":
                engine.run_healthcheck(d.service)
    return {
        service: Observed(c.status, c.exit_code, c.health)
        for service, c in engine.containers().items()
    }


def grafana_provisioning(engine: Engine, grafana_running: bool) -> Check:
    """`grafana`: provisioning against the files and the stack (Grafana itself only
    where its image could be had).

    The datasource's URL must answer from inside the stack's network (asked from
    worker-a's container, where Grafana would ask from), and the dashboard provider's
    path must be where compose mounts the dashboards.
    """
    problems = []
    (source,) = [
        d
        for f in sorted((GRAFANA_DIR / "provisioning" / "datasources").glob("*.yml"))
        for d in load_yaml(f)["datasources"]
    ]
    url = f"{source['url']}/api/v1/status/buildinfo"
    probe = f"import urllib.request; urllib.request.urlopen({url!r}, timeout=5)"
    asked = engine.cli(
        "exec", engine.container("worker-a"), "python", "-c", probe, check=False
    )
    if asked.returncode != 0:
        problems.append(f"datasource {source['url']}: no answer inside the network")
    grafana = compose_services()["grafana"]
    mounts = dict(v.split(":")[:2] for v in grafana["volumes"])
    paths = {
        p["options"]["path"]
        for f in (GRAFANA_DIR / "provisioning" / "dashboards").glob("*.yml")
        for p in load_yaml(f)["providers"]
    }
    if paths != {mounts.get("./deploy/grafana/dashboards")}:
        problems.append(f"dashboard provider paths {sorted(paths)} != the mount")
    ran = "Grafana ran" if grafana_running else "Grafana not run (no image)"
    detail = (
        f"datasource {source['url']} answers in-network, provider path mounted; {ran}"
    )
    return Check("grafana", not problems, detail, tuple(problems))


def staging_report(
    prometheus: str, start: float, end: float, slice_s: int
) -> tuple[int, list[dict[str, Any]], str, str]:
    """`codec-ab staging` on the stack's window: exit status, ratios, stdout, stderr."""
    with tempfile.TemporaryDirectory(prefix="codec-ab-stack-staging-") as out:
        argv = [sys.executable, "-m", "abrunner", "staging", "--prometheus", prometheus]
        argv += ["--start", f"{start:.3f}", "--end", f"{end:.3f}"]
        argv += ["--slice", f"{slice_s}s", "--out", out]
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=300, check=False
        )
        report = Path(out) / "report.json"
        ratios = json.loads(report.read_text())["ratios"] if report.is_file() else []
    return done.returncode, ratios, done.stdout, done.stderr
