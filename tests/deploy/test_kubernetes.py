"""deploy/k8s: the kustomize base, overlays and component."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import pytest
import yaml

import service
from abrunner.config import AbSettings
from codec import get_codec
from tests.deploy.support import (
    DOCKERFILE,
    K8S_DIR,
    PROMETHEUS_CONFIG,
    check_settings_env,
    image_tag,
    kustomize_build,
    load_yaml,
    settings_env_errors,
)

KUSTOMIZATIONS: Final = sorted(
    p.parent.relative_to(K8S_DIR).as_posix()
    for p in K8S_DIR.rglob("kustomization.yaml")
    if load_yaml(p).get("kind") == "Kustomization"
)


def _containers(manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The init and app containers of a workload's pod template."""
    spec = manifest.get("spec", {}).get("template", {}).get("spec", {})
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


_BUILT: dict[str, list[dict[str, Any]]] = {}


def _built(directory: str) -> list[dict[str, Any]]:
    """kustomize_build, once per directory and session (the tests only read it)."""
    if directory not in _BUILT:
        _BUILT[directory] = kustomize_build(directory)
    return _BUILT[directory]


def _by_kind(manifests: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The manifests of one kind, in build order."""
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
            check_settings_env(env, monkeypatch, "worker")

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
        assert settings_env_errors(env, "worker") == []

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

    def test_monitors_label_each_side_as_the_compose_config_does(self) -> None:
        """Side a's series get side="A", side b's side="B": the labels
        deploy/prometheus/prometheus.yml gives compose's workers, and what
        `codec-ab staging --a/--b` and the Verdict rules select by default."""
        manifests = _built("overlays/staging-ab")
        sides = {}
        for monitor in _by_kind(manifests, "ServiceMonitor"):
            (endpoint,) = monitor["spec"]["endpoints"]
            (relabel,) = [
                r for r in endpoint["relabelings"] if r["targetLabel"] == "side"
            ]
            assert "sourceLabels" not in relabel
            assert relabel.get("action", "replace") == "replace"
            pod_side = monitor["spec"]["selector"]["matchLabels"]["codec-ab/side"]
            sides[pod_side] = relabel["replacement"]
        assert sides == {"a": "A", "b": "B"}
        compose = load_yaml(PROMETHEUS_CONFIG)
        (job,) = [
            j for j in compose["scrape_configs"] if j["job_name"] == "codec-worker"
        ]
        assert {c["labels"]["side"] for c in job["static_configs"]} == {"A", "B"}
        defaults = AbSettings()
        assert (defaults.side_a, defaults.side_b) == ('side="A"', 'side="B"')

    def test_ab_overlay_reads_one_topic_in_two_groups_with_one_wire_format(
        self,
    ) -> None:
        """staging-ab: two Deployments, same topic, different groups and DLQs, one wire."""
        manifests = _built("overlays/staging-ab")
        configs = [c["data"] for c in _by_kind(manifests, "ConfigMap")]
        assert len(_by_kind(manifests, "Deployment")) == 2 and len(configs) == 2
        a, b = configs
        assert a["WORKER_CONSUMER__TOPIC"] == b["WORKER_CONSUMER__TOPIC"]
        assert a["WORKER_CONSUMER__GROUP_ID"] != b["WORKER_CONSUMER__GROUP_ID"]
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
        assert meta["bootstrapServers"] == config["KAFKA_BOOTSTRAP_SERVERS"]
        assert meta["topic"] == config["WORKER_CONSUMER__TOPIC"]
        assert meta["consumerGroup"] == config["WORKER_CONSUMER__GROUP_ID"]
        assert (
            1 <= scaled["spec"]["minReplicaCount"] <= scaled["spec"]["maxReplicaCount"]
        )


@pytest.mark.parametrize("directory", KUSTOMIZATIONS)
def test_grace_period_covers_the_shutdown_budget(directory: str) -> None:
    """Each worker's grace period exceeds its shutdown budget (`shutdown_timeout_s`,
    from its env or the default) by at least 10 s: a SIGTERM with the broker
    stalled ends within the budget plus about a second (fault scenario R1)."""
    from service.settings.worker import ProcessingSettings

    manifests = _built(directory)
    configmaps = {
        c["metadata"]["name"]: c["data"] for c in _by_kind(manifests, "ConfigMap")
    }
    for deployment in _by_kind(manifests, "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        env: dict[str, str] = {}
        for source in container.get("envFrom", []):
            env.update(configmaps[source["configMapRef"]["name"]])
        for item in container.get("env", []):
            env[item["name"]] = item.get("value", "")
        budget = float(
            env.get(
                "WORKER_PROCESSING__SHUTDOWN_TIMEOUT_S",
                ProcessingSettings().shutdown_timeout_s,
            )
        )
        assert pod["terminationGracePeriodSeconds"] >= budget + 10, deployment[
            "metadata"
        ]
