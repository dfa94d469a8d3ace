"""Exactly-once on the real broker: a team's handler, its results and dead letters
read back with read_committed, each input exactly once; an async handler's too,
though its messages finish out of order (`--ordering none`)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from codec import get_codec
from loadgen.payloads import make_payloads
from tests.support import Record, WorkerProcess, consume_all, produce

COUNT = 300


@pytest.mark.parametrize(
    "logic",
    [
        ("--logic", "tests.fixtures.handlers.basics:refuse_gifts"),
        (
            *("--logic", "tests.fixtures.handlers.async_orders:refuse_gifts"),
            *("--ordering", "none", "--max-in-flight", "50"),
        ),
    ],
    ids=["sync", "async"],
)
def test_results_and_dead_letters_exactly_once(
    kafka_bootstrap: str,
    topic_factory: Callable[..., str],
    tmp_path: Path,
    logic: tuple[str, ...],
) -> None:
    codec = get_codec("msgspec-json", "medium")
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
        *logic,
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
    dead = Counter(m.key() for m in letters)
    assert set(dead) == gifts, "dead letters missing"
    assert max(dead.values()) == 1, "a duplicate dead letter"
