"""Replay: a recording turned into the `Source` a run sends, optionally transcoded.

Records are sent in recorded-timestamp order. Headers: the load generator's
stamps `x-sent-ns`, `x-seq` and `x-run-id` come first and replace recorded ones of
those names (they are what latency and loss are measured by); every other recorded
header follows, name and value as recorded. `content-type` is the recorded one
(absent stays absent) when the value is sent as recorded, the target codec's when
it was transcoded. A paced replay (no `--rate`) keeps the recorded gaps between
messages. With `transcode`, a record already in the target's wire format is sent
byte for byte, one in another format is transcoded, and one the target cannot
carry is left out and counted (`loadgen.carry`). `probe` checks, before any run, that
a recording is traffic of the schema it is to be replayed as.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Final

from codec import AutoCodec, get_codec
from loadgen.carry import carry, content_type
from loadgen.config import LoadgenSettings, own_json
from loadgen.recording import Record, read_recording
from loadgen.source import Source
from schemas.errors import ConfigError, DecodeError, RecordingError
from schemas.registry import resolve
from service.kafka.headers import STAMPED
from service.shadow.verdict import located

if TYPE_CHECKING:
    from codec.registry import RegistryAccess

PROBED: Final = 20
"""Records `probe` decodes: a recording of another schema fails on every one, while
a team's traffic with some bad messages (what the dead-letter topic is for) has a
good one among its first 20."""
_MAX_REASON: Final = 160


@contextmanager
def _progress(
    s: LoadgenSettings, what: str, total: int
) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr while a long step runs (a terminal only, as the
    live line: `progress`); yields `done(n)`."""
    from rich.console import Console  # only a replay needs it: a lighter start
    from rich.progress import Progress

    tty = sys.stderr.isatty() and sys.stdout.isatty()
    shown = s.progress == "always" or (s.progress == "auto" and tty)
    console = Console(stderr=True, force_terminal=s.progress == "always" or None)
    with Progress(console=console, transient=True, disable=not shown) as bar:
        task = bar.add_task(what, total=total)
        yield lambda n: bar.update(task, completed=n)


def _transcoded(
    s: LoadgenSettings, records: list[Record]
) -> tuple[list[Record], Source]:
    """The records the target carries and their values (a partial `Source`).

    Raises:
        ConfigError: the target can carry none of them.
    """
    assert s.transcode is not None  # noqa: S101  # checked by the caller
    with _progress(s, f"transcoding to {s.transcode}", len(records)) as done:
        carried = carry(s, records, done)
    if not carried.indexes:
        raise ConfigError(
            f"config error: transcode: none of the {len(records)} recorded messages "
            f"can be sent as {s.transcode} (first: {carried.first_left_out})"
        )
    target = get_codec(s.transcode, s.forms).content_type.encode()
    kept = [records[i] for i in carried.indexes]
    source = Source(
        values=carried.values,
        keys=[],
        content_types=[
            content_type(r) if same else target
            for r, same in zip(kept, carried.as_recorded, strict=True)
        ],
        not_carried=dict(carried.not_carried),
        as_recorded=sum(carried.as_recorded),
    )
    return kept, source


def replay_source(s: LoadgenSettings, topic_partitions: int) -> Source:
    """The messages of `s.replay`, in recorded-timestamp order, ready to send.

    Raises:
        ConfigError: unreadable or empty file, no timestamps for a paced replay,
            kept partitions missing from the topic, or no record that
            `transcode` can carry.
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
    if s.transcode is not None:
        records, source = _transcoded(s, records)
    else:
        source = Source(
            values=[r.value for r in records],
            keys=[],
            content_types=[content_type(r) for r in records],
            as_recorded=len(records),
        )
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
    source.keys = [r.key for r in records]
    source.extra_headers = [
        tuple((k, v) for k, v in r.headers if k not in STAMPED) for r in records
    ]
    source.partitions = [r.partition for r in records] if keep else None
    source.times_s = times
    if times is not None:
        span = times[-1]
        source.period_s = span + max(span / max(1, len(times) - 1), 1e-3)
    return source


def probe(
    path: Path,
    spec: str,
    records: int = PROBED,
    *,
    framed: RegistryAccess | None = None,
) -> None:
    """Refuse a recording none of whose first `records` records decodes as `spec`.

    Each record is decoded as a transcoding replay reads it: with the codec its
    `content-type` names, recorded JSON with the schema's own JSON form (a lax
    model's traffic decodes); with `framed` (the registry of a `--framing
    confluent` replay), a Confluent frame through that registry. One record that
    decodes is enough: the others are the report's dead letters, by field and reason.

    Raises:
        ConfigError: the file is not a readable recording, or none of those
            records decodes; one line naming the file, the schema and the first
            record's decode error.
    """
    where = f"replay: '{path}'"
    try:
        _info, first = read_recording(path, records)
    except (OSError, RecordingError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if not first:
        raise ConfigError(f"{where}: no messages")
    try:
        auto = get_codec("auto", resolve(spec), auto_json=own_json(spec))
    except ConfigError:  # no JSON form: the replay's own check names the field
        return
    assert isinstance(auto, AutoCodec)  # noqa: S101  # get_codec's contract
    if framed is not None:
        auto = _framed_auto(auto, spec, framed)
    why = ""
    for r in first:
        try:
            auto.decode_for(content_type(r), r.value or b"")
        except DecodeError as exc:
            why = why or f"partition {r.partition} offset {r.offset}: {_reason(exc)}"
            continue
        return
    hint = "give --schema the schema it was recorded with"
    framed_ids = {r.value[1:5] for r in first if r.value and r.value[0] == 0}
    if (
        framed is None
        and len(framed_ids) >= 1
        and all(r.value and r.value[:1] in (b"\x00", b"\x01") for r in first)
    ):
        ids = ", ".join(str(int.from_bytes(i, "big")) for i in sorted(framed_ids)[:3])
        why += f"; its values look framed (magic byte 0, schema id {ids})"
        hint = "give --framing confluent and the --registry-url they were written to"
    raise ConfigError(
        f"{where} does not decode as schema {spec!r}: none of its first "
        f"{len(first)} records does (the first, {why}); {hint}"
    )


def _framed_auto(auto: AutoCodec, spec: str, access: RegistryAccess) -> AutoCodec:
    """`auto` reading Confluent frames through the registry at `access`."""
    from codec.registry import RegistryClient, frame_auto

    by_type = {}
    for kind, name in (
        ("AVRO", "avro"),
        ("PROTOBUF", "protobuf"),
        ("JSON", own_json(spec)),
    ):
        with contextlib.suppress(ConfigError):  # a form the schema refuses
            by_type[kind] = get_codec(name, resolve(spec))  # type: ignore[arg-type]
    return frame_auto(auto, by_type, RegistryClient(access))


def _reason(exc: DecodeError) -> str:
    """The field and reason of a decode error, else its message on one line."""
    path, why = located(exc)
    text = why or " ".join(str(exc).split())
    text = text if len(text) <= _MAX_REASON else text[: _MAX_REASON - 3] + "..."
    return f"{path}: {text}" if path and path != "$" else text
