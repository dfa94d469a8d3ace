"""Recordings of real traffic: the file format, `codec-loadgen record`, and replay.

File format, version 1 (integers big-endian)::

    magic    6 bytes   b"CLGREC"
    version  1 byte    1
    flags    1 byte    0 (reserved; readers refuse other values)
    frames   repeated  u32 length, then that many bytes of MessagePack (msgspec)

Frame 0 is a `RecordingInfo` map (source topic, its partition count, creation time,
writer version). Every later frame is one `Record`, an array ``[partition, offset,
timestamp_type, timestamp_ms, key, value, headers]`` where ``headers`` is a list of
``[name, value]`` pairs in their original order; keys, values and header values are
raw bytes (or nil), so binary payloads (MessagePack, protobuf) survive unchanged.
A file whose name ends in ``.gz`` is this byte stream gzip-compressed (stdlib, level
6); readers detect gzip by its magic whatever the name. A truncated frame is an
error naming the byte offset. Replay holds the whole recording in memory: bound it
with ``record --max``.
"""

from __future__ import annotations

import gzip
import io
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Final, cast

import msgspec
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition

from loadgen.config import LoadgenSettings
from loadgen.generator import Source
from service import __version__
from service.codecs import AutoCodec, get_codec
from service.errors import ConfigError, DecodeError, RecordingError

MAGIC: Final = b"CLGREC"
VERSION: Final = 1
_HEADER: Final = MAGIC + bytes([VERSION, 0])
_LEN: Final = struct.Struct(">I")
_STAMPED: Final = frozenset({"x-sent-ns", "x-seq", "x-run-id", "content-type"})


class RecordingInfo(msgspec.Struct, frozen=True):
    """What a recording came from (frame 0)."""

    topic: str
    partitions: int
    created_ns: int
    writer: str = f"codec-loadgen {__version__}"


class Record(msgspec.Struct, array_like=True, frozen=True):
    """One recorded message; offset and topic are kept for reference only."""

    partition: int
    offset: int
    timestamp_type: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class RecordingWriter:
    """Writes a recording; use as a context manager.

    Args:
        path: the file to create (gzip-compressed when it ends in `.gz`).
        info: the source description stored as frame 0.
    """

    def __init__(self, path: Path, info: RecordingInfo) -> None:
        self._raw: IO[bytes] = open(path, "wb")  # noqa: SIM115  # closed by close()
        self._file: IO[bytes] | gzip.GzipFile = self._raw
        if path.suffix == ".gz":
            self._file = gzip.GzipFile(fileobj=self._raw, mode="wb", compresslevel=6)
        self._encode = msgspec.msgpack.Encoder().encode
        self._file.write(_HEADER)
        self._frame(info)
        self.count = 0

    def _frame(self, obj: Any) -> None:
        body = self._encode(obj)
        self._file.write(_LEN.pack(len(body)) + body)

    def write(self, record: Record) -> None:
        """Append one record."""
        self._frame(record)
        self.count += 1

    def close(self) -> None:
        """Flush and close the file."""
        self._file.close()
        if self._file is not self._raw:
            self._raw.close()

    def __enter__(self) -> RecordingWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _open(path: Path) -> IO[bytes]:
    with open(path, "rb") as probe:
        compressed = probe.read(2) == b"\x1f\x8b"
    if compressed:
        return io.BufferedReader(gzip.open(path, "rb"))
    return open(path, "rb")  # the caller closes it


def _frames(f: IO[bytes]) -> Iterator[bytes]:
    pos = len(_HEADER)
    while head := f.read(4):
        if len(head) < 4:
            raise RecordingError(f"truncated frame length at byte {pos}")
        (size,) = _LEN.unpack(head)
        body = f.read(size)
        if len(body) < size:
            raise RecordingError(
                f"truncated frame at byte {pos}: {len(body)} of {size}"
            )
        pos += 4 + size
        yield body


def read_recording(path: Path) -> tuple[RecordingInfo, list[Record]]:
    """Read a whole recording.

    Raises:
        RecordingError: not a recording, an unknown version, or a damaged file.
        OSError: the file cannot be read.
    """
    with _open(path) as f:
        head = f.read(len(_HEADER))
        if head[:6] != MAGIC:
            raise RecordingError("not a codec-loadgen recording (bad magic)")
        if head[6:] != bytes([VERSION, 0]):
            raise RecordingError(
                f"unsupported recording version/flags {head[6:].hex()}"
            )
        frames = _frames(f)
        try:
            info = msgspec.msgpack.decode(next(frames), type=RecordingInfo)
            decode = msgspec.msgpack.Decoder(Record).decode
            return info, [decode(body) for body in frames]
        except StopIteration:
            raise RecordingError("no info frame") from None
        except msgspec.DecodeError as exc:
            raise RecordingError(f"damaged frame: {exc}") from None


def record(
    s: LoadgenSettings, *, stop: Callable[[], bool] = lambda: False
) -> tuple[int, RecordingInfo]:
    """Copy messages from `s.topic` into `s.record_out`; return (count, info).

    Reads every partition from its start (`record_start = earliest`) or from now
    (`latest`), without committing offsets, until `record_max` messages, until no
    message arrived for `record_timeout_s`, or until `stop()` returns True.

    Raises:
        ConfigError: no output file, or no such topic.
    """
    if s.record_out is None:
        raise ConfigError("config error: record_out (record --out): required")
    consumer = Consumer(s.consumer_config(plaintext_secrets=True))
    try:
        meta = consumer.list_topics(s.topic, timeout=15).topics.get(s.topic)
        if meta is None or meta.error is not None or not meta.partitions:
            raise ConfigError(
                f"config error: topic (--topic) = {s.topic!r}: no such topic"
            )
        start = OFFSET_BEGINNING if s.record_start == "earliest" else OFFSET_END
        consumer.assign([TopicPartition(s.topic, p, start) for p in meta.partitions])
        info = RecordingInfo(s.topic, len(meta.partitions), time.time_ns())
        with RecordingWriter(s.record_out, info) as out:
            _copy(consumer, out, s, stop)
        return out.count, info
    finally:
        consumer.close()


def _copy(
    consumer: Consumer,
    out: RecordingWriter,
    s: LoadgenSettings,
    stop: Callable[[], bool],
) -> None:
    limit = s.record_max or 2**63
    idle_since = time.monotonic()
    while out.count < limit and not stop():
        msgs = consumer.consume(min(1000, limit - out.count), 0.2)
        if not msgs:
            if time.monotonic() - idle_since >= s.record_timeout_s:
                return
            continue
        idle_since = time.monotonic()
        for m in msgs:
            if m.error() is None:
                kind, ts = m.timestamp()
                headers = cast("list[tuple[str, bytes | None]]", m.headers() or [])
                part, offset = m.partition() or 0, m.offset() or 0
                out.write(Record(part, offset, kind, ts, m.key(), m.value(), headers))


def _content_type(r: Record) -> bytes | None:
    return next((v for k, v in r.headers if k == "content-type"), None)


def _transcoder(s: LoadgenSettings) -> Callable[[Record], bytes]:
    """Decode a record with the codec its content-type names; encode with the target."""
    assert s.transcode is not None  # noqa: S101  # checked by the caller
    auto = get_codec("auto", s.profile)
    assert isinstance(auto, AutoCodec)  # noqa: S101  # get_codec's contract
    target = get_codec(s.transcode, s.profile)

    def convert(r: Record) -> bytes:
        try:
            codec = auto.codec_for(_content_type(r))
            native = codec.decode(r.value or b"")
            return target.encode(target.from_builtins(codec.to_builtins(native)))
        except DecodeError as exc:
            raise ConfigError(
                f"config error: transcode: record at partition {r.partition} offset "
                f"{r.offset} does not decode as {s.profile!r} ({exc})"
            ) from None

    return convert


def replay_source(s: LoadgenSettings, topic_partitions: int) -> Source:
    """The messages of `s.replay`, in recorded-timestamp order, ready to send.

    Raises:
        ConfigError: unreadable or empty file, no timestamps for a paced replay,
            kept partitions missing from the topic, or a record that does not
            decode for `transcode`.
    """
    assert s.replay is not None  # noqa: S101  # only called for a replay
    try:
        _info, records = read_recording(s.replay)
    except (OSError, RecordingError) as exc:
        raise ConfigError(
            f"config error: replay (--replay) = '{s.replay}': {exc}"
        ) from None
    if not records:
        raise ConfigError(
            f"config error: replay (--replay) = '{s.replay}': no messages"
        )
    records.sort(key=lambda r: (r.timestamp_ms, r.partition, r.offset))
    times = None
    if s.paced_replay:
        if records[0].timestamp_ms < 0:
            raise ConfigError(
                "config error: the recording has no timestamps: give --rate"
            )
        t0 = records[0].timestamp_ms
        times = [(r.timestamp_ms - t0) / 1e3 for r in records]
    needed = max(r.partition for r in records) + 1
    if s.keep_partitions and topic_partitions < needed:
        raise ConfigError(
            f"config error: keep_partitions (--keep-partitions): topic {s.topic!r} has "
            f"{topic_partitions} partitions, the recording uses {needed}"
        )
    keep = (
        topic_partitions >= needed if s.keep_partitions is None else s.keep_partitions
    )
    source = Source(
        values=[r.value for r in records],
        keys=[r.key for r in records],
        extra_headers=[
            tuple((k, v) for k, v in r.headers if k not in _STAMPED) for r in records
        ],
        partitions=[r.partition for r in records] if keep else None,
        times_s=times,
    )
    if times is not None:
        span = times[-1]
        source.period_s = span + max(span / max(1, len(times) - 1), 1e-3)
    if s.transcode is not None:
        convert = _transcoder(s)
        source.values = [convert(r) for r in records]
        source.content_type = get_codec(s.transcode, s.profile).content_type.encode()
    else:
        source.content_types = [_content_type(r) for r in records]
    return source
