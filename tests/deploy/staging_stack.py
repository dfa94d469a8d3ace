"""Live sides for `codec-ab staging`: real workers on one topic, a real Prometheus.

Used by tests/integration/test_staging.py. One `codec-loadgen` writes JSON (msgspec-json
encoding, the `medium` profile) to one topic at `RATE`; each side is a consumer group
of `codec-worker` processes with its own codec (the staging-ab topology: one topic,
a group per side, so every side decodes the same messages); Debian's `prometheus`
runs deploy/prometheus/prometheus.yml with only its targets changed (each side's
workers one static config labelled `side`, as the shipped config labels worker-a and
worker-b) and 1 s intervals. The processes get the environment docker-compose.yml
gives worker-a and loadgen-a, with addresses, topic, group and codec overridden.
"""

from __future__ import annotations

import contextlib
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from confluent_kafka import KafkaException

from localkafka import create_topic, delete_topic
from service.lifecycle.child_processes import free_ports
from tests.deploy.prometheus_stack import (
    INTERVAL,
    _base_env,
    _console_script,
    _Process,
    api,
    get,
)
from tests.deploy.support import (
    PROMETHEUS_CONFIG,
    PROMETHEUS_DIR,
    compose_services,
    load_yaml,
    service_env,
)

RATE: Final = 3000
"""Messages per second: low enough for six workers on a shared 2-core machine, high
enough for the decode to outweigh what a worker costs per second when idle."""
SCHEMA: Final = "medium"
WIRE: Final = "msgspec-json"
"""The topic's encoding: JSON, which json+pydantic and msgspec-json both read."""


@dataclass
class Worker:
    """One worker process of a side, restartable on the same port."""

    name: str
    port: int
    env: dict[str, str]
    logs: Path
    process: _Process | None = None

    def start(self) -> None:
        cmd = _console_script("codec-worker")
        self.process = _Process.start(self.name, cmd, self.env, self.logs)

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.popen.pid


@dataclass
class Stack:
    """The running sides and Prometheus."""

    prometheus: str
    sides: dict[str, list[Worker]]
    others: list[_Process] = field(default_factory=list)
    topic: str = ""
    loadgen_port: int = 0

    def processes(self) -> list[_Process]:
        workers = [w.process for ws in self.sides.values() for w in ws]
        return [p for p in [*workers, *self.others] if p is not None]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = api(self.prometheus, "query", query=expr)
        result: list[dict[str, Any]] = data["result"]
        return result

    def wait(self, what: str, check: Any, timeout: float = 60) -> None:
        """Poll `check` until truthy; fail with the logs' tails after `timeout`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for process in self.processes():
                process.check_alive()
            with contextlib.suppress(OSError, AssertionError, ValueError):
                if check():
                    return
            time.sleep(0.5)
        logs = "\n".join(f"--- {p.name}:\n{p.tail(10)}" for p in self.processes())
        pytest.fail(f"timed out waiting for {what}\n{logs}")


def config(sides: Mapping[str, list[int]], loadgen: int, own: int) -> dict[str, Any]:
    """The shipped scrape config with these targets and 1 s intervals."""
    shipped: dict[str, Any] = load_yaml(PROMETHEUS_CONFIG)
    shipped["global"].update(
        scrape_interval=INTERVAL, scrape_timeout=INTERVAL, evaluation_interval=INTERVAL
    )
    shipped["rule_files"] = [str(PROMETHEUS_DIR / "rules" / "*.yml")]
    for job in shipped["scrape_configs"]:
        name = job["job_name"]
        first = job["static_configs"][0].get("labels", {})
        if name == "codec-worker":
            assert {c["labels"]["side"] for c in job["static_configs"]} == {"A", "B"}
            job["static_configs"] = [
                {"targets": [f"127.0.0.1:{p}" for p in ports], "labels": {"side": s}}
                for s, ports in sides.items()
            ]
        elif name == "codec-loadgen":
            job["static_configs"] = [
                {"targets": [f"127.0.0.1:{loadgen}"], "labels": first}
            ]
        elif name == "prometheus":
            job["static_configs"] = [{"targets": [f"127.0.0.1:{own}"]}]
        else:
            pytest.fail(f"scrape job {name!r} is new: give it a target in this test")
    return shipped


def loadgen_env(
    bootstrap: str, topic: str, rate: float, duration: float, port: int
) -> dict[str, str]:
    """The environment compose gives loadgen-a, for `topic` at `rate` msg/s."""
    env = _base_env() | service_env(compose_services()["loadgen-a"])
    env.update(
        KAFKA_BOOTSTRAP_SERVERS=bootstrap,
        LOADGEN_TOPIC=topic,
        LOADGEN_CODEC=WIRE,
        LOADGEN_PROFILE=SCHEMA,
        LOADGEN_RATE=f"{rate:g}",
        LOADGEN_DURATION=f"{duration:g}",
        LOADGEN_METRICS_HOST="127.0.0.1",
        LOADGEN_METRICS_PORT=str(port),
    )
    return env


@contextlib.contextmanager
def running(
    bootstrap: str,
    tmp: Path,
    sides: Mapping[str, tuple[str, int]],
    *,
    partitions: int = 2,
    load: bool = True,
) -> Iterator[Stack]:
    """Sides (name -> (codec, worker processes)) on one topic, scraped; stopped on exit.

    With `load` False no load generator runs: the caller starts one
    (`loadgen_env`, port `Stack.loadgen_port`, topic `Stack.topic`), and the stack
    is ready once every worker is scraped and the groups hold every partition."""
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        pytest.fail(
            "the prometheus binary is missing: run scripts/install-system-deps.sh"
        )
    topic = f"staging-{uuid.uuid4().hex[:10]}"
    services = compose_services()
    count = sum(n for _, n in sides.values())
    ports = free_ports(count + 2)
    stack = Stack(f"http://127.0.0.1:{ports[-1]}", {})
    try:
        create_topic(bootstrap, topic, partitions)
        stack.topic = topic
        create_topic(bootstrap, f"{topic}.dlq", 1)
        at = 0
        for name, (codec, n) in sides.items():
            stack.sides[name] = []
            for k in range(n):
                env = _base_env() | service_env(services["worker-a"])
                env.update(
                    KAFKA_BOOTSTRAP_SERVERS=bootstrap,
                    WORKER_CONSUMER__TOPIC=topic,
                    WORKER_CONSUMER__GROUP_ID=f"{topic}-{name}",
                    WORKER_CONSUMER__CLIENT_ID=f"worker-{name}-{k}",
                    WORKER_CODEC__NAME=codec,
                    WORKER_CODEC__SCHEMA=SCHEMA,
                    WORKER_PROCESSING__DLQ_TOPIC=f"{topic}.dlq",
                    WORKER_METRICS__HOST="127.0.0.1",
                    WORKER_METRICS__PORT=str(ports[at]),
                    WORKER_LOGGING__LEVEL="warning",
                )
                worker = Worker(f"worker-{name}-{k}", ports[at], env, tmp)
                worker.start()
                stack.sides[name].append(worker)
                at += 1
        stack.loadgen_port = ports[at]
        if load:
            env = loadgen_env(bootstrap, topic, RATE, 900, ports[at])
            stack.others.append(
                _Process.start("loadgen", _console_script("codec-loadgen"), env, tmp)
            )
        targets = {n: [w.port for w in ws] for n, ws in stack.sides.items()}
        (tmp / "prometheus.yml").write_text(
            yaml.safe_dump(config(targets, ports[at], ports[-1]))
        )
        stack.others.append(
            _Process.start(
                "prometheus",
                [
                    prometheus,
                    f"--config.file={tmp / 'prometheus.yml'}",
                    f"--storage.tsdb.path={tmp / 'data'}",
                    f"--web.listen-address=127.0.0.1:{ports[-1]}",
                    "--log.level=warn",
                ],
                _base_env(),
                tmp,
            )
        )
        stack.wait("Prometheus ready", lambda: get(f"{stack.prometheus}/-/ready"))
        if load:
            stack.wait(
                "every worker scraped, handling messages",
                lambda: (
                    len(stack.query("rate(worker_messages_total[5s]) > 0")) == count
                ),
            )
        else:
            assigned = "sum by (side) (worker_assigned_partitions)"
            stack.wait(
                "every worker scraped, every partition assigned",
                lambda: (
                    len(stack.query('up{job="codec-worker"} == 1')) == count
                    and [float(r["value"][1]) for r in stack.query(assigned)]
                    == [partitions] * len(sides)
                ),
                timeout=120,
            )
        yield stack
    finally:
        for worker in (w for ws in stack.sides.values() for w in ws):
            worker.stop()
        for process in reversed(stack.others):
            process.stop()
        for name in (topic, f"{topic}.dlq"):
            with contextlib.suppress(KafkaException, TimeoutError):
                delete_topic(bootstrap, name, timeout=15)
