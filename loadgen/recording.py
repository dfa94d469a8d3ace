"""Recordings of real traffic: the file format and `codec-loadgen record`.

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
with ``record --max``. `loadgen.replay` turns a recording into what a run sends.
"""

from __future__ import annotations

import gzip
import io
import itertools
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Final, cast

import msgspec
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaException,
    TopicPartition,
)

from loadgen.config import LoadgenSettings
from schemas.errors import ConfigError, LoadgenError, RecordingError
from service import __version__
from service.kafka.admin_topics import CONNECT_TIMEOUT_S, TopicAdmin
from service.kafka.connection import client_error
from service.kafka.security_check import check_access
from service.telemetry.log_setup import cannot_reach, kafka_logger

MAGIC: Final = b"CLGREC"
VERSION: Final = 1
_HEADER: Final = MAGIC + bytes([VERSION, 0])
_LEN: Final = struct.Struct(">I")
METADATA_TIMEOUT_S = CONNECT_TIMEOUT_S
"""How long `record` waits for the broker (not Final: tests shorten it)."""


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


def read_recording(
    path: Path, limit: int | None = None
) -> tuple[RecordingInfo, list[Record]]:
    """Read a whole recording, or its first `limit` records.

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
            return info, [decode(body) for body in itertools.islice(frames, limit)]
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
        ConfigError: no output file, no such topic, or a setting librdkafka refuses.
        LoadgenError: Kafka cannot be reached (within `METADATA_TIMEOUT_S`).
    """
    if s.record_out is None:
        raise ConfigError("config error: record_out (record --out): required")
    partitions = _source_partitions(s)
    consumer = Consumer(s.consumer_config(plaintext_secrets=True))
    try:
        start = OFFSET_BEGINNING if s.record_start == "earliest" else OFFSET_END
        consumer.assign([TopicPartition(s.topic, p, start) for p in range(partitions)])
        info = RecordingInfo(s.topic, partitions, time.time_ns())
        with RecordingWriter(s.record_out, info) as out:
            _copy(consumer, out, s, stop)
        return out.count, info
    finally:
        consumer.close()


def _source_partitions(s: LoadgenSettings) -> int:
    """The recorded topic's partition count, asked before a consumer exists."""
    conf = s.kafka.librdkafka(plaintext_secrets=True)
    try:
        admin = TopicAdmin(conf | {"client.id": s.client_id, "logger": kafka_logger()})
    except KafkaException as exc:
        raise ConfigError(f"config error: {client_error(exc, conf)}") from None
    check_access(conf, refused=LoadgenError)
    try:
        partitions = admin.partitions(s.topic, METADATA_TIMEOUT_S)
    except KafkaException as exc:
        reason = admin.failure(exc)
        raise LoadgenError(cannot_reach(s.kafka.bootstrap_servers, reason)) from None
    if not partitions:
        raise ConfigError(
            f"config error: topic (--topic) = {s.topic!r}: no such topic on "
            f"{s.kafka.bootstrap_servers}"
        )
    return partitions


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
