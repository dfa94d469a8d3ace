"""`codec-schema check SCHEMA --logic M:F --recording FILE`: the handler judged on
recorded traffic instead of synthetic messages.

The recording is the file `codec-loadgen record` (and `codec-ab`'s replay) uses
(`loadgen.recording`). Each record is decoded as a transcoding replay reads it
(`loadgen.replay.probe`): with the codec its `content-type` header names, recorded
JSON with the schema's own JSON form; the decoded message, as builtins, is then
what every codec encodes and decodes for the handler (`schematool.logic_check`).
Records that do not decode as the schema are counted and left out: they are the
dead-letter topic's question, not the handler's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from codec import AutoCodec, get_codec
from codec.convert import native_to_builtins
from loadgen.carry import content_type
from loadgen.config import own_json
from loadgen.recording import read_recording
from schemas.errors import ConfigError, DecodeError, RecordingError
from schemas.registry import resolve


def recorded_payloads(
    path: Path, spec: str, limit: int
) -> tuple[list[dict[str, Any]], str]:
    """The first `limit` records of `path` that decode as schema `spec`, as
    builtins, and a line saying where they came from.

    Raises:
        ConfigError: the file is not a readable recording, or none of its first
            `limit` records decodes as the schema (one line naming the first
            record's error).
    """
    where = f"--recording: '{path}'"
    try:
        _info, records = read_recording(path, limit)
    except (OSError, RecordingError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    auto = get_codec("auto", resolve(spec), auto_json=own_json(spec))
    assert isinstance(auto, AutoCodec)  # noqa: S101  # get_codec's contract
    payloads: list[dict[str, Any]] = []
    first_error = ""
    for r in records:
        try:
            decoded = auto.decode_for(content_type(r), r.value or b"")
        except DecodeError as exc:
            first_error = first_error or f"offset {r.offset}: {exc}"
            continue
        payloads.append(native_to_builtins(decoded))
    if not payloads:
        shown = " ".join(first_error.split())[:200]
        raise ConfigError(
            f"{where}: none of its first {len(records)} records decodes as "
            f"{spec!r} (the first, {shown})"
        )
    left = len(records) - len(payloads)
    source = f"recorded ('{path}'" + (
        f"; {left} more not decodable as the schema, left out)" if left else ")"
    )
    return payloads, source
