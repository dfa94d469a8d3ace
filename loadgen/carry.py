"""A replayed record in the case's wire format: as recorded, transcoded, or not carried.

A record whose wire format (its `content-type`, JSON when it has none) is the
target codec's is sent as recorded, byte for byte: the JSON cases of an A/B decode
the team's own bytes (key order, aliases, unknown fields, numbers written as
strings), not the tool's re-encoding of them. Only a record in another wire format
is transcoded: decoded with the codec its `content-type` names (JSON: with the
JSON codec of the schema's own form), re-encoded with the target.

A record the target cannot carry (it does not decode with the schema, or the target
format cannot hold one of its values: a datetime without a timezone for protobuf's
`Timestamp`, an int wider than 64 bits) is left out of the replay and counted under
`"<field path>: <reason>"`, so the report can say what a switch would cost.
"""

from __future__ import annotations

import datetime
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from codec import AutoCodec, Codec, get_codec, native_to_builtins
from loadgen.config import LoadgenSettings
from loadgen.recording import Record
from schemas.errors import DecodeError
from service.kafka.headers import CONTENT_TYPE
from service.shadow.verdict import located

_INT_RANGE: Final = (-(2**63), 2**64)
"""The ints every wire format holds: int64 and uint64 together."""
_PB_PATH: Final = re.compile(r" at [A-Za-z_][\w]*\.([\w.\[\]]+?)\.?$")
"""protobuf's json_format ends a ParseError with `at Message.field.sub.`."""
_MAX_REASON: Final = 160


def content_type(r: Record) -> bytes | None:
    """The recorded `content-type` header (None: the record has none)."""
    return next((v for k, v in r.headers if k == CONTENT_TYPE), None)


@dataclass
class Carried:
    """What a transcoding replay sends, and what it could not carry.

    Attributes:
        indexes: the records sent, as indexes into the recording (in order).
        values: their values in the target format, as recorded when `as_recorded`.
        as_recorded: per value, whether it is the recorded bytes unchanged.
        not_carried: `"<path>: <reason>"` -> records left out for it.
        first_left_out: where the first left-out record was (`partition P offset O`).
    """

    indexes: list[int] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    as_recorded: list[bool] = field(default_factory=list)
    not_carried: Counter[str] = field(default_factory=Counter)
    first_left_out: str = ""


def carry(
    s: LoadgenSettings,
    records: list[Record],
    done: Callable[[int], None] = lambda n: None,
) -> Carried:
    """Each record of `records` in `s.transcode`'s wire format, or why it is not.

    `done(n)` is told every 1000 records how many are done (a progress bar).
    """
    assert s.transcode is not None  # noqa: S101  # checked by the caller
    forms = s.forms
    auto = get_codec("auto", forms, auto_json=s.transcode_json)
    assert isinstance(auto, AutoCodec)  # noqa: S101  # get_codec's contract
    target = get_codec(s.transcode, forms)
    out = Carried()
    for i, r in enumerate(records):
        if i % 1000 == 0:
            done(i)
        try:
            source = auto.codec_for(content_type(r))
        except DecodeError:
            why = "record: unknown content-type"
        else:
            if source.content_type == target.content_type:
                out.indexes.append(i)
                out.values.append(r.value)
                out.as_recorded.append(True)
                continue
            value, why = _transcode(source, target, r.value or b"", s.schema_spec)
            if value is not None:
                out.indexes.append(i)
                out.values.append(value)
                out.as_recorded.append(False)
                continue
        out.not_carried[why] += 1
        if not out.first_left_out:
            out.first_left_out = f"partition {r.partition} offset {r.offset}: {why}"
    done(len(records))
    return out


def _transcode(
    source: Codec[Any], target: Codec[Any], value: bytes, schema: str
) -> tuple[bytes | None, str]:
    """(the value in `target`'s format, "") or (None, "<path>: <reason>")."""
    try:
        native = source.decode(value)
    except DecodeError as exc:
        path, why = located(exc)  # the field your model refused, if it names one
        where = path if path and path != "$" else "record"
        return None, f"{where}: does not decode as {schema!r} ({why or _short(exc)})"
    # As JSON carries them (datetimes and bytes as text), which every codec's
    # from_builtins takes; a pydantic model's own dump does not.
    data = native_to_builtins(native)
    try:
        return target.encode(target.from_builtins(data)), ""
    except Exception as exc:  # any codec's refusal is a finding, not a crash
        return None, explain(data, exc, target.name)


def explain(data: Any, exc: Exception, target: str) -> str:
    """`"<path>: <reason>"` for a value `target` could not encode."""
    for path, leaf in _leaves(data, ""):
        wide = isinstance(leaf, int) and not _INT_RANGE[0] <= leaf < _INT_RANGE[1]
        if wide:
            return f"{path}: an int wider than 64 bits ({target} cannot hold it)"
    match = _PB_PATH.search(str(exc))
    if match is not None:
        path = match.group(1)
        leaf = dict(_leaves(data, "")).get(path)
        if isinstance(leaf, str) and _naive_datetime(leaf):
            return f"{path}: a datetime without a timezone ({target}'s Timestamp holds instants)"
        return f"{path}: {_short(exc)}"
    return f"record: {type(exc).__name__}: {_short(exc)}"


def _leaves(data: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(path, value) of every leaf: `a.b`, `items[2].sku`, `tags[0]`."""
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(data, list):
        for j, v in enumerate(data):
            yield from _leaves(v, f"{path}[{j}]")
    else:
        yield path, data


def _naive_datetime(text: str) -> bool:
    try:
        parsed = datetime.datetime.fromisoformat(text)
    except ValueError:
        return False
    return parsed.tzinfo is None


def _short(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= _MAX_REASON else text[: _MAX_REASON - 3] + "..."
