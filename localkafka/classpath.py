"""The broker's jars: the pinned Kafka version and its Maven-resolved classpath.

``deploy/local-kafka/pom.xml`` is the single source of truth for the Kafka version.
Maven resolves its dependencies once and the classpath is cached in
``deploy/local-kafka/target/classpath.txt`` (re-resolved when the pom is newer or a
jar is gone). Nothing is built: the pom's packaging is ``pom``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Final

from schemas.errors import LocalKafkaError

POM_ENV: Final = "LOCAL_KAFKA_POM"
"""Environment variable naming another pom (tests, other Kafka versions)."""

_MAVEN_TIMEOUT_S: Final = 900.0
"""A cold ``~/.m2`` downloads 46 jars (~45 MB) plus Maven's plugins: minutes on a slow link."""


def pom_path() -> Path:
    """Returns the pom pinning the broker (env ``LOCAL_KAFKA_POM`` overrides it)."""
    if env := os.environ.get(POM_ENV):
        return Path(env).resolve()
    return Path(__file__).resolve().parents[1] / "deploy" / "local-kafka" / "pom.xml"


def kafka_version() -> str:
    """Returns the pinned Kafka version (the pom's ``kafka.version`` property).

    Raises:
        LocalKafkaError: The pom has no ``kafka.version`` property.
    """
    found = re.search(r"<kafka\.version>\s*([^<\s]+)\s*<", pom_path().read_text())
    if found is None:
        raise LocalKafkaError(f"no <kafka.version> property in {pom_path()}")
    return found.group(1)


def resolve_classpath(*, force: bool = False) -> str:
    """Returns the broker classpath, running Maven if the cache is missing or stale.

    Args:
        force: Re-resolve even if the cached classpath looks valid.

    Raises:
        LocalKafkaError: Maven is missing or failed (the first line says why, the
            rest is the tail of Maven's output).
    """
    pom = pom_path()
    cache = pom.parent / "target" / "classpath.txt"
    if not force and cache.is_file() and cache.stat().st_mtime >= pom.stat().st_mtime:
        jars = cache.read_text().strip()
        if jars and all(Path(jar).is_file() for jar in jars.split(os.pathsep)):
            return jars
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LocalKafkaError("'mvn' is not on PATH: install Maven 3.8+ (Kafka jars)")
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_name(f"classpath.{os.getpid()}.tmp")
    goal = ["dependency:build-classpath", f"-Dmdep.outputFile={tmp}"]
    cmd = [mvn, "-q", "-B", "-Dstyle.color=never", "-f", str(pom), *goal]
    try:
        done = subprocess.run(  # noqa: S603
            cmd, capture_output=True, text=True, timeout=_MAVEN_TIMEOUT_S
        )
    except subprocess.TimeoutExpired as exc:
        raise LocalKafkaError(f"Maven timed out resolving {pom}") from exc
    if done.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        lines = (done.stdout + done.stderr).splitlines()
        first = next((line for line in lines if "[ERROR]" in line), "no [ERROR] line")
        tail = "\n".join(lines[-30:])
        raise LocalKafkaError(
            f"Maven failed on {pom} (exit {done.returncode}): {first.strip()}\n{tail}"
        )
    os.replace(tmp, cache)
    return cache.read_text().strip()


def java_executable() -> str:
    """Returns the ``java`` to run: ``$JAVA_HOME/bin/java``, else the one on PATH.

    Raises:
        LocalKafkaError: No JDK found.
    """
    home = Path(os.environ.get("JAVA_HOME") or "/nonexistent") / "bin" / "java"
    java = str(home) if home.is_file() else shutil.which("java")
    if java is None:
        raise LocalKafkaError("'java' not found (PATH, JAVA_HOME): install a JDK 17+")
    return java
