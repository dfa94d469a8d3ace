"""Seeded synthetic payloads for a user's schema, as builtins every codec accepts.

Like `loadgen.payloads.make_payloads`, the payloads are plain JSON-like data (dicts,
lists, str, int, float, bool, None) that each codec's `from_builtins` turns into its
native object; the same seed gives the same payloads. Values JSON has no type for are
written as JSON carries them, so that every form reads them back exactly:

| shape | builtins value |
| --- | --- |
| datetime | RFC 3339 text in UTC with microseconds (`2026-03-01T12:00:00.123456Z`); naive-only: no offset; edges: at other offsets too (`+05:30`), a plain `datetime` naive too |
| date, time, timedelta | ISO 8601 text (`2026-03-01`, `12:00:00.123456`, `P3DT1200S`) |
| set, frozenset, tuple | a list (distinct items for a set: several, as its bounds allow) |
| int | small (+-1e6); edges: past 64 bits in one payload of four when its bounds allow it |
| float | four decimals; edges: every fourth one all 53 bits (never exact in 32 bits) |
| union | one member's value, picked at random (None too when it is nullable) |
| `Foreign` (`IPv4Address`, `HttpUrl`...) | its sample text; else the field's default, or None |
| bytes | standard base64 text |
| UUID | its canonical text (version 4) |
| Decimal | its text, with `decimal_places` places (2 when unset) and `max_digits` digits |
| str with a `pattern` | a string the pattern matches (`schemas.user.regex_strings`) |

| enum | the member's value |
| map with int keys | a dict with int keys |

With `SynthOptions(edges=True)` (`codec-schema check`) the payloads meet the values a
format may not carry faithfully whenever the model allows them: a naive datetime where
a format stores instants, an int no 64-bit format holds, a float a 32-bit format would
narrow; sets always have several distinct members, as their bounds allow.

Keys are the wire keys (a field's alias, else its name), as `model_dump(by_alias=True)`
and every codec's `from_builtins` have them. A pydantic model's payloads are drawn
as its input (the keys it reads), validated by the model and written as its producer
writes them (`schemas.user.model.producer`): its validators accept every one, its
serializers wrote it. A message that holds itself is drawn a few levels deep, then
with its lists empty and its optional fields left out.
"""

from __future__ import annotations

import base64
import datetime
import json
import random
import string
import uuid
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel

from schemas.errors import ConfigError
from schemas.formats import refusal_text
from schemas.shape import (
    Choice,
    Constraints,
    FieldShape,
    Foreign,
    ListOf,
    MapOf,
    MessageShape,
    Scalar,
    TupleOf,
    TypeShape,
    UnionOf,
    messages,
    parts,
)
from schemas.user.model.producer import accepted, round_trip, written
from schemas.user.numbers import draw_decimal, draw_float, draw_int
from schemas.user.regex_strings import matching, unsupported

_ALPHABET: Final = string.ascii_letters + string.digits + " -_.éüß€"
"""Mostly ASCII, plus a few multi-byte characters so that UTF-8 paths are exercised."""

_EPOCH: Final = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
_SPAN_S: Final = 10 * 365 * 86_400
_DEEP: Final = 3
"""Messages nested this deep (a message that holds itself) get empty lists and
maps, None where allowed, and their defaults."""
_NO_DEEPER: Final = 12
_OFFSETS: Final = (
    datetime.UTC,
    datetime.timezone(datetime.timedelta(hours=5, minutes=30)),
    datetime.timezone(datetime.timedelta(hours=-7)),
)
"""The offsets aware datetimes are written at: UTC and two others, so a format
that keeps only the instant is compared on the instant (equal), not the text."""


@dataclass(frozen=True, slots=True)
class SynthOptions:
    """Sizes of synthetic payloads; each range is inclusive (lo, hi).

    Attributes:
        list_len: items per list.
        map_len: entries per map.
        str_len: characters per string.
        bytes_len: bytes per bytes value.
        none_ratio: how often a nullable field is None (0 to 1).
        edges: also the values a format may not carry faithfully, where the
            model allows them (`codec-schema check`'s payloads): naive and
            aware datetimes at several offsets, ints past 64 bits, floats with
            all 53 bits. Off for load: a benchmark's payloads are values every
            codec it runs carries.
    """

    list_len: tuple[int, int] = (2, 4)
    map_len: tuple[int, int] = (1, 3)
    str_len: tuple[int, int] = (5, 20)
    bytes_len: tuple[int, int] = (4, 32)
    none_ratio: float = 0.25
    edges: bool = False


def make_payloads(
    shape: MessageShape,
    count: int,
    *,
    seed: int = 0,
    options: SynthOptions | None = None,
    stable: bool = True,
) -> list[dict[str, Any]]:
    """`count` varied payloads of `shape`, reproducible from `seed`.

    Args:
        shape: the schema's shape (a pydantic model's: each payload validated by
            the model and written as its producer writes it).
        count: how many.
        seed: their seed.
        options: their sizes and edges.
        stable: refuse a model that does not read back what it writes (`False`:
            return what it writes, for `codec-schema check` to report).

    Raises:
        ConfigError: when a field's bounds leave nothing to generate (a string
            `pattern` with look-arounds, say): every such field, a line each;
            when the model's validators reject nearly every draw, or (`stable`)
            the model does not read what it writes: one line.
    """
    _check_patterns(shape)
    synth = _Synth(random.Random(seed), options or SynthOptions())  # noqa: S311  (seeded test data, not secrets)
    model = shape.source
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return [synth.message(shape, shape.name) for _ in range(count)]
    out = [
        written(model, lambda: synth.message(shape, shape.name)) for _ in range(count)
    ]
    if stable and out and (bad := round_trip(model, out[0])) is not None:
        raise ConfigError(f"schema error: {shape.name}: {bad.line()}")
    return out


class _Synth:
    def __init__(self, rng: random.Random, options: SynthOptions) -> None:
        self._rng = rng
        self._options = options
        self._depth = 0

    def message(self, shape: MessageShape, path: str) -> dict[str, Any]:
        self._depth += 1
        model = shape.source
        try:
            if (
                self._depth > 1
                and isinstance(model, type)
                and issubclass(model, BaseModel)
            ):
                # held in another: accepted alone (the message is validated whole)
                return accepted(model, lambda: self._message(shape, path))[1]
            return self._message(shape, path)
        finally:
            self._depth -= 1

    def _message(self, shape: MessageShape, path: str) -> dict[str, Any]:
        if self._depth > _NO_DEEPER:
            first = ".".join(path.split(".")[:2])  # where it first holds itself
            raise ConfigError(
                f"schema error: {first}: {shape.name} holds itself in a required "
                "field: no finite message of it can be made"
            )
        out: dict[str, Any] = {}
        for f in shape.fields:
            where = f"{path}.{f.name}"
            if self._depth > _DEEP and not f.required:
                continue  # deep in a message that holds itself: its default
            key = f.read_key or f.wire
            if isinstance(f.type, Foreign) and f.type.sample is None:
                if f.nullable:
                    out[key] = None
                elif f.required:
                    raise ConfigError(
                        f"schema error: {where}: no synthetic {f.type.name} value "
                        "can be made (give the field a default)"
                    )
                continue  # its default stands in
            out[key] = self._field(f, where)
        return out

    def _field(self, f: FieldShape, path: str) -> Any:
        if f.nullable and (
            self._depth > _DEEP or self._rng.random() < self._options.none_ratio
        ):
            return None
        return self._value(f.type, path)

    def _value(self, shape: TypeShape, path: str) -> Any:
        if isinstance(shape, MessageShape):
            return self.message(shape, path)
        if isinstance(shape, Choice):
            return self._rng.choice(shape.values)
        if isinstance(shape, ListOf):
            wanted = (0, 0) if self._depth > _DEEP else self._options.list_len
            n = self._length(wanted, shape.constraints, path)
            if isinstance(shape.item, Foreign) and shape.item.sample is None:
                return []
            if shape.container in ("set", "frozenset"):
                return self._set(shape, n, path)
            return [self._value(shape.item, f"{path}[]") for _ in range(n)]
        if isinstance(shape, MapOf):
            return self._map(shape, path)
        if isinstance(shape, TupleOf):
            return [self._value(s, f"{path}[{i}]") for i, s in enumerate(shape.items)]
        if isinstance(shape, UnionOf):
            if shape.nullable and self._rng.random() < self._options.none_ratio:
                return None
            return self._value(self._rng.choice(shape.members), path)
        if isinstance(shape, Foreign):
            if shape.sample is None:
                raise ConfigError(
                    f"schema error: {path}: no synthetic {shape.name} value can be made"
                )
            return shape.sample(self._rng)
        return self._scalar(shape, path)

    def _set(self, shape: ListOf, n: int, path: str) -> list[Any]:
        """`n` distinct members (fewer when the item type has fewer values)."""
        members: list[Any] = []
        for _ in range(n * 10):
            if len(members) == n:
                break
            item = self._value(shape.item, f"{path}[]")
            if item not in members:
                members.append(item)
        return members

    def _map(self, shape: MapOf, path: str) -> dict[Any, Any]:
        wanted = (0, 0) if self._depth > _DEEP else self._options.map_len
        n = self._length(wanted, shape.constraints, path)
        keys: dict[Any, None] = {}
        # Distinct keys: a short key space may hold fewer than n; stop trying then.
        for _ in range(n * 10):
            if len(keys) == n:
                break
            keys[self._key(shape.key, f"{path}{{key}}")] = None
        return {k: self._value(shape.value, f"{path}{{}}") for k in keys}

    def _key(self, shape: Scalar | Choice, path: str) -> Any:
        if isinstance(shape, Choice):
            return self._rng.choice(shape.values)
        return self._scalar(shape, path)

    def _scalar(self, shape: Scalar, path: str) -> Any:
        rng, bounds = self._rng, shape.constraints
        if shape.holds == "json" and shape.inner is not None:
            return json.dumps(self._value(shape.inner, path), separators=(",", ":"))
        if shape.kind == "str":
            if bounds.pattern is not None:
                return self._matching(bounds, path)
            n = self._length(self._options.str_len, bounds, path)
            return "".join(rng.choice(_ALPHABET) for _ in range(n))
        if shape.kind == "uuid":
            return str(uuid.UUID(int=rng.getrandbits(128), version=4))
        if shape.kind == "decimal":
            return draw_decimal(self._rng, bounds, path)
        if shape.kind == "int":
            return draw_int(self._rng, bounds, self._options.edges, path)
        if shape.kind == "float":
            return draw_float(self._rng, bounds, self._options.edges, path)
        if shape.kind == "bool":
            return rng.random() < 0.5
        if shape.kind == "bytes":
            n = self._length(self._options.bytes_len, bounds, path)
            return base64.b64encode(rng.randbytes(n)).decode()
        if shape.kind == "timedelta":
            return f"P{rng.randrange(30)}DT{rng.randrange(86_400)}S"
        moment = _EPOCH + datetime.timedelta(
            seconds=rng.randrange(_SPAN_S), microseconds=rng.randrange(1_000_000)
        )
        if shape.kind == "date":
            return moment.date().isoformat()
        if shape.kind == "time":
            return moment.time().isoformat()
        # naive only: the wall-clock time, no offset; else in UTC, or with edges
        # at any offset, and naive too for a plain datetime (traffic may hold both).
        if bounds.tz is not False:
            pick = 0
            if self._options.edges:
                pick = rng.randrange(len(_OFFSETS) + (bounds.tz is None))
            if pick < len(_OFFSETS):
                aware = moment.astimezone(_OFFSETS[pick]).isoformat()
                return aware.replace("+00:00", "Z")
        return moment.replace(tzinfo=None).isoformat()

    def _matching(self, bounds: Constraints, path: str) -> str:
        assert bounds.pattern is not None  # noqa: S101  (the caller checked)
        text = matching(
            bounds.pattern, self._rng, bounds.min_length or 0, bounds.max_length
        )
        if text is None:
            raise ConfigError(
                f"schema error: {path}: no string of its lengths matches the "
                f"pattern {bounds.pattern!r}"
            )
        return text

    def _length(self, wanted: tuple[int, int], bounds: Constraints, path: str) -> int:
        lo = max(wanted[0], bounds.min_length or 0)
        hi = min(
            wanted[1], bounds.max_length if bounds.max_length is not None else wanted[1]
        )
        if lo > hi:  # the bounds win over the requested sizes
            lo = hi = bounds.min_length if bounds.min_length is not None else hi
        if bounds.max_length is not None and lo > bounds.max_length:
            raise ConfigError(f"schema error: {path}: min_length > max_length")
        return self._rng.randint(lo, hi)


def _check_patterns(root: MessageShape) -> None:
    """Refuse every pattern no string can be made for, a line per field."""
    found: list[str] = []
    for msg in messages(root):
        for f in msg.fields:
            for leaf in _leaves(f.type):
                pattern = leaf.constraints.pattern
                why = None if pattern is None else unsupported(pattern)
                if why is not None:
                    found.append(f"{msg.name}.{f.name}: {why}")
    if len(found) == 1:
        raise ConfigError("schema error: " + found[0])
    if found:
        raise ConfigError(refusal_text(found, "synthesized"))


def _leaves(shape: TypeShape) -> list[Scalar]:
    if isinstance(shape, Scalar):
        return [shape]
    if isinstance(shape, MessageShape):
        return []
    return [leaf for inner in parts(shape) for leaf in _leaves(inner)]
