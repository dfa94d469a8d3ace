"""The worker against a real broker under hostile inputs and events: headers any
producer may send, a stalled loop, the control plane under abuse."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_worker import dlq_args, records
from tests.support import WorkerProcess, produce

HOSTILE_SENT_NS = (
    b"abc",
    b"",
    b"1.7e18",
    b"\xff\xfe\x00",
    b"9" * 5000,
    b"-5",
    b"99999999999999999999",  # 20 digits: centuries ahead
    str(time.time_ns() + 3600 * 10**9).encode(),  # an hour ahead: clock skew
    b"0",
    b"1700000000",  # seconds, not ns: 1970 plus 1.7 s
)


def test_hostile_sent_ns_never_stops_the_worker(
    kafka_bootstrap: str, topic_factory: Any, tmp_path: Path
) -> None:
    """Every hostile `x-sent-ns` is handled as a message, counted as an invalid
    latency with its reason, and never observed in the latency histogram."""
    topic = topic_factory(1)
    good = records("msgspec-msgpack", "medium", 40)
    hostile = []
    for i, rec in enumerate(good[: len(HOSTILE_SENT_NS)]):
        headers = [(k, v) for k, v in rec["headers"] if k != "x-sent-ns"]
        hostile.append(
            {**rec, "headers": [("x-sent-ns", HOSTILE_SENT_NS[i]), *headers]}
        )
    produce(kafka_bootstrap, topic, [*hostile, *good[len(HOSTILE_SENT_NS) :]])
    args = ("--codec", "msgspec-msgpack", *dlq_args(topic_factory))
    with WorkerProcess(kafka_bootstrap, topic, *args, log=tmp_path / "worker.log") as w:
        assert w.wait_for(40) == 40
        metrics = w.metrics()
        invalid = {
            k: v
            for k, v in metrics.items()
            if k.startswith("worker_e2e_latency_invalid_total{")
        }
        by_reason = {
            reason: sum(v for k, v in invalid.items() if f'reason="{reason}"' in k)
            for reason in ("unparsable", "negative", "too_large")
        }
        assert by_reason == {"unparsable": 7, "negative": 2, "too_large": 1}
        count = metrics['worker_e2e_latency_seconds_count{codec="msgspec-msgpack"}']
        total = metrics['worker_e2e_latency_seconds_sum{codec="msgspec-msgpack"}']
        assert count == 40 - len(HOSTILE_SENT_NS)
        assert 0 <= total < count * 3600
        assert w.stop() == 0
    assert "Traceback" not in (tmp_path / "worker.log").read_text()


def test_two_sigints_exit_at_once_without_traceback(
    kafka_bootstrap: str, topic_factory: Any, tmp_path: Path
) -> None:
    """A second SIGINT while the first one's shutdown runs: exit 130 at once, one
    line, no `KeyboardInterrupt` traceback."""
    topic = topic_factory(2)
    produce(kafka_bootstrap, topic, records("msgspec-msgpack", "medium", 50))
    log = tmp_path / "worker.log"
    args = ("--codec", "msgspec-msgpack", *dlq_args(topic_factory))
    with WorkerProcess(kafka_bootstrap, topic, *args, log=log) as w:
        w.wait_for(50)
        assert w.proc is not None
        w.proc.send_signal(signal.SIGINT)
        time.sleep(0.2)  # two signals before the handler runs would count as one
        if w.proc.poll() is None:
            w.proc.send_signal(signal.SIGINT)
        code = w.proc.wait(30)
    text = log.read_text()
    assert code in (0, 130), text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text


@pytest.mark.parametrize("after_s", [0.2, 0.6, 1.2])
def test_sigterm_during_start_up(
    kafka_bootstrap: str, topic_factory: Any, tmp_path: Path, after_s: float
) -> None:
    """SIGTERM while the worker imports, builds or joins its group: exit 0, never
    killed by the signal (-15), never a traceback."""
    topic = topic_factory(1)
    log = tmp_path / "worker.log"
    args = ("--codec", "msgspec-msgpack", *dlq_args(topic_factory))
    with WorkerProcess(kafka_bootstrap, topic, *args, log=log) as w:
        time.sleep(after_s)
        assert w.proc is not None
        w.proc.send_signal(signal.SIGTERM)
        code = w.proc.wait(60)
    text = log.read_text()
    assert code == 0, text
    assert "Traceback" not in text


def _add_partitions(bootstrap: str, topic: str, total: int) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_partitions([NewPartitions(topic, total)]).values():
        future.result(30)


@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_added_partitions_are_read_from_their_start(
    kafka_bootstrap: str, topic_factory: Any, tmp_path: Path, reset: str
) -> None:
    """Partitions added while the group runs are assigned within seconds (the
    metadata refresh, 10 s, not librdkafka's 300 s), and what was written to them
    before that assignment is handled, with `earliest` and with `latest`."""
    topic = topic_factory(2)
    args = ("--codec", "msgspec-msgpack", "--auto-offset-reset", reset)
    with WorkerProcess(
        kafka_bootstrap, topic, *args, *dlq_args(topic_factory), log=tmp_path / "w.log"
    ) as w:
        w.wait_ready()
        produce(kafka_bootstrap, topic, records("msgspec-msgpack", "medium", 40))
        assert w.wait_for(40) == 40
        _add_partitions(kafka_bootstrap, topic, 6)
        added = records("msgspec-msgpack", "medium", 200, start=40)
        for i, rec in enumerate(added):
            rec["partition"] = 2 + i % 4
        produce(kafka_bootstrap, topic, added)  # before any rebalance gives them owners
        assert w.wait_for(240, timeout=90) == 240
        assert w.stop() == 0
    assert "Traceback" not in (tmp_path / "w.log").read_text()
