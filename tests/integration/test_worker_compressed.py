"""A compressed batch librdkafka cannot inflate, on a real broker: dead-lettered as
an unreadable range, and the partition goes on (librdkafka alone fetches the same
offset for ever)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from tests.integration.test_worker import dlq_args, json_lines, records
from tests.support import WorkerProcess, consume_all, produce

BOMB = b"\0" * (90 << 20)
"""Inflates to 90 MB from ~3 KB of zstd: past the worker's 32 MiB
`receive_message_max_bytes` (and librdkafka's buffer-growth steps)."""


def test_a_zstd_bomb_is_dead_lettered_and_passed(
    kafka_bootstrap: str, topic_factory: Any, tmp_path: Path
) -> None:
    topic = topic_factory(1)
    good = records("msgspec-msgpack", "medium", 20)
    produce(kafka_bootstrap, topic, good[:10])
    bomb = Producer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "compression.type": "zstd",
            "message.max.bytes": 200 << 20,
        }
    )
    bomb.produce(topic, value=BOMB, key=b"bomb")
    assert bomb.flush(30) == 0
    produce(kafka_bootstrap, topic, good[10:])
    dlq = dlq_args(topic_factory)
    log = tmp_path / "worker.log"
    args = ("--codec", "msgspec-msgpack", *dlq)
    with WorkerProcess(kafka_bootstrap, topic, *args, log=log) as w:
        assert w.wait_for(20) == 20  # the 10 behind the bomb too
        [letter] = consume_all(kafka_bootstrap, dlq[1], 1)
        assert w.stop() == 0
    headers = dict(letter.headers())
    assert headers["x-dlq-reason"] == b"unreadable"
    assert headers["x-dlq-exception-type"].endswith(b"_BAD_COMPRESSION")
    assert (headers["x-dlq-offset"], headers["x-dlq-last-offset"]) == (b"10", b"10")
    assert letter.value() is None
    lines = [x for x in json_lines(log) if x.get("event") == "consumer_error"]
    assert len(lines) == 1, lines  # at most one per code every 30 s
    assert "Traceback" not in log.read_text()
