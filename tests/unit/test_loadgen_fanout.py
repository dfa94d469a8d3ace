"""One producer writing the same messages to several topics (`loadgen.fanout`)."""

from __future__ import annotations

from typing import Any

import pytest

from loadgen.fanout.writer import fanout_sender, targets_of
from loadgen.producer import ProducerLoop
from loadgen.report import Tick
from loadgen.source import synthetic_source
from schemas.errors import ConfigError
from tests.unit.test_loadgen_loop import FakeProducer, FakeTime, settings


def fan_out(also: list[str], **producer: Any) -> FakeProducer:
    s = settings(rate=2_000, duration=1.0, topic="a", codec="json+pydantic")
    targets = targets_of(s, also)
    sources = [synthetic_source(t) for t in targets]
    fake_time = FakeTime()
    made: list[FakeProducer] = []

    def factory(conf: dict[str, Any]) -> FakeProducer:
        made.append(FakeProducer(conf, fake_time, **producer))
        return made[0]

    pairs = [(t.topic, src) for t, src in zip(targets, sources, strict=True)]
    ticks: list[Tick] = []
    loop = ProducerLoop(
        s,
        sources[0],
        0,
        ticks.append,
        clock=fake_time.clock(),
        producer_factory=factory,
        sender_factory=fanout_sender(pairs, lambda t: made[0].poll(t)),
    )
    loop.warm_up()
    loop.run(fake_time.wall_ns() + 100_000_000, lambda: False)
    loop.close()
    return made[0]


class TestFanout:
    """Every topic gets every seq, with the same stamps, in its own wire format."""

    def test_same_messages_on_every_topic(self) -> None:
        fake = fan_out(["b=msgspec-msgpack", "c=protobuf"])
        by_topic: dict[str, list[tuple[bytes, bytes]]] = {"a": [], "b": [], "c": []}
        types: dict[str, set[bytes]] = {"a": set(), "b": set(), "c": set()}
        for m in fake.sent:
            h = dict(m["headers"])
            by_topic[m["topic"]].append((h["x-seq"], h["x-sent-ns"]))
            types[m["topic"]].add(h["content-type"])
        assert len(by_topic["a"]) == 2_000
        assert by_topic["a"] == by_topic["b"] == by_topic["c"]
        assert types == {
            "a": {b"application/json"},
            "b": {b"application/vnd.msgpack"},
            "c": {b"application/x-protobuf"},
        }

    def test_full_queue_loses_no_topic(self) -> None:
        fake = fan_out(["b=msgspec-msgpack"], capacity=1)
        seqs = {
            t: [dict(m["headers"])["x-seq"] for m in fake.sent if m["topic"] == t]
            for t in ("a", "b")
        }
        assert seqs["a"] == seqs["b"] and len(seqs["a"]) == 2_000

    @pytest.mark.parametrize(
        ("also", "needle"), [(["b"], "TOPIC=CODEC"), (["b=auto"], "TOPIC=CODEC")]
    )
    def test_bad_target(self, also: list[str], needle: str) -> None:
        with pytest.raises(ConfigError, match=needle):
            targets_of(settings(), also)
