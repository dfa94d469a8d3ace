"""codec-loadgen --framing confluent against a real broker and registry: it registers
the model's schema under the strategy's subject and writes framed values; record and
replay keep the frames byte for byte."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from codec import CodecName, get_codec
from codec.registry import RegistryAccess, RegistryClient, frame_codec
from loadgen.generator import run
from loadgen.payloads import make_payloads
from loadgen.recording import read_recording, record
from tests.integration.test_loadgen import seq_of, settings
from tests.support import consume_all


def _subjects(registry_url: str) -> list[str]:
    with urllib.request.urlopen(f"{registry_url}/subjects", timeout=10) as reply:  # noqa: S310 (loopback)
        return list(json.loads(reply.read()))


@pytest.mark.parametrize(
    ("codec", "strategy"), [("avro", "topic"), ("protobuf", "topic_record")]
)
def test_loadgen_registers_and_writes_framed_values(
    kafka_bootstrap: str,
    registry_url: str,
    topic_factory: Any,
    codec: CodecName,
    strategy: str,
) -> None:
    topic = topic_factory(partitions=2)
    registry = {"url": registry_url, "subject_strategy": strategy}
    s = settings(
        kafka_bootstrap,
        topic,
        codec=codec,
        framing="confluent",
        registry=registry,
        rate=2000,
        count=200,
        pool_size=20,
        seed=3,
    )
    summary = run(s)
    assert (summary.sent, summary.acked) == (200, 200)
    reader = frame_codec(
        get_codec(codec, "medium"), RegistryClient(RegistryAccess(registry_url))
    )
    expected_subject = (
        f"{topic}-value" if strategy == "topic" else f"{topic}-{reader.record_name()}"
    )
    assert expected_subject in _subjects(registry_url)
    pool = make_payloads("medium", 20, seed=3)
    plain = get_codec(codec, "medium")
    for m in consume_all(kafka_bootstrap, topic, 200):
        assert m.value()[0] == 0  # magic byte
        got = reader.decode(m.value())
        want = plain.from_builtins(pool[seq_of(m) % 20])
        assert plain.to_builtins(got) == plain.to_builtins(want)
    assert reader.cached_ids == 1


def test_record_and_replay_keep_the_frames(
    kafka_bootstrap: str, registry_url: str, topic_factory: Any, tmp_path: Path
) -> None:
    source, target = topic_factory(partitions=2), topic_factory(partitions=2)
    registry = {"url": registry_url}
    run(
        settings(
            kafka_bootstrap,
            source,
            codec="avro",
            framing="confluent",
            registry=registry,
            rate=2000,
            count=100,
        )
    )
    out = tmp_path / "framed.rec.gz"
    count, _ = record(
        settings(
            kafka_bootstrap, source, record_out=out, record_timeout_s=2, record_max=100
        )
    )
    assert count == 100
    _, recorded = read_recording(out)
    assert all(r.value is not None and r.value[0] == 0 for r in recorded)
    replayed = run(settings(kafka_bootstrap, target, replay=out, speed=50.0))
    assert replayed.acked == 100
    sent = {r.value for r in recorded}
    msgs = consume_all(kafka_bootstrap, target, 100)
    assert {m.value() for m in msgs} == sent  # byte for byte, frames included
