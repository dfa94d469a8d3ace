"""A real Prometheus scraping a live worker and load generator: the stack of the checks.

Used by tests/integration/test_prometheus.py. The stack: the test's broker;
`codec-loadgen` writing a topic at a low rate; a `codec-worker` reading it (plus one
poison message, so dead letters appear); Debian's `prometheus` binary with
deploy/prometheus/prometheus.yml, its targets rewritten to 127.0.0.1 and its intervals
to 1 s, and the shipped rule files unchanged. The worker and the load generator get the
environment docker-compose.yml gives worker-a and loadgen-a, with only addresses,
topics and the rate overridden. Dashboard variables are resolved as Grafana resolves
them (`resolve_variables`, `substitute`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final, Protocol, TypeVar

import pytest
import yaml
from confluent_kafka import KafkaException, Producer

from localkafka import create_topic, delete_topic
from service.lifecycle.child_processes import free_ports
from tests.deploy.support import (
    LABEL_VALUES,
    PROMETHEUS_CONFIG,
    PROMETHEUS_DIR,
    compose_services,
    load_yaml,
    service_env,
    template_variables,
    variable_query,
)

CODEC: Final = "json+pydantic"
"""A codec whose name has a regex operator (`+`): Grafana's escaping is exercised."""
SCHEMA: Final = "small"
RATE: Final = 200
"""Messages per second from the load generator: enough for every rate() to move."""
INTERVAL: Final = "1s"
"""Scrape and rule-evaluation interval of the test's Prometheus."""

T = TypeVar("T")


def get(url: str, timeout: float = 5.0) -> bytes:
    """The body of an HTTP GET (the stack's addresses are all 127.0.0.1)."""
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (http://127.0.0.1 only)
        body: bytes = response.read()
        return body


def api(base: str, path: str, **params: str) -> Any:
    """GET a Prometheus HTTP API endpoint; return its `data` (fails on an error)."""
    url = f"{base}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    try:
        answer = json.loads(get(url, timeout=10))
    except urllib.error.HTTPError as exc:  # 400/422: a bad query; the body says why
        answer = json.loads(exc.read() or b"{}")
        exc.close()
    if answer.get("status") != "success":
        raise AssertionError(f"{path} {params}: {answer}")
    return answer["data"]


def instant_query(base: str, expr: str) -> list[dict[str, Any]]:
    """An instant query's samples (a scalar becomes one unlabelled sample)."""
    data = api(base, "query", query=expr)
    if data["resultType"] == "scalar":
        return [{"metric": {}, "value": data["result"]}]
    result: list[dict[str, Any]] = data["result"]
    return result


@dataclass
class _Process:
    """A child process whose output goes to a log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    log: IO[bytes] = field(repr=False)

    @classmethod
    def start(
        cls, name: str, cmd: list[str], env: Mapping[str, str], logs: Path
    ) -> _Process:
        log_path = logs / f"{name}.log"
        log = open(log_path, "wb")  # noqa: SIM115 (closed in stop())
        popen = subprocess.Popen(
            cmd, env=dict(env), stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
        return cls(name, popen, log_path, log)

    def check_alive(self) -> None:
        """Fail the test with the log tail if the process has exited."""
        if (code := self.popen.poll()) is not None:
            pytest.fail(f"{self.name} exited with {code}:\n{self.tail()}")

    def tail(self, lines: int = 30) -> str:
        """The last lines of the process's output."""
        self.log.flush()
        text = self.log_path.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM, then SIGKILL; always closes the log."""
        try:
            if self.popen.poll() is None:
                self.popen.terminate()
                try:
                    self.popen.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.popen.kill()
                    self.popen.wait(10)
        finally:
            self.log.close()


@dataclass(frozen=True)
class Stack:
    """Addresses of the running stack."""

    prometheus: str
    worker_metrics: str
    loadgen_metrics: str
    processes: tuple[_Process, ...]

    def wait(self, what: str, check: Callable[[], T | None], timeout: float = 45) -> T:
        """Poll `check` until it returns something truthy; fail after `timeout` s."""
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            for process in self.processes:
                process.check_alive()
            try:
                if value := check():
                    return value
            except (OSError, AssertionError, ValueError) as exc:
                last = exc
            time.sleep(0.5)
        logs = "\n".join(f"--- {p.name}:\n{p.tail(15)}" for p in self.processes)
        pytest.fail(
            f"timed out after {timeout:.0f}s waiting for {what} (last: {last})\n{logs}"
        )

    def poll(self, check: Callable[[], object], timeout: float) -> bool:
        """Poll `check` until it returns something truthy; False after `timeout` s."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for process in self.processes:
                process.check_alive()
            if check():
                return True
            time.sleep(0.5)
        return False

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's samples (a scalar becomes one unlabelled sample)."""
        return instant_query(self.prometheus, expr)


def _console_script(name: str) -> list[str]:
    script = shutil.which(name, path=str(Path(sys.executable).parent))
    if script is None:
        pytest.fail(f"console script {name} not installed (make setup)")
    return [script]


def _base_env() -> dict[str, str]:
    return {
        k: v for k, v in os.environ.items() if not k.startswith(("WORKER_", "LOADGEN_"))
    }


def prometheus_config(targets: Mapping[str, str]) -> dict[str, Any]:
    """The shipped scrape config with `targets` (job -> host:port) and 1 s intervals.

    Each job keeps the labels of its first static config; the rule files are the
    shipped ones, by absolute path.
    """
    config: dict[str, Any] = load_yaml(PROMETHEUS_CONFIG)
    config["global"].update(
        scrape_interval=INTERVAL, scrape_timeout=INTERVAL, evaluation_interval=INTERVAL
    )
    config["rule_files"] = [str(PROMETHEUS_DIR / "rules" / "*.yml")]
    for job in config["scrape_configs"]:
        name = job["job_name"]
        if name not in targets:
            pytest.fail(f"scrape job {name!r} is new: give it a target in this test")
        labels = job["static_configs"][0].get("labels", {})
        job["static_configs"] = [{"targets": [targets[name]], "labels": labels}]
    return config


def _grafana_regex(values: list[str]) -> str:
    """A multi-value variable as Grafana writes it into a Prometheus regex matcher.

    Each value's regex operators are escaped with a backslash that is itself escaped
    for the PromQL string (Grafana's prometheusSpecialRegexEscape); several values
    become an alternation.
    """
    escaped = [
        re.sub(
            r"[$^*{}\[\]'+?.()|]",
            lambda m: "\\\\" + m.group(0),
            v.replace("\\", "\\\\\\\\"),
        )
        for v in values
    ]
    return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"


def substitute(text: str, values: Mapping[str, str]) -> str:
    """`text` with Grafana's variables replaced by `values` and intervals by 1m."""
    text = re.sub(r"\$__(rate_interval|interval|range)\b", "1m", text)
    return re.sub(
        r"\$\{(\w+)\}|\$(\w+)",
        lambda m: values.get(m.group(1) or m.group(2), m.group(0)),
        text,
    )


class PrometheusAt(Protocol):
    """Anything that names a Prometheus server's base URL (a `Stack`, the compose stack)."""

    @property
    def prometheus(self) -> str: ...


def resolve_variables(
    stack: PrometheusAt, dashboard: Mapping[str, Any]
) -> dict[str, str]:
    """Each query variable set to All of its values, found as Grafana finds them."""
    values: dict[str, str] = {}
    for var in template_variables(dashboard):
        if var["type"] == "datasource":
            continue
        assert var["type"] == "query", f"variable type {var['type']} not handled"
        query = substitute(variable_query(var), values)
        match = LABEL_VALUES.match(query)
        assert match, f"${var['name']}: only label_values() queries are handled"
        series = api(
            stack.prometheus,
            "series",
            **{"match[]": match.group(1), "start": str(time.time() - 300)},
        )
        found = sorted({s[match.group(2)] for s in series if match.group(2) in s})
        assert found, f"${var['name']}: {query} found no values"
        values[var["name"]] = _grafana_regex(found)
    return values


def has_finite_value(samples: list[dict[str, Any]]) -> bool:
    """Whether any sample of a query result is a finite number."""
    return any(math.isfinite(float(s["value"][1])) for s in samples)


@contextlib.contextmanager
def running_stack(bootstrap: str, tmp: Path) -> Iterator[Stack]:
    """Worker, load generator and Prometheus, warmed up; all stopped on exit.

    Args:
        bootstrap: The broker the worker and the load generator use.
        tmp: A directory for Prometheus's config and data and the processes' logs.
    """
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        pytest.fail(
            "the prometheus binary is missing: run scripts/install-system-deps.sh "
            "(make setup does)"
        )
    topic = f"prom-{uuid.uuid4().hex[:12]}"
    dlq = f"{topic}.dlq"
    processes: list[_Process] = []
    try:
        create_topic(bootstrap, topic, 2)
        create_topic(bootstrap, dlq, 1)
        yield _start(prometheus, bootstrap, topic, tmp, processes)
    finally:
        for process in reversed(processes):
            process.stop()
        for name in (topic, dlq):
            with contextlib.suppress(KafkaException, TimeoutError):
                delete_topic(bootstrap, name, timeout=15)


def _start(
    prometheus: str, bootstrap: str, topic: str, tmp: Path, processes: list[_Process]
) -> Stack:
    services = compose_services()
    worker_port, loadgen_port, prom_port = free_ports(3)

    worker_env = _base_env() | service_env(services["worker-a"])
    worker_env.update(
        KAFKA_BOOTSTRAP_SERVERS=bootstrap,
        WORKER_CONSUMER__TOPIC=topic,
        WORKER_CONSUMER__GROUP_ID=f"{topic}-worker",
        WORKER_CODEC__NAME=CODEC,
        WORKER_CODEC__SCHEMA=SCHEMA,
        WORKER_PROCESSING__DLQ_TOPIC=f"{topic}.dlq",
        WORKER_METRICS__HOST="127.0.0.1",
        WORKER_METRICS__PORT=str(worker_port),
        WORKER_LOGGING__LEVEL="warning",
    )
    processes.append(
        _Process.start("worker", _console_script("codec-worker"), worker_env, tmp)
    )
    loadgen_env = _base_env() | service_env(services["loadgen-a"])
    loadgen_env.update(
        KAFKA_BOOTSTRAP_SERVERS=bootstrap,
        LOADGEN_TOPIC=topic,
        LOADGEN_CODEC=CODEC,
        LOADGEN_PROFILE=SCHEMA,
        LOADGEN_RATE=str(RATE),
        LOADGEN_DURATION="600",
        LOADGEN_METRICS_HOST="127.0.0.1",
        LOADGEN_METRICS_PORT=str(loadgen_port),
    )
    processes.append(
        _Process.start("loadgen", _console_script("codec-loadgen"), loadgen_env, tmp)
    )
    config = prometheus_config(
        {
            "codec-worker": f"127.0.0.1:{worker_port}",
            "codec-loadgen": f"127.0.0.1:{loadgen_port}",
            "prometheus": f"127.0.0.1:{prom_port}",
        }
    )
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    processes.append(
        _Process.start(
            "prometheus",
            [
                prometheus,
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
                "--log.level=warn",
            ],
            _base_env(),
            tmp,
        )
    )
    stack = Stack(
        prometheus=f"http://127.0.0.1:{prom_port}",
        worker_metrics=f"http://127.0.0.1:{worker_port}/metrics",
        loadgen_metrics=f"http://127.0.0.1:{loadgen_port}/metrics",
        processes=tuple(processes),
    )
    _warm_up(stack, bootstrap, topic)
    return stack


def _warm_up(stack: Stack, bootstrap: str, topic: str) -> None:
    """Wait for scrapes and traffic; send the poison message; wait for rule results."""
    stack.wait("Prometheus ready", lambda: get(f"{stack.prometheus}/-/ready"))
    stack.wait(
        "every target up",
        lambda: (
            {s["metric"]["job"] for s in stack.query("up == 1")}
            >= {"codec-worker", "codec-loadgen", "prometheus"}
        ),
    )
    # The worker's counters are scraped before the poison arrives, so increase()
    # sees the dead letter and the alert's first-occurrence branch is not the only one.
    stack.wait(
        "messages handled and scraped twice",
        lambda: stack.query(
            'count_over_time(worker_messages_total{outcome="ok"}[1m]) >= 2 '
            'and worker_messages_total{outcome="ok"} > 0'
        ),
    )
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(
        topic, value=b"\xffnot json", headers={"content-type": "application/json"}
    )
    assert producer.flush(15) == 0, "poison message not delivered"
    stack.wait("the dead letter", lambda: stack.query("worker_dead_letters_total > 0"))
    stack.wait(
        "every rule evaluated",
        lambda: all(
            rule["health"] != "unknown"
            for group in api(stack.prometheus, "rules")["groups"]
            for rule in group["rules"]
        ),
    )
