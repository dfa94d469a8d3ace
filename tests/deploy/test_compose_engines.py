"""docker-compose.yml and deploy/compose.sh on Docker and on podman-compose 1.0.3.

What podman-compose 1.0.3 (Debian bookworm) does differently, and what the files do
about it: it ignores `depends_on` conditions (compose.sh starts the services in
order), `healthcheck: disable: true` (the load generators use `test: ["NONE"]`) and
`stop_grace_period` (compose.sh stops with the 30 s grace), and `podman build` keeps
no HEALTHCHECK in the OCI format (the workers declare theirs in the compose file too).
`make stack-test` runs the stack itself; these check the files.
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Any, Final

from tests.deploy.support import (
    COMPOSE_FILE,
    DOCKERFILE,
    ROOT,
    compose_services,
    run_tool,
)

COMPOSE_SH: Final = ROOT / "deploy" / "compose.sh"


def _start_order() -> list[list[str]]:
    """compose.sh's start steps (`order=(...)`): services started together."""
    found = re.search(r"^order=\((.*)\)$", COMPOSE_SH.read_text(), re.M)
    assert found, "no order=(...) in deploy/compose.sh"
    return [step.split() for step in shlex.split(found.group(1))]


def _dockerfile_healthcheck() -> dict[str, str]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    line = next(x for x in text.splitlines() if x.startswith("HEALTHCHECK"))
    return dict(re.findall(r"--([a-z-]+)=(\S+)", line))


def _compose_sh(*args: str, **env: str) -> str:
    done = run_tool("bash", str(COMPOSE_SH), *args, env=os.environ | env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


class TestStartOrder:
    """compose.sh's order holds every `depends_on` (podman-compose ignores them)."""

    def test_every_service_is_started_after_what_it_depends_on(self) -> None:
        steps = _start_order()
        started: list[str] = [s for step in steps for s in step]
        assert sorted(started) == sorted(compose_services())
        position = {s: i for i, step in enumerate(steps) for s in step}
        for name, svc in compose_services().items():
            for dep in svc.get("depends_on") or []:
                assert position[dep] < position[name], f"{name} before {dep}"

    def test_load_generators_start_last(self) -> None:
        """Their topics exist and their workers run before the first message."""
        assert set(_start_order()[-1]) == {"loadgen-a", "loadgen-b"}

    def test_one_shot_jobs_are_waited_for(self) -> None:
        """Each `service_completed_successfully` dependency is a step of its own,
        which compose.sh waits for and requires to exit 0."""
        jobs = {
            dep
            for svc in compose_services().values()
            if isinstance(svc.get("depends_on"), dict)
            for dep, how in svc["depends_on"].items()
            if how.get("condition") == "service_completed_successfully"
        }
        assert jobs == {"topics"}
        assert ["topics"] in _start_order()
        assert 'if [ "$step" = topics ]' in COMPOSE_SH.read_text()


class TestHealthChecks:
    """Health as declared, whichever engine runs it and however the image was built."""

    def test_workers_declare_the_images_health_check(self) -> None:
        """The compose file repeats the Dockerfile's HEALTHCHECK: same timing, same
        /healthz on the worker's metrics port (podman's OCI builds drop the image's)."""
        image = _dockerfile_healthcheck()
        for name in ("worker-a", "worker-b"):
            check: dict[str, Any] = compose_services()[name]["healthcheck"]
            kind, command = check["test"]
            assert kind == "CMD-SHELL"  # podman-compose 1.0.3 mangles the CMD form
            assert "/healthz" in command and "$${WORKER_METRICS__PORT}" in _raw_test()
            for key in ("interval", "timeout", "start-period", "retries"):
                assert str(check[key.replace("-", "_")]) == image[key], key

    def test_load_generators_switch_the_image_check_off_portably(self) -> None:
        """`test: ["NONE"]`, which both engines honour (podman-compose 1.0.3 ignores
        `disable: true`), so no worker /healthz check is inherited."""
        for name in ("loadgen-a", "loadgen-b"):
            assert compose_services()[name]["healthcheck"] == {"test": ["NONE"]}


def _raw_test() -> str:
    """The workers' health check command as written (before `$$` interpolation)."""
    text = COMPOSE_FILE.read_text()
    found = re.search(r"- CMD-SHELL\n\s+- >-\n\s+(.+)\n", text)
    assert found, "no CMD-SHELL health check"
    return found.group(1)


class TestVariables:
    """Every compose variable is documented in the file's header, units right."""

    def test_each_variable_is_documented_in_the_header(self) -> None:
        text = COMPOSE_FILE.read_text()
        header = text[: text.index("\nx-")]
        used = set(re.findall(r"(?<!\$)\$\{(\w+)", text))
        assert used
        for name in used:
            assert re.search(rf"\b{name}=", header), f"${{{name}}} not documented"

    def test_worker_cpus_is_in_cores(self) -> None:
        """`cpus:` counts cores (0.5 is half of one), not a percentage."""
        header = COMPOSE_FILE.read_text().split("\nx-")[0]
        line = next(x for x in header.splitlines() if "WORKER_CPUS=" in x)
        assert "in cores" in line and "%" not in line

    def test_published_ports_are_loopback_and_variable(self) -> None:
        """Every published port is on 127.0.0.1 and its host side a variable, so a
        run beside another stack (or a Prometheus on 9090) can move it; Kafka
        advertises the same host port it publishes."""
        for name, svc in compose_services().items():
            for port in svc.get("ports", []):
                assert re.fullmatch(r"127\.0\.0\.1:\$\{\w+:-\d+\}:\d+", port), name
        kafka = compose_services()["kafka"]
        published = kafka["ports"][0].split(":")[1]
        assert (
            f"EXTERNAL://127.0.0.1:{published}"
            in kafka["environment"]["KAFKA_ADVERTISED_LISTENERS"]
        )


class TestComposeScript:
    """deploy/compose.sh: valid shell; builds the compose file's image."""

    def test_shell_syntax(self) -> None:
        done = run_tool("bash", "-n", str(COMPOSE_SH))
        assert done.returncode == 0, done.stderr

    def test_builds_the_image_the_compose_file_runs(self) -> None:
        images = {svc["image"] for svc in compose_services().values() if "build" in svc}
        assert _compose_sh("image", COMPOSE_ENGINE="docker") in images
        assert len(images) == 1

    def test_an_unknown_engine_is_refused(self) -> None:
        done = run_tool(
            "bash", str(COMPOSE_SH), "engine", env=os.environ | {"COMPOSE_ENGINE": "x"}
        )
        assert done.returncode == 2
        assert "COMPOSE_ENGINE=x" in done.stderr

    def test_make_up_and_down_go_through_it(self) -> None:
        makefile = (ROOT / "Makefile").read_text()
        assert "bash deploy/compose.sh up" in makefile
        assert "bash deploy/compose.sh down" in makefile
        assert "docker compose" not in makefile
