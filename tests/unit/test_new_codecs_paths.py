"""flatbuffers, capnp and avro on the paths the six take: replay with transcoding
(from and to each), the shadow decode, any native object as builtins."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codec import CodecName, get_codec, native_to_builtins
from loadgen.config import LoadgenSettings
from loadgen.payloads import make_payloads
from loadgen.recording import Record, RecordingInfo, RecordingWriter
from loadgen.replay import replay_source
from schemas.registry import SCHEMAS
from schemas.wire_shape import shape_of
from service.shadow.verdict import Comparer

NEW: list[CodecName] = ["flatbuffers", "capnp", "avro"]
INFO = RecordingInfo("orders", 4, 1_767_225_600_000_000_000)


def _recording(path: Path, writers: list[CodecName]) -> list[dict[str, Any]]:
    payloads = make_payloads("medium", 6, seed=3)
    with RecordingWriter(path, INFO) as out:
        for i, p in enumerate(payloads):
            codec = get_codec(writers[i % len(writers)], "medium")
            ct: list[tuple[str, bytes | None]] = [
                ("content-type", codec.content_type.encode())
            ]
            out.write(
                Record(
                    0, i, 1, 1000 + i, None, codec.encode(codec.from_builtins(p)), ct
                )
            )
    return payloads


@pytest.mark.parametrize("target", [*NEW, "msgspec-msgpack"])
def test_replay_transcodes_from_and_to_the_new_formats(
    tmp_path: Path, target: CodecName
) -> None:
    payloads = _recording(tmp_path / "r.rec", [*NEW, "protobuf"])
    settings = LoadgenSettings.model_validate(
        {
            "replay": tmp_path / "r.rec",
            "topic": "t",
            "transcode": target,
            "profile": "medium",
        }
    )
    source = replay_source(settings, 1)
    codec = get_codec(target, "medium")
    # Per message: one already in the target's format is sent as recorded (its
    # own header), every other one transcoded; all carry the target's type.
    assert source.content_types == [codec.content_type.encode()] * len(payloads)
    decoded = [codec.to_builtins(codec.decode(v or b"")) for v in source.values]
    reference = get_codec("msgspec-msgpack", "medium")
    assert decoded == [
        reference.to_builtins(reference.from_builtins(p)) for p in payloads
    ]


@pytest.mark.parametrize("shadow", NEW)
@pytest.mark.parametrize("primary", ["json+pydantic", "protobuf", *NEW])
def test_shadow_agrees_across_the_new_formats(
    primary: CodecName, shadow: CodecName
) -> None:
    live, other = get_codec(primary, "medium"), get_codec(shadow, "medium")
    comparer = Comparer(live, other, shape_of(SCHEMAS["medium"]))
    for p in make_payloads("medium", 5, seed=9):
        verdict = comparer.compare(live.encode(live.from_builtins(p)), None)
        assert verdict is not None and verdict.outcome == "agree", verdict


@pytest.mark.parametrize("name", NEW)
def test_native_objects_as_builtins(name: CodecName) -> None:
    codec = get_codec(name, "large")
    p = make_payloads("large", 1, seed=2, large_bytes=3000)[0]
    assert native_to_builtins(codec.decode(codec.encode(codec.from_builtins(p)))) == p
