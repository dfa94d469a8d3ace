"""A team's async handler on the real broker, exactly-once: every input's result or
dead letter read back with read_committed, each exactly once, though the handlers
finish out of order (`--ordering none`). At-least-once on a real broker, kills and
rebalances included, is the fault suite's (`make faults`, A1-A4)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from codec import get_codec
from loadgen.payloads import make_payloads
from tests.support import Record, WorkerProcess, consume_all, produce

COUNT = 300


def test_an_async_handler_is_awaited_and_its_writes_committed(
    kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path
) -> None:
    codec = get_codec("msgspec-msgpack", "medium")
    payloads = make_payloads("medium", COUNT, seed=13)
    records: list[Record] = [
        {
            "key": str(i).encode(),
            "value": codec.encode(codec.from_builtins(p)),
            "headers": [("x-sent-ns", str(time.time_ns()).encode())],
        }
        for i, p in enumerate(payloads)
    ]
    gifts = {str(i).encode() for i, p in enumerate(payloads) if p["gift"]}
    topic = topic_factory(2)
    out, dlq = topic_factory(2, prefix="out"), topic_factory(2, prefix="dlq")
    produce(kafka_bootstrap, topic, records)
    args = (
        *("--codec", codec.name, "--processing-guarantee", "exactly-once"),
        *("--logic", "tests.fixtures.handlers.async_orders:refuse_gifts"),
        *("--ordering", "none", "--max-in-flight", "50"),
        *("--output-topic", out, "--dlq-topic", dlq, "--max-attempts", "1"),
    )
    with WorkerProcess(kafka_bootstrap, topic, *args, log=tmp_path / "w.log") as w:
        assert w.wait_for(COUNT - len(gifts)) == COUNT - len(gifts)
        assert w.wait_for(len(gifts), "logic_error") == len(gifts)
        assert w.stop() == 0
    results = consume_all(kafka_bootstrap, out, COUNT - len(gifts), committed=True)
    letters = consume_all(kafka_bootstrap, dlq, len(gifts), committed=True)
    seen = Counter(m.key() for m in results)
    assert set(seen) == {r["key"] for r in records} - gifts, "results missing"
    assert max(seen.values()) == 1, "a duplicate result"
    assert set(Counter(m.key() for m in letters)) == gifts, "dead letters missing"
    assert "coroutine" not in (tmp_path / "w.log").read_text()
