"""The registry's distribution: the pinned Apicurio version, fetched by Maven, unpacked.

``deploy/local-registry/pom.xml`` pins ``apicurio.version``. Maven fetches
``io.apicurio:apicurio-registry-app:VERSION:tar.gz:all`` (the Quarkus runner jar plus
``lib/``) into the local repository with ``dependency:get`` and checks its checksum;
this module unpacks it once into ``deploy/local-registry/target/apicurio-VERSION/``.
The app's parent pom is not served, which is why the goal is ``get`` with
``transitive=false`` and the unpacking is ours: ``dependency:unpack`` reads the
artifact's descriptor, and fails on that missing parent.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Final

from schemas.errors import LocalKafkaError

POM_ENV: Final = "LOCAL_REGISTRY_POM"
"""Environment variable naming another pom (tests, other versions)."""
_GROUP_PATH: Final = ("io", "apicurio")
_NAME: Final = "apicurio-registry-app"
_MAVEN_TIMEOUT_S: Final = 900.0
"""A cold ``~/.m2`` downloads a 104 MiB archive plus the dependency plugin."""
_DONE_MARK: Final = ".unpacked"


def pom_path() -> Path:
    """Returns the pom pinning the registry (env ``LOCAL_REGISTRY_POM`` overrides it)."""
    if env := os.environ.get(POM_ENV):
        return Path(env).resolve()
    return Path(__file__).resolve().parents[2] / "deploy" / "local-registry" / "pom.xml"


def registry_version() -> str:
    """Returns the pinned Apicurio Registry version (the pom's ``apicurio.version``).

    Raises:
        LocalKafkaError: The pom has no ``apicurio.version`` property.
    """
    found = re.search(r"<apicurio\.version>\s*([^<\s]+)\s*<", pom_path().read_text())
    if found is None:
        raise LocalKafkaError(f"no <apicurio.version> property in {pom_path()}")
    return found.group(1)


def _local_repository() -> Path:
    """Maven's local repository: ``$MAVEN_REPO_LOCAL``, else ``~/.m2/repository``."""
    if env := os.environ.get("MAVEN_REPO_LOCAL"):
        return Path(env)
    return Path.home() / ".m2" / "repository"


def _archive(version: str) -> Path:
    folder = _local_repository().joinpath(*_GROUP_PATH, _NAME, version)
    return folder / f"{_NAME}-{version}-all.tar.gz"


def _maven_get(version: str) -> Path:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LocalKafkaError("'mvn' is not on PATH: install Maven 3.8+ (registry)")
    pom = pom_path()
    cmd = [mvn, "-q", "-B", "-C", "-Dstyle.color=never", "-f", str(pom)]
    cmd.append("dependency:get")  # -C: a checksum mismatch fails, not warns
    if env := os.environ.get("MAVEN_REPO_LOCAL"):
        cmd.append(f"-Dmaven.repo.local={env}")
    try:
        done = subprocess.run(  # noqa: S603
            cmd, capture_output=True, text=True, timeout=_MAVEN_TIMEOUT_S
        )
    except subprocess.TimeoutExpired as exc:
        raise LocalKafkaError(f"Maven timed out resolving {pom}") from exc
    archive = _archive(version)
    if done.returncode != 0 or not archive.is_file():
        lines = (done.stdout + done.stderr).splitlines()
        first = next((line for line in lines if "[ERROR]" in line), "no [ERROR] line")
        tail = "\n".join(lines[-30:])
        raise LocalKafkaError(
            f"Maven failed on {pom} (exit {done.returncode}): {first.strip()}\n{tail}"
        )
    return archive


def resolve_registry(*, force: bool = False) -> Path:
    """Returns the registry's runner jar, fetching and unpacking it if needed.

    Args:
        force: Fetch and unpack again even if the unpacked copy looks complete.

    Raises:
        LocalKafkaError: Maven is missing or failed, or the archive has no runner.
    """
    version = registry_version()
    home = pom_path().parent / "target" / f"apicurio-{version}"
    runner = home / f"{_NAME}-{version}-runner.jar"
    if not force and (home / _DONE_MARK).is_file() and runner.is_file():
        return runner
    archive = _maven_get(version)
    staging = home.with_name(f"{home.name}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(archive) as tar:
        tar.extractall(staging, filter="data")
    if not (staging / runner.name).is_file():
        shutil.rmtree(staging, ignore_errors=True)
        raise LocalKafkaError(f"{archive} holds no {runner.name}")
    (staging / _DONE_MARK).write_text(f"{archive}\n")
    shutil.rmtree(home, ignore_errors=True)
    os.replace(staging, home)
    return runner
