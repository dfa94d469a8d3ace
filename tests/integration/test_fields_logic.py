"""`--logic fields` on the real broker: a narrow consumer of the new codecs' messages."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from codec import CodecName, get_codec
from loadgen.payloads import make_payloads
from tests.support import Record, WorkerProcess, produce


def _records(codec_name: CodecName, count: int) -> list[Record]:
    codec = get_codec(codec_name, "medium")
    out: list[Record] = []
    for seq, payload in enumerate(make_payloads("medium", count, seed=11)):
        headers = [
            ("x-sent-ns", str(time.time_ns()).encode()),
            ("x-seq", str(seq).encode()),
            ("content-type", codec.content_type.encode()),
        ]
        value = codec.encode(codec.from_builtins(payload))
        out.append({"key": str(seq).encode(), "value": value, "headers": headers})
    return out


@pytest.mark.parametrize("codec_name", ["flatbuffers", "capnp", "avro"])
def test_reads_two_fields_of_every_message(
    kafka_bootstrap: str,
    topic_factory: Callable[..., str],
    tmp_path: Path,
    codec_name: CodecName,
) -> None:
    topic = topic_factory(2)
    n = produce(kafka_bootstrap, topic, _records(codec_name, 200))
    args = (
        *("--codec", codec_name, "--logic", "fields"),
        *("--read-fields", "customer.customer_id,total"),
        *("--dlq-topic", topic_factory(1, prefix="dlq")),
    )
    with WorkerProcess(kafka_bootstrap, topic, *args, log=tmp_path / "w.log") as w:
        assert w.wait_for(n) == n
        assert w.messages("ok") == n
        assert w.messages("decode_error") == w.messages("logic_error") == 0
        assert w.stop() == 0
