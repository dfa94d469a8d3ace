"""Recording files: the byte format, round trips, damage, and replay sources."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest

from codec import CodecName, get_codec
from loadgen.config import LoadgenSettings
from loadgen.payloads import make_payloads
from loadgen.recording import (
    MAGIC,
    Record,
    RecordingInfo,
    RecordingWriter,
    read_recording,
)
from loadgen.replay import replay_source
from schemas.errors import ConfigError, RecordingError

INFO = RecordingInfo("orders", 4, 1_767_225_600_000_000_000)


def records() -> list[Record]:
    return [
        Record(2, 10, 1, 1_000_500, b"k1", b"\x00\xff binary", [("a", b"1")]),
        Record(0, 7, 1, 1_000_000, None, b"{}", [("content-type", None)]),
        Record(1, 3, 1, 1_000_250, b"k3", None, []),
    ]


def write(path: Path, recs: list[Record], info: RecordingInfo = INFO) -> Path:
    with RecordingWriter(path, info) as out:
        for r in recs:
            out.write(r)
    return path


def settings(path: Path, **kw: Any) -> LoadgenSettings:
    return LoadgenSettings.model_validate({"replay": path, "topic": "t"} | kw)


class TestFormat:
    """Magic, version, length-prefixed MessagePack frames; gzip when named .gz."""

    @pytest.mark.parametrize("name", ["traffic.rec", "traffic.rec.gz"])
    def test_round_trip(self, tmp_path: Path, name: str) -> None:
        path = write(tmp_path / name, records())
        info, got = read_recording(path)
        assert info == INFO
        assert got == records()
        raw = path.read_bytes()
        if name.endswith(".gz"):
            raw = gzip.decompress(raw)
        assert raw[:8] == MAGIC + b"\x01\x00"

    def test_gzip_is_detected_by_content_not_name(self, tmp_path: Path) -> None:
        path = write(tmp_path / "a.gz", records())
        moved = path.rename(tmp_path / "renamed.bin")
        assert read_recording(moved)[1] == records()

    def test_bad_magic(self, tmp_path: Path) -> None:
        path = tmp_path / "x.rec"
        path.write_bytes(b"NOTREC\x01\x00")
        with pytest.raises(RecordingError, match="bad magic"):
            read_recording(path)

    def test_unknown_version(self, tmp_path: Path) -> None:
        path = tmp_path / "x.rec"
        path.write_bytes(MAGIC + b"\x09\x00")
        with pytest.raises(RecordingError, match="version"):
            read_recording(path)

    def test_truncated_frame_names_the_offset(self, tmp_path: Path) -> None:
        path = write(tmp_path / "x.rec", records())
        path.write_bytes(path.read_bytes()[:-3])
        with pytest.raises(RecordingError, match="truncated frame at byte"):
            read_recording(path)


class TestReplaySource:
    """A recording becomes a Source: timestamp order, headers, partitions."""

    def test_order_times_and_kept_headers(self, tmp_path: Path) -> None:
        recs = records()
        recs[0] = Record(
            2, 10, 1, 1_000_500, b"k1", b"v", [("x-seq", b"9"), ("a", b"1")]
        )
        source = replay_source(settings(write(tmp_path / "r.rec", recs)), 4)
        assert source.values == [b"{}", None, b"v"]
        assert source.keys == [None, b"k3", b"k1"]
        assert source.times_s == [0.0, 0.25, 0.5]
        assert source.period_s == pytest.approx(0.75)
        assert source.extra_headers == [(), (), (("a", b"1"),)]
        assert source.content_types == [None, None, None]
        assert source.partitions == [0, 1, 2]

    def test_partitions_dropped_when_the_topic_is_smaller(self, tmp_path: Path) -> None:
        path = write(tmp_path / "r.rec", records())
        assert replay_source(settings(path), 2).partitions is None
        assert (
            replay_source(settings(path, keep_partitions=False), 4).partitions is None
        )
        with pytest.raises(ConfigError, match="has 2 partitions"):
            replay_source(settings(path, keep_partitions=True), 2)

    def test_a_fixed_rate_needs_no_timestamps(self, tmp_path: Path) -> None:
        recs = [Record(0, i, 0, -1, None, b"v", []) for i in range(3)]
        path = write(tmp_path / "r.rec", recs)
        assert replay_source(settings(path, rate=10), 1).times_s is None
        with pytest.raises(ConfigError, match="no timestamps"):
            replay_source(settings(path), 1)

    def test_unreadable_and_empty_files(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match="replay"):
            replay_source(settings(tmp_path / "missing.rec"), 1)
        with pytest.raises(ConfigError, match="no messages"):
            replay_source(settings(write(tmp_path / "e.rec", [])), 1)

    @pytest.mark.parametrize("target", ["protobuf", "json+pydantic", "msgspec-msgpack"])
    def test_transcode_decodes_by_content_type(
        self, tmp_path: Path, target: CodecName
    ) -> None:
        payloads = make_payloads("medium", 4, seed=3)
        recs = []
        for i, p in enumerate(payloads):
            codec = get_codec("msgspec-json" if i % 2 else "protobuf", "medium")
            value = codec.encode(codec.from_builtins(p))
            ct: list[tuple[str, bytes | None]] = [
                ("content-type", codec.content_type.encode())
            ]
            recs.append(Record(0, i, 1, 1000 + i, None, value, ct))
        path = write(tmp_path / "r.rec", recs)
        source = replay_source(settings(path, transcode=target, profile="medium"), 1)
        codec = get_codec(target, "medium")
        assert source.content_types == [codec.content_type.encode()] * 4
        decoded = [codec.to_builtins(codec.decode(v or b"")) for v in source.values]
        reference = get_codec("msgspec-msgpack", "medium")
        assert decoded == [
            reference.to_builtins(reference.from_builtins(p)) for p in payloads
        ]

    def test_transcode_refuses_a_foreign_payload(self, tmp_path: Path) -> None:
        recs = [Record(0, 5, 1, 1, None, b"not json", [])]
        path = write(tmp_path / "r.rec", recs)
        with pytest.raises(ConfigError, match=r"none of the 1 .* partition 0 offset 5"):
            replay_source(settings(path, transcode="protobuf"), 1)
