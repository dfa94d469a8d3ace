"""Helpers for tests against a real broker: produce, consume, run a worker process."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer

Record = dict[str, Any]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def produce(bootstrap: str, topic: str, records: Iterable[Record]) -> int:
    """Produce records (`value`, `key`, `headers`, `partition`); wait for all acks."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "message.max.bytes": 16_000_000,
        }
    )
    errors: list[Any] = []
    count = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for record in records:
        producer.produce(topic, on_delivery=on_delivery, **record)
        producer.poll(0)
        count += 1
    assert producer.flush(30) == 0
    assert not errors, errors
    return count


def consume_all(
    bootstrap: str, topic: str, count: int, timeout: float = 60
) -> list[Any]:
    """Read `count` messages of `topic` from the beginning (fresh group)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            out += [m for m in consumer.consume(500, 0.5) if m.error() is None]
        # Anything beyond `count` would be a duplicate: give it a moment to show.
        extra_deadline = time.monotonic() + 1.0
        while time.monotonic() < extra_deadline:
            out += [m for m in consumer.consume(500, 0.2) if m.error() is None]
    finally:
        consumer.close()
    return out


class WorkerProcess:
    """`codec-worker` as a subprocess with a known metrics port."""

    def __init__(self, bootstrap: str, topic: str, *args: str, group: str | None = None,
                 log: Path | None = None) -> None:  # fmt: skip
        self.port = free_port()
        self.group = group or f"g-{uuid.uuid4().hex[:8]}"
        self.cmd: Sequence[str] = [
            sys.executable, "-m", "service", "--bootstrap-servers", bootstrap,
            "--topic", topic, "--group", self.group, "--metrics-port", str(self.port),
            "--batch-timeout-ms", "20", "--latency-sample-every", "1", *args,
        ]  # fmt: skip
        self._log = log
        self._out: Any = None
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerProcess:
        self._out = open(self._log, "ab") if self._log else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(
            self.cmd, stdout=self._out, stderr=subprocess.STDOUT
        )
        return self

    def metrics(self) -> dict[str, float]:
        """The worker's /metrics as {'name{labels}': value} (empty if not up yet)."""
        try:
            url = f"http://127.0.0.1:{self.port}/metrics"
            with urllib.request.urlopen(url, timeout=2) as response:
                text = response.read().decode()
        except OSError:
            return {}
        samples = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                samples[name] = float(value)
        return samples

    def messages(self, outcome: str = "ok") -> int:
        for name, value in self.metrics().items():
            if (
                name.startswith("worker_messages_total{")
                and f'outcome="{outcome}"' in name
            ):
                return int(value)
        return 0

    def wait_for(self, count: int, outcome: str = "ok", timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            assert self.proc is not None and self.proc.poll() is None, "worker exited"
            seen = self.messages(outcome)
            if seen >= count:
                return seen
            time.sleep(0.2)
        raise AssertionError(
            f"worker handled {seen} {outcome} messages, wanted {count}"
        )

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def __enter__(self) -> WorkerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        if self._out not in (None, subprocess.DEVNULL):
            self._out.close()
            self._out = None
