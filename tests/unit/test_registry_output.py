"""The worker's framed output: its writer found at start, its schema looked up
before it is registered, and `auto` writing with its output codec framed.

No network: the in-memory registry stands in for a real one
(tests/integration/test_registry_secured.py reads a worker's framed output back
with confluent-kafka's deserializers)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from codec import AutoCodec, get_codec
from codec.registry import frame_auto, frame_codec
from codec.registry.framed import FramedCodec
from codec.registry.memory import InMemoryRegistry
from loadgen.payloads import small
from service.cli import main as worker_main
from service.settings.registry_start import output_writer

URL = "http://127.0.0.1:1/apis/ccompat/v7"


class CountingRegistry(InMemoryRegistry):
    """Counts registrations: a schema already there is looked up, not registered."""

    def __init__(self) -> None:
        super().__init__()
        self.registered = 0

    def register(self, subject: str, schema_type: str, text: str) -> int:
        self.registered += 1
        return super().register(subject, schema_type, text)


def test_a_framed_codec_writes_with_its_looked_up_id() -> None:
    registry = CountingRegistry()
    first = frame_codec(get_codec("avro", "small"), registry)
    schema_id = first.register("out-value")
    again = frame_codec(get_codec("avro", "small"), registry)
    assert output_writer(again) is again
    assert again.register("out-value") == schema_id
    assert registry.registered == 1  # the second writer found it
    value = again.inner.from_builtins(small(random.Random(7), 1))
    assert again.decode(again.encode(value)) == value


def test_auto_writes_with_its_output_codec_framed() -> None:
    auto = get_codec("auto", "small")
    assert isinstance(auto, AutoCodec)
    registry = InMemoryRegistry()
    by_type = {
        "AVRO": get_codec("avro", "small"),
        "JSON": get_codec("msgspec-json", "small"),
    }
    framed_auto = frame_auto(auto, by_type, registry)
    writer = output_writer(framed_auto)
    assert isinstance(writer, FramedCodec) and writer.inner.name == "msgspec-json"
    writer.register("out-value")
    value = writer.inner.from_builtins(small(random.Random(7), 2))
    data = framed_auto.encode(value)
    assert data[0] == 0  # the frame's magic byte
    assert framed_auto.codec_for(None).decode(data) == value


@pytest.mark.parametrize("output", ["msgspec-msgpack", "capnp"])
def test_auto_output_without_a_registry_type_is_refused(
    output: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ["--print-config", "--codec", "auto", "--auto-output", output]
    args += ["--framing", "confluent", "--registry-url", URL, "--output-topic", "o"]
    assert worker_main(args) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "codec.auto_output" in line and "has no schema registry type" in line
