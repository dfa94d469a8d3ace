"""Replay: a recording turned into the `Source` a run sends, optionally transcoded.

Records are sent in recorded-timestamp order. The headers the load generator
stamps itself (`service.headers.STAMPED`) are dropped and stamped anew; every
other recorded header is kept as it was. A paced replay (no `--rate`) keeps the
recorded gaps between messages; `transcode` re-encodes each value with another
codec, decoding it with the codec its `content-type` names (JSON: with the JSON
codec of the schema's own form, `LoadgenSettings.transcode_json`), through the
settings' schema, a built-in one or a user's.
"""

from __future__ import annotations

from collections.abc import Callable

from codec import AutoCodec, get_codec, native_to_builtins
from loadgen.config import LoadgenSettings
from loadgen.recording import Record, read_recording
from loadgen.source import Source
from schemas.errors import ConfigError, DecodeError, RecordingError
from service.headers import CONTENT_TYPE, STAMPED


def _content_type(r: Record) -> bytes | None:
    return next((v for k, v in r.headers if k == CONTENT_TYPE), None)


def _transcoder(s: LoadgenSettings) -> Callable[[Record], bytes]:
    """Decode a record with the codec its content-type names; encode with the target."""
    assert s.transcode is not None  # noqa: S101  # checked by the caller
    forms = s.forms
    auto = get_codec("auto", forms, auto_json=s.transcode_json)
    assert isinstance(auto, AutoCodec)  # noqa: S101  # get_codec's contract
    target = get_codec(s.transcode, forms)

    def convert(r: Record) -> bytes:
        try:
            codec = auto.codec_for(_content_type(r))
            native = codec.decode(r.value or b"")
            # As JSON carries them (datetimes and bytes as text), which every
            # codec's from_builtins takes; a pydantic model's own dump does not.
            return target.encode(target.from_builtins(native_to_builtins(native)))
        except DecodeError as exc:
            raise ConfigError(
                f"config error: transcode: record at partition {r.partition} offset "
                f"{r.offset} does not decode as {s.schema_spec!r} ({exc})"
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
            tuple((k, v) for k, v in r.headers if k not in STAMPED) for r in records
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
        source.content_type = get_codec(s.transcode, s.forms).content_type.encode()
    else:
        source.content_types = [_content_type(r) for r in records]
    return source
