"""The local registry's state file and pinned distribution, without a JVM."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from localkafka.cli import build_parser
from localkafka.registry import distribution
from localkafka.registry.distribution import registry_version
from schemas.errors import LocalKafkaError
from service.kafka.registry_record import (
    REGISTRY_STATE_FILE,
    RegistryState,
    read_registry_state,
    write_registry_state,
)


class TestRegistryRecord:
    """Only a live registry JVM's record reads back; stale or broken ones read as None."""

    def test_a_dead_pid_reads_as_none(self, tmp_path: Path) -> None:
        state = RegistryState(pid=2**22 + 7, url="http://127.0.0.1:1/x", version="3")
        write_registry_state(tmp_path, state)
        assert read_registry_state(tmp_path) is None

    def test_a_live_pid_of_another_program_reads_as_none(self, tmp_path: Path) -> None:
        state = RegistryState(pid=os.getpid(), url="http://127.0.0.1:1/x", version="3")
        write_registry_state(tmp_path, state)
        assert read_registry_state(tmp_path) is None  # pytest is no registry

    def test_garbage_reads_as_none(self, tmp_path: Path) -> None:
        (tmp_path / REGISTRY_STATE_FILE).write_text("{not json")
        assert read_registry_state(tmp_path) is None
        (tmp_path / REGISTRY_STATE_FILE).write_text(json.dumps({"pid": 1}))
        assert read_registry_state(tmp_path) is None


class TestDistribution:
    """The pom pins the version; a pom without it is one clear error."""

    def test_the_pinned_version(self) -> None:
        assert registry_version() == "3.0.9"

    def test_a_pom_without_the_version(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        pom = tmp_path / "pom.xml"
        pom.write_text("<project/>")
        monkeypatch.setenv(distribution.POM_ENV, str(pom))
        with pytest.raises(LocalKafkaError, match=r"apicurio\.version"):
            registry_version()


class TestRegistryParser:
    """`codec-kafka registry` takes resolve, start and stop."""

    @pytest.mark.parametrize("action", ["resolve", "start", "stop"])
    def test_actions(self, action: str) -> None:
        args = build_parser().parse_args(["registry", action])
        assert (args.command, args.action) == ("registry", action)

    def test_a_bad_port_is_a_usage_error(self) -> None:
        with pytest.raises(SystemExit) as exit_info:
            build_parser().parse_args(["registry", "start", "--port", "70000"])
        assert exit_info.value.code == 2
