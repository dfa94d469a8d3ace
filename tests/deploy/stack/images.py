"""The stack's images: the real ones where they can be pulled, stand-ins where not.

An image the compose file or the Dockerfile names is used as it is when it is already
in local storage (a stand-in built by an earlier run says so by its label), pulled when
a registry answers, and otherwise built as a stand-in from tests/deploy/standins/ under
the same name, from packages this machine reaches: a Debian bookworm base made by
debootstrap (`debian-base.sh`), Debian's python3.11, Java 17 and prometheus, and Kafka's
jars resolved by Maven. Grafana has no stand-in: nothing this machine reaches builds it.
Stand-ins are test infrastructure, labelled `org.codec-ab.stand-in`; they stay in the
engine's storage, so later runs reuse them (and their layers) instead of rebuilding.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from localkafka import kafka_version
from tests.deploy.stack.engine import NICE, Engine, EngineError
from tests.deploy.support import DOCKERFILE, ROOT, compose_services, image_tag

STANDINS: Final = ROOT / "tests" / "deploy" / "standins"
BASE: Final = "localhost/codec-ab-stand-in/debian:bookworm"
LABEL: Final = "org.codec-ab.stand-in"
HOST_CA_BUNDLE: Final = Path("/etc/ssl/certs/ca-certificates.crt")
PULL_TIMEOUT_S: Final = 300.0
BUILD_TIMEOUT_S: Final = 1800.0


@dataclass(frozen=True)
class ImageOrigin:
    """Where one image of the run came from."""

    image: str
    origin: str
    """`local`, `pulled`, `stand-in` (built earlier), `stand-in, built` or `missing`."""
    note: str = ""

    @property
    def available(self) -> bool:
        return self.origin != "missing"

    def line(self) -> str:
        return f"{self.image}: {self.origin}" + (f" ({self.note})" if self.note else "")


def needed_images() -> list[str]:
    """The images to provide: the Dockerfile's bases, then the compose file's pulled ones."""
    stages: set[str] = set()
    bases: list[str] = []
    for line in DOCKERFILE.read_text().splitlines():
        words = line.split()
        if len(words) >= 2 and words[0].upper() == "FROM":
            if words[1] not in stages and words[1] not in bases:
                bases.append(words[1])
            if len(words) >= 4 and words[2].upper() == "AS":
                stages.add(words[3])
    pulled = [
        str(svc["image"]) for svc in compose_services().values() if "build" not in svc
    ]
    return list(dict.fromkeys([*bases, *pulled]))


def _host_ca(context: Path, image: str) -> None:
    """The python stand-in's build context: this machine's CA bundle."""
    shutil.copy(HOST_CA_BUNDLE, context / "host-ca-certificates.crt")


def _kafka_jars(context: Path, image: str) -> None:
    """The Kafka stand-in's build context: the broker's jars and kafka-tools, by Maven."""
    version = image_tag(image)
    if version != kafka_version():
        raise EngineError(
            f"{image}: the stand-in builds Kafka {kafka_version()} "
            f"(deploy/local-kafka/pom.xml), not {version}"
        )
    libs = context / "libs"
    pom = ROOT / "deploy" / "local-kafka" / "pom.xml"
    maven = ["mvn", "-q", "-B", "-Dstyle.color=never"]
    for goal in (
        ["-f", str(pom), "dependency:copy-dependencies", "-DincludeScope=runtime"],
        ["dependency:copy", f"-Dartifact=org.apache.kafka:kafka-tools:{version}"],
    ):
        done = subprocess.run(
            [*NICE, *maven, *goal, f"-DoutputDirectory={libs}"],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
            cwd=context,
        )
        if done.returncode != 0:
            raise EngineError(f"Maven: {' '.join(goal[:3])} failed:\n{done.stdout}")


@dataclass(frozen=True)
class StandIn:
    """How to build one stand-in: its folder and what its build context needs added."""

    folder: str
    prepare: Callable[[Path, str], None] | None = None


STAND_INS: Final = {
    "docker.io/library/python": StandIn("python", _host_ca),
    "docker.io/apache/kafka": StandIn("kafka", _kafka_jars),
    "docker.io/prom/prometheus": StandIn("prometheus"),
}
"""Stand-ins by repository (the image name without its tag)."""


def repository(image: str) -> str:
    """`docker.io/prom/prometheus` of `docker.io/prom/prometheus:v3.5.0`."""
    return re.sub(r":[^/:]+$", "", image.split("@", 1)[0])


def _base(engine: Engine, log: Callable[[str], None]) -> None:
    """The Debian base of every stand-in (debootstrap), unless it is already there."""
    if engine.has_image(BASE):
        return
    log(f"building {BASE} with debootstrap (Debian's packages; a few minutes)")
    script = STANDINS / "debian-base.sh"
    done = subprocess.run(
        [*NICE, "bash", str(script), engine.name, BASE],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise EngineError(f"{script.name} failed:\n{done.stderr[-3000:]}")


def build_stand_in(engine: Engine, image: str, log: Callable[[str], None]) -> None:
    """Build the stand-in of `image` under its name (EngineError if there is none)."""
    stand_in = STAND_INS.get(repository(image))
    if stand_in is None:
        raise EngineError(f"{image}: no stand-in can be built from reachable packages")
    _base(engine, log)
    log(f"building a stand-in for {image} (tests/deploy/standins/{stand_in.folder})")
    with tempfile.TemporaryDirectory(prefix="codec-ab-standin-") as tmp:
        context = Path(tmp) / "context"
        shutil.copytree(STANDINS / stand_in.folder, context)
        if stand_in.prepare is not None:
            stand_in.prepare(context, image)
        fmt = ["--format", "docker"] if engine.name == "podman" else []
        engine.cli(
            "build",
            "--network",
            "host",
            *fmt,
            "--build-arg",
            f"BASE={BASE}",
            "-t",
            image,
            str(context),
            timeout=BUILD_TIMEOUT_S,
            nice=True,
        )


def provide(
    engine: Engine, image: str, log: Callable[[str], None], *, pull: bool = True
) -> ImageOrigin:
    """Make `image` available: local, pulled, or a stand-in; `missing` when none works."""
    if engine.has_image(image):
        label = engine.image_labels(image).get(LABEL)
        if label:
            return ImageOrigin(image, "stand-in", label)
        return ImageOrigin(image, "local")
    if pull:
        done = engine.cli("pull", image, check=False, timeout=PULL_TIMEOUT_S)
        if done.returncode == 0:
            return ImageOrigin(image, "pulled")
        reason = (done.stderr.strip().splitlines() or ["pull failed"])[-1]
        log(f"{image}: cannot be pulled: {reason[:160]}")
    if repository(image) not in STAND_INS:
        return ImageOrigin(image, "missing", "no registry, and no stand-in")
    build_stand_in(engine, image, log)
    return ImageOrigin(image, "stand-in, built", engine.image_labels(image)[LABEL])
