"""The container engine, from Python: deploy/compose.sh and the engine's own CLI.

Every call goes through deploy/compose.sh, so the engine choice (Docker or podman) and
podman's machine settings (CONTAINERS_CONF) are made in one place: `compose.sh ARGS`
for compose commands, `compose.sh cli ARGS` for the engine's (inspect, pause, build).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from tests.deploy.support import ROOT

COMPOSE_SH: Final = ROOT / "deploy" / "compose.sh"
NICE: Final = ("nice", "-n", "10")
"""Image builds are CPU heavy and the machine is shared: they run at a lower priority."""


class EngineError(RuntimeError):
    """A compose or engine command failed; the message ends with its output's tail."""


@dataclass(frozen=True)
class Container:
    """One container of the stack, as `inspect` shows it."""

    service: str
    name: str
    status: str
    """created, running, paused, exited, ..."""
    exit_code: int
    health: str | None
    """healthy, unhealthy, starting; None when the container has no health check."""
    restarts: int

    @classmethod
    def from_inspect(cls, item: Mapping[str, Any]) -> Container:
        """From one element of `docker inspect` or `podman inspect` output."""
        state = item.get("State", {})
        health = state.get("Health") or state.get("Healthcheck") or {}
        config = item.get("Config", {})
        check = (config.get("Healthcheck") or {}).get("Test") or []
        declared = bool(check) and check[0] != "NONE"
        return cls(
            service=(config.get("Labels") or {}).get("com.docker.compose.service", ""),
            name=str(item.get("Name", "")).lstrip("/"),
            status=str(state.get("Status", "")),
            exit_code=int(state.get("ExitCode", 0)),
            health=(health.get("Status") or "starting") if declared else None,
            restarts=int(item.get("RestartCount", 0)),
        )


@dataclass(frozen=True)
class Engine:
    """The stack's engine: compose commands and the engine CLI, with the run's variables.

    Args:
        name: `docker` or `podman`.
        project: the compose project name (containers are found by its label).
        env: the compose variables of the run (ports, rate, duration, codecs).
    """

    name: str
    project: str
    env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def find(cls, project: str, env: Mapping[str, str]) -> Engine:
        """The engine deploy/compose.sh picks (Docker if it answers, else podman)."""
        probe = cls("?", project, env)
        return cls(probe.compose("engine", timeout=60).stdout.strip(), project, env)

    def _environ(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PYTHON", "VIRTUAL_ENV"))
        }
        return (
            base
            | dict(self.env)
            | {"COMPOSE_PROJECT_NAME": self.project}
            | (dict(extra) if extra else {})
        )

    def _run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        check: bool,
        extra: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        try:
            done = subprocess.run(
                list(argv),
                capture_output=True,
                text=True,
                timeout=timeout,
                env=self._environ(extra),
                cwd=ROOT,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise EngineError(
                f"{' '.join(argv[:4])}: no answer in {timeout:.0f} s"
            ) from exc
        if check and done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-25:])
            raise EngineError(f"{' '.join(argv[:5])} exited {done.returncode}:\n{tail}")
        return done

    def compose(
        self,
        *args: str,
        timeout: float = 600,
        check: bool = True,
        services: Sequence[str] = (),
        nice: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """deploy/compose.sh ARGS (SERVICES limits `up` to some services)."""
        extra = {"SERVICES": " ".join(services)} if services else None
        argv = [*(NICE if nice else ()), "bash", str(COMPOSE_SH), *args]
        return self._run(argv, timeout=timeout, check=check, extra=extra)

    def cli(
        self, *args: str, timeout: float = 120, check: bool = True, nice: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """The engine's own command (`podman inspect ...`), with compose.sh's settings."""
        argv = [*(NICE if nice else ()), "bash", str(COMPOSE_SH), "cli", *args]
        return self._run(argv, timeout=timeout, check=check)

    def has_image(self, image: str) -> bool:
        """Whether the image is in local storage."""
        return self.cli("image", "inspect", image, check=False).returncode == 0

    def image_labels(self, image: str) -> dict[str, str]:
        """The image's labels ({} when it has none)."""
        done = self.cli(
            "image", "inspect", "--format", "{{json .Config.Labels}}", image
        )
        return json.loads(done.stdout or "null") or {}

    def image_healthcheck(self, image: str) -> list[str]:
        """The image's HEALTHCHECK test ([] when it has none)."""
        done = self.cli(
            "image", "inspect", "--format", "{{json .Config.Healthcheck}}", image
        )
        check = json.loads(done.stdout or "null") or {}
        return list(check.get("Test") or [])

    def container_ids(self, *labels: str) -> list[str]:
        """IDs of the project's containers, running or not (more label filters ANDed)."""
        filters = [f"label=com.docker.compose.project={self.project}", *labels]
        args = [arg for f in filters for arg in ("--filter", f)]
        return self.cli("ps", "-aq", *args).stdout.split()

    def containers(self) -> dict[str, Container]:
        """The project's containers by service name."""
        ids = self.container_ids()
        if not ids:
            return {}
        items = json.loads(self.cli("inspect", *ids).stdout)
        found = [Container.from_inspect(item) for item in items]
        return {c.service: c for c in found}

    def container(self, service: str) -> str:
        """The one container ID of a service (EngineError when there is none)."""
        ids = self.container_ids(f"label=com.docker.compose.service={service}")
        if len(ids) != 1:
            raise EngineError(f"{service}: {len(ids)} containers, expected 1")
        return ids[0]

    def logs(self, service: str) -> str:
        """A service's container output (stdout and stderr)."""
        done = self.cli("logs", self.container(service), check=False)
        return done.stdout + done.stderr

    def run_healthcheck(self, service: str) -> None:
        """Run a container's health check now (podman: no systemd timer runs it here)."""
        self.cli("healthcheck", "run", self.container(service), check=False, timeout=60)

    def leftovers(self) -> dict[str, list[str]]:
        """What of the project exists after `down`: containers, networks, volumes."""
        label = f"label=com.docker.compose.project={self.project}"
        nets = self.cli("network", "ls", "-q", "--filter", label).stdout.split()
        vols = self.cli("volume", "ls", "-q", "--filter", label).stdout.split()
        return {"containers": self.container_ids(), "networks": nets, "volumes": vols}
