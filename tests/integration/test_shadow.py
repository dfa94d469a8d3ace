"""The shadow decode against a real broker: a lax model live, msgspec-json in its shadow."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import KafkaException

from abrunner.lab import worker_probe
from localkafka import delete_topic
from tests.support import Record, WorkerProcess, consume_all, produce

TopicFactory = Callable[..., str]

LAX = "tests.fixtures.usermodels.lax:Model"
SHADOW_ARGS = (
    *("--codec", "json+pydantic", "--schema", LAX, "--logic", "noop"),
    *("--shadow-codec", "msgspec-json", "--shadow-sample-every", "1"),
)
PAIR = {"codec": "json+pydantic", "shadow": "msgspec-json"}
OUTCOMES = ("agree", "differ", "shadow_rejected", "primary_rejected")


def lax_stream(count: int, lax_every: int) -> list[Record]:
    """`count` JSON messages; every `lax_every`-th has its int as a string ("42")."""
    out = []
    for seq in range(count):
        lax_only = seq % lax_every == 0
        body = {"id": str(seq) if lax_only else seq, "name": f"n{seq}", "amount": 1.5}
        out.append(
            {
                "key": f"{'lax' if lax_only else 'ok'}-{seq}".encode(),
                "value": json.dumps(body).encode(),
                "headers": [("x-seq", str(seq).encode())],
            }
        )
    return out


def shadow_outcomes(w: WorkerProcess, total: int) -> dict[str, float]:
    """The worker's shadow outcomes once they add up to `total` (60 s at most)."""
    deadline = time.monotonic() + 60
    found: dict[str, float] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):  # /metrics not answering yet
            scraped = worker_probe.scrape(w.port, timeout=2)
            found = {
                o: scraped.total("worker_shadow_total", **PAIR, outcome=o)
                for o in OUTCOMES
            }
            if sum(found.values()) >= total:
                break
        time.sleep(0.2)
    return found


class TestShadowSwitch:
    """Only what the lax model alone accepts is shadow_rejected, sampled to <topic>.shadow."""

    def test_lax_only_messages(
        self, kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
    ) -> None:
        topic = topic_factory(2)
        stream = lax_stream(60, lax_every=10)
        lax_keys = {r["key"] for r in stream if r["key"].startswith(b"lax-")}
        n = produce(kafka_bootstrap, topic, stream)
        log = tmp_path / "worker.log"
        try:
            args = (*SHADOW_ARGS, "--create-topics")
            with WorkerProcess(kafka_bootstrap, topic, *args, log=log) as w:
                assert w.wait_for(n) == n  # the live path handles every message
                assert shadow_outcomes(w, n) == {
                    "agree": n - len(lax_keys),
                    "differ": 0,
                    "shadow_rejected": len(lax_keys),
                    "primary_rejected": 0,
                }
                assert w.messages("decode_error") == 0
                samples = consume_all(kafka_bootstrap, f"{topic}.shadow", len(lax_keys))
                assert w.stop() == 0
        finally:
            for extra in (f"{topic}.dlq", f"{topic}.shadow"):
                with contextlib.suppress(KafkaException, TimeoutError):
                    delete_topic(kafka_bootstrap, extra, timeout=15)
        assert {m.key() for m in samples} == lax_keys
        by_key = {r["key"]: r["value"] for r in stream}
        for m in samples:
            assert m.value() == by_key[m.key()]  # the bytes as consumed
            headers = dict(m.headers() or ())
            assert headers["x-seq"] == m.key().split(b"-")[1]
            assert headers["x-shadow-codec"] == b"msgspec-json"
            assert headers["x-shadow-primary"] == b"json+pydantic"
            assert headers["x-shadow-outcome"] == b"shadow_rejected"
            assert headers["x-shadow-error-type"] == b"msgspec.ValidationError"
            assert headers["x-shadow-topic"] == topic.encode()

    def test_a_missing_shadow_topic_exits_2(
        self, kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
    ) -> None:
        topic = topic_factory(1)
        dlq = topic_factory(1, prefix="dlq")
        log = tmp_path / "worker.log"
        w = WorkerProcess(
            kafka_bootstrap, topic, *SHADOW_ARGS, "--dlq-topic", dlq, log=log
        )
        with w:
            assert w.proc is not None
            assert w.proc.wait(60) == 2
        shadow = f"{topic}.shadow"
        assert log.read_text().splitlines() == [
            f"config error: no topic {shadow!r} (shadow samples, --shadow-codec) on "
            f"{kafka_bootstrap}: create it with `codec-kafka topics create {shadow} "
            f"--partitions 4 --bootstrap-servers {kafka_bootstrap}`, or start with "
            "--create-topics"
        ]
