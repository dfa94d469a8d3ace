"""A replayed record in the case's wire format: as recorded, transcoded, or not carried.

A record whose wire format (its `content-type`, JSON when it has none) is the
target codec's is sent as recorded, byte for byte: the JSON cases of an A/B decode
the team's own bytes (key order, aliases, unknown fields, numbers written as
strings), not the tool's re-encoding of them. Only a record in another wire format
is transcoded: decoded with the codec its `content-type` names (JSON: with the
JSON codec of the schema's own form), re-encoded with the target. With `--framing
confluent` (a case of `codec-ab --framing confluent --replay`), the target is framed
with the schema it registers, a recorded frame is sent as recorded when its schema
has the target's registry type, and any other record is decoded (a frame through
the registry) and re-encoded framed.

A record the target cannot carry is left out of the replay and counted under
`"<field path>: <reason>"`, so the report can say what a switch would cost: it does
not decode with the schema, the target refuses one of its values (a datetime without
a timezone for protobuf's `Timestamp`, an int wider than 64 bits), or the target
takes it but reads a different value back. Every transcoded record is decoded again
with the target and compared field by field with the source's decode, as a shadow
decode compares them (`schemas.compare.diff`): a naive datetime that FlatBuffers,
Cap'n Proto or Avro store as an instant and read back in UTC, a float a format
narrows to 32 bits, an int a 64-bit format wraps, a set whose members change. So the
records a replay counts as not carried are the ones `--shadow-codec` shows as
`differ` or `shadow_rejected`, never a value sent changed. The check costs one
decode and one comparison per transcoded record, before the run, never in it.
"""

from __future__ import annotations

import ast
import contextlib
import datetime
import math
import re
import struct
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from codec import AutoCodec, Codec, get_codec, native_to_builtins
from loadgen.config import LoadgenSettings
from loadgen.recording import Record
from schemas.compare import diff, read_native
from schemas.errors import ConfigError, DecodeError
from schemas.shape import ListOf, MapOf, MessageShape, TupleOf, TypeShape, UnionOf
from schemas.wire_shape import shape_of
from service.kafka.headers import CONTENT_TYPE, last_header
from service.shadow.verdict import located

_INT_RANGE: Final = (-(2**63), 2**64)
"""The ints every wire format holds: int64 and uint64 together."""
_PB_PATH: Final = re.compile(r" at [A-Za-z_][\w]*\.([\w.\[\]-]+?)\.*$")
"""protobuf's json_format ends a ParseError with `at Message.field.sub.` (two dots
after a field inside a repeated message: `at M.items[0].at..`)."""
_NAIVE: Final = {"protobuf": "protobuf's Timestamp holds instants"}
_MAX_REASON: Final = 160
_JSON: Final = msgspec.json.Encoder(order="sorted").encode
_INDEXES: Final = re.compile(r"\[\d+\]")
_STEP: Final = re.compile(
    r"\.(?P<name>[A-Za-z_]\w*)"
    r"|\[(?P<key>-?\d+|'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\]"
    r"|\[(?P<repr>[^\[\]]+)\]"
)
"""One step of a `diff` path: `.field`, `[2]`, `['key']` or `[UUID('...')]` (a map
key's repr; one that is no literal is found by its repr)."""


def content_type(r: Record) -> bytes | None:
    """The recorded `content-type` header, the last if several (None: none)."""
    return last_header(r.headers, CONTENT_TYPE)


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
    auto: Any = get_codec("auto", forms, auto_json=s.transcode_json)
    assert isinstance(auto, AutoCodec)  # noqa: S101  # get_codec's contract
    target: Any = get_codec(s.transcode, forms)
    if s.framing == "confluent":
        auto, target = _framed(s, auto, target)
    shape = shape_of(forms)
    out = Carried()
    for i, r in enumerate(records):
        if i % 1000 == 0:
            done(i)
        try:
            source = auto.codec_for(content_type(r))
            same = _same_wire(auto, source, target, r.value or b"")
        except DecodeError as exc:
            why = "record: " + (
                "unknown content-type" if exc.reason == "content_type" else _short(exc)
            )
        else:
            if same:
                out.indexes.append(i)
                out.values.append(r.value)
                out.as_recorded.append(True)
                continue
            value, why = transcode(source, target, r.value or b"", s.schema_spec, shape)
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


def _framed(s: LoadgenSettings, auto: AutoCodec, target: Codec[Any]) -> Any:
    """`auto` recognising frames (decoded through the registry) and `target` framed
    with its schema registered (`--framing confluent`)."""
    from codec.registry import RegistryClient, frame_auto, frame_codec
    from codec.registry.client import RegistryUnavailable

    client = RegistryClient(s.registry.access())
    kinds = {"AVRO": "avro", "PROTOBUF": "protobuf", "JSON": s.transcode_json}
    by_type = {}
    for kind, name in kinds.items():
        with contextlib.suppress(ConfigError):  # a form the schema refuses
            by_type[kind] = get_codec(name, s.forms)  # type: ignore[arg-type]
    framed = frame_codec(target, client)
    subject = s.registry.subject(s.topic, framed.record_name())
    try:
        framed.register(subject)
    except (RegistryUnavailable, ValueError) as exc:
        raise ConfigError(f"config error: cannot register {subject!r}: {exc}") from None
    return frame_auto(auto, by_type, client), framed


def _same_wire(auto: Any, source: Any, target: Any, value: bytes) -> bool:
    """Whether `value` is sent as recorded: in `target`'s wire format; framed,
    a frame whose schema has the framed target's registry type."""
    schema_type = getattr(target, "schema_type", None)
    if schema_type is None:
        return bool(source.content_type == target.content_type)
    return value[:1] in (b"\x00", b"\x01") and auto.schema_type(value) == schema_type


def transcode(
    source: Codec[Any],
    target: Codec[Any],
    value: bytes,
    schema: str,
    shape: MessageShape,
) -> tuple[bytes | None, str]:
    """(the value in `target`'s format, "") or (None, "<path>: <reason>").

    The value is sent only when `target` reads back what `source` decoded.
    """
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
        encoded = target.encode(target.from_builtins(data))
    except Exception as exc:  # any codec's refusal is a finding, not a crash
        return None, explain(data, exc, target.name)
    why = changed(native, encoded, target, shape, data)
    return (None, why) if why else (encoded, "")


def changed(
    native: Any,
    encoded: bytes,
    target: Codec[Any],
    shape: MessageShape,
    data: dict[str, Any] | None = None,
) -> str:
    """The first field `target` reads back from `encoded` other than `native` has
    it, as `"<path>: <reason>"` (paths by wire key, no indexes); "" for none.

    Equal is what a shadow decode calls agree (`schemas.compare.diff`). With
    `data` (`native` as builtins), a read-back whose builtins are the same JSON
    text is equal without that comparison: about 13 us instead of 100 (Avro, a
    record of nine fields); any difference in the text (an offset, a key order)
    is compared field by field.
    """
    try:
        back = target.decode(encoded)
    except Exception as exc:  # any failure to read back is a finding, not a crash
        return f"record: {target.name} does not read back what it wrote ({_short(exc)})"
    if data is not None and _same_json(data, target, back):
        return ""
    expected = read_native(native, shape)
    actual = read_native(back, shape)
    found = diff(expected, actual, shape, "")
    if not found:
        return ""
    path = found[0][0]
    before, after = _at(expected, path), _at(actual, path)
    return f"{wire_path(path, shape)}: {lost(before, after, target.name)}"


def _same_json(data: dict[str, Any], target: Codec[Any], back: Any) -> bool:
    """True when `back` as builtins is `data` as JSON text: the same values (a
    naive or narrowed value, 1 for 1.0 or True, is other text)."""
    try:
        return bool(_JSON(data) == _JSON(target.to_builtins(back)))
    except Exception:  # not comparable as text: compared field by field
        return False


def lost(before: Any, after: Any, target: str) -> str:
    """What codec `target` changed in a value, in words that quote no value."""
    if isinstance(before, datetime.datetime) and isinstance(after, datetime.datetime):
        if before.tzinfo is None and after.tzinfo is not None:
            held = _NAIVE.get(target, f"{target} holds instants: it reads back as UTC")
            return f"a datetime without a timezone ({held})"
        if before.tzinfo is not None and after.tzinfo is None:
            return f"a datetime with a timezone ({target} reads it back without one)"
        return f"a datetime {target} reads back as another instant"
    if isinstance(before, int) and not isinstance(before, bool):
        if not _INT_RANGE[0] <= before < _INT_RANGE[1]:
            return f"an int wider than 64 bits ({target} cannot hold it)"
        return f"an int {target} reads back as another value"
    if isinstance(before, float) and isinstance(after, float):
        if math.isfinite(before) and after == _as_float32(before):
            return f"a float {target} narrows to 32 bits"
        return f"a float {target} reads back as another value"
    if isinstance(before, frozenset | set):
        return f"a set whose members {target} changes"
    if _naive_keys(before) and isinstance(after, dict) and set(before) != set(after):
        held = _NAIVE.get(target, f"{target} holds instants: it reads back as UTC")
        return f"a datetime map key without a timezone ({held})"
    return f"a value {target} reads back changed"


def _naive_keys(value: Any) -> bool:
    """True for a map with a naive datetime among its keys."""
    return isinstance(value, dict) and any(
        isinstance(k, datetime.datetime) and k.tzinfo is None for k in value
    )


def _as_float32(value: float) -> float:
    try:
        narrowed: float = struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        return math.inf
    return narrowed


def _at(value: Any, path: str) -> Any:
    """The part of a `read_native` value at a `diff` path (None: not found)."""
    pos = 0
    while pos < len(path):
        step = _STEP.match(path, pos)
        if step is None:
            return None
        pos = step.end()
        name, key = step["name"], step["key"]
        if step["repr"] is not None and isinstance(value, dict):
            found = [v for k, v in value.items() if repr(k) == step["repr"]]
            value = found[0] if found else None
            continue
        try:
            value = value[name if name is not None else ast.literal_eval(key)]
        except (KeyError, IndexError, TypeError, ValueError, SyntaxError):
            return None
    return value


def wire_path(path: str, shape: MessageShape) -> str:
    """A `diff` path as the report counts fields: wire keys, no indexes or keys
    (`.created_at` -> `createdAt`, `.items[2].unit_price` -> `items.unitPrice`)."""
    out: list[str] = []
    here: TypeShape | None = shape
    for step in _STEP.finditer(path):
        name, key = step["name"], step["key"]
        if name is None:  # into a list's item, a map's value, a tuple's position
            if isinstance(here, ListOf):
                here = here.item
            elif isinstance(here, MapOf):
                here = here.value
            elif isinstance(here, TupleOf) and (key or "").lstrip("-").isdigit():
                here = here.items[int(key)] if int(key) < len(here.items) else None
            continue
        f = next(
            (f for msg in _messages(here) for f in msg.fields if f.name == name), None
        )
        out.append(name if f is None else f.wire)
        here = None if f is None else f.type
    return ".".join(out) or "record"


def _messages(shape: TypeShape | None) -> list[MessageShape]:
    if isinstance(shape, MessageShape):
        return [shape]
    if isinstance(shape, UnionOf):
        return [m for m in shape.members if isinstance(m, MessageShape)]
    return []


def explain(data: Any, exc: Exception, target: str) -> str:
    """`"<path>: <reason>"` for a value `target` could not encode (the path
    without list indexes: a reason counts records by field)."""
    for path, leaf in _leaves(data, ""):
        wide = isinstance(leaf, int) and not _INT_RANGE[0] <= leaf < _INT_RANGE[1]
        if wide:
            where = _INDEXES.sub("", path)
            return f"{where}: an int wider than 64 bits ({target} cannot hold it)"
    match = _PB_PATH.search(str(exc))
    if match is not None:
        path, leaf = _leaf_at(data, match.group(1))
        where = _INDEXES.sub("", path)
        if isinstance(leaf, str) and _naive_datetime(leaf):
            held = _NAIVE.get(target, f"{target} holds instants")
            return f"{where}: a datetime without a timezone ({held})"
        return f"{where}: {_short(exc)}"
    return f"record: {type(exc).__name__}: {_short(exc)}"


def _leaf_at(data: Any, pb_path: str) -> tuple[str, Any]:
    """The leaf of `data` at a protobuf error's path, and its path in `data`:
    a union's oneof member is a step of protobuf's path and none of the data's
    (`payload.picked_up.at` is `payload.at`)."""
    leaves = dict(_leaves(data, ""))
    if pb_path in leaves:
        return pb_path, leaves[pb_path]
    steps = pb_path.split(".")
    for path, leaf in leaves.items():
        mine = path.split(".")
        if mine[-1] == steps[-1] and _within(mine, steps):
            return path, leaf
    return pb_path, None


def _within(steps: list[str], more: list[str]) -> bool:
    """`steps` in order within `more` (which may hold further steps)."""
    rest = iter(more)
    return all(step in rest for step in steps)


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
