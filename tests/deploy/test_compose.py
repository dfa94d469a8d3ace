"""docker-compose.yml: valid, pinned, and passing only settings the apps accept."""

from __future__ import annotations

import os
import re

import pytest

import service
from localkafka import kafka_version
from tests.deploy.support import (
    COMPOSE_FILE,
    PROMETHEUS_CONFIG,
    ROOT,
    check_settings_env,
    compose_services,
    image_tag,
    interpolate,
    load_yaml,
    run_tool,
    service_env,
    tool,
)


class TestCompose:
    """docker-compose.yml is valid, pinned, and passes only settings the apps accept."""

    def test_docker_compose_validates_the_file(self) -> None:
        """`docker-compose config -q` accepts the file."""
        compose = tool("docker-compose")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        done = run_tool(  # a program of the system's Python: no PYTHONPATH
            compose, "-f", str(COMPOSE_FILE), "config", "-q", cwd=ROOT, env=env
        )
        assert done.returncode == 0, done.stderr

    def test_every_image_is_pinned(self) -> None:
        """Every service names an image with an exact tag; none is `latest`."""
        images = set()
        for name, svc in compose_services().items():
            image = svc.get("image")
            assert image, f"{name}: no image"
            tag = image_tag(image)
            assert tag and tag != "latest" and re.search(r"\d", tag), f"{name}: {image}"
            images.add(image.split(":")[0])
            if image.startswith("docker.io/apache/kafka:"):
                assert tag == kafka_version(), f"{name}: not the pom's Kafka version"
            if image.startswith("codec-ab:"):
                assert tag == service.__version__, f"{name}: not the project version"
        assert {"docker.io/apache/kafka", "codec-ab"} <= images

    def test_pulled_images_are_fully_qualified(self) -> None:
        """Every image that is pulled names its registry: podman resolves no short
        name without a default registry (`apache/kafka` fails there)."""
        for name, svc in compose_services().items():
            if "build" not in svc:
                registry = svc["image"].split("/", 1)[0]
                assert "." in registry or registry == "localhost", (
                    f"{name}: {svc['image']}"
                )

    def test_worker_environment_is_accepted_by_settings(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Each worker's WORKER_* variables name Settings fields with valid values."""
        workers = {n: s for n, s in compose_services().items() if "worker" in n}
        assert set(workers) == {"worker-a", "worker-b"}
        for svc in workers.values():
            check_settings_env(service_env(svc), monkeypatch, "worker")

    def test_loadgen_environment_is_accepted_by_loadgen_settings(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Each load generator's variables name LoadgenSettings fields, valid values."""
        loadgens = [s for n, s in compose_services().items() if "loadgen" in n]
        assert len(loadgens) == 2
        for svc in loadgens:
            check_settings_env(service_env(svc), monkeypatch, "loadgen")

    def test_each_side_reads_its_own_topic_in_its_codecs_wire_format(self) -> None:
        """worker-X decodes with the codec loadgen-X writes, on loadgen-X's topic."""
        services = compose_services()
        topics = set()
        for side in ("a", "b"):
            worker = service_env(services[f"worker-{side}"])
            loadgen = service_env(services[f"loadgen-{side}"])
            assert worker["WORKER_CONSUMER__TOPIC"] == loadgen["LOADGEN_TOPIC"]
            assert worker["WORKER_CODEC__NAME"] == loadgen["LOADGEN_CODEC"]
            assert worker["WORKER_CODEC__SCHEMA"] == loadgen["LOADGEN_PROFILE"]
            topics.add(worker["WORKER_CONSUMER__TOPIC"])
        assert len(topics) == 2
        a, b = (service_env(services[f"worker-{s}"]) for s in ("a", "b"))
        assert a["WORKER_CONSUMER__GROUP_ID"] != b["WORKER_CONSUMER__GROUP_ID"]
        assert a["WORKER_CODEC__NAME"] == "json+pydantic"
        assert b["WORKER_CODEC__NAME"] == "msgspec-msgpack"
        assert int(service_env(services["loadgen-a"])["LOADGEN_RATE"]) == 40_000

    def test_sides_differ_only_in_topic_group_and_codec(self) -> None:
        """Apart from topic, group, client id and codec, A and B are configured alike."""
        services = compose_services()
        own = {
            "worker": {
                "WORKER_CONSUMER__TOPIC",
                "WORKER_CONSUMER__GROUP_ID",
                "WORKER_CONSUMER__CLIENT_ID",
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
            assert service_env(services[name])["WORKER_CONSUMER__TOPIC"] in created
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
