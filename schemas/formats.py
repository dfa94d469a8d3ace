"""Which codec's format carries which shape: every refusal is for one codec, with why.

A pydantic model is always run by the pydantic codecs (it is their form; orjson's
one limit, an int bounded past 64 bits, refuses orjson+pydantic); each other codec
runs a derived form, and a part of the shape its format has no type for refuses that
codec alone, one "PATH: REASON" line per field, the reason naming the format. `carriage` walks a whole shape (union members and nested messages included)
so that one pass names every (codec, field); the derived FlatBuffers, Cap'n Proto and
Avro schemas add their own naming rules when built (`codec.codec_refusal`).

What each type becomes in each codec (native, carried as a string or number with
the conversion back, or refused and why) is docs/types.md, generated from these
rules (`schemas.user.catalogue`); the conversions are `schemas.carried`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from schemas.errors import ConfigError
from schemas.shape import (
    Choice,
    Foreign,
    ListOf,
    MapOf,
    MessageShape,
    Scalar,
    TupleOf,
    TypeShape,
    UnionOf,
    describe,
    fits_64_bits,
)
from schemas.unions import union_reasons

PYDANTIC_CODECS: Final = ("json+pydantic", "json-stdlib+pydantic", "orjson+pydantic")
"""The codecs that run the pydantic form (a user's model as is)."""
MSGSPEC_CODECS: Final = ("msgspec-json", "msgspec-msgpack")
BINARY_CODECS: Final = ("protobuf", "flatbuffers", "capnp", "avro")
DERIVED_CODECS: Final = (*MSGSPEC_CODECS, *BINARY_CODECS)
"""The codecs that run a form derived from a pydantic model."""
ORJSON: Final = PYDANTIC_CODECS[2]
"""The one pydantic codec whose JSON library has a limit: ints of 64 bits."""
FORMAT_NAMES: Final = {
    "msgspec-json": "msgspec",
    "msgspec-msgpack": "msgspec",
    "protobuf": "protobuf",
    "flatbuffers": "FlatBuffers",
    "capnp": "Cap'n Proto",
    "avro": "Avro",
}
_LISTS: Final = {
    "protobuf": "repeated field",
    "flatbuffers": "vector",
    "capnp": "List",
    "avro": "array",
}
_OWN: Final = {"msgspec": MSGSPEC_CODECS, "proto": ("protobuf",)}
NULLABLE_LIST_REASON: Final = (
    "a protobuf repeated or map field cannot be None (it has no presence); "
    "declaring it without | None (default empty) makes pydantic and msgspec reject "
    "the messages that send null for it"
)
TEXT_FOREIGN: Final = ("capnp", "avro", "protobuf", "flatbuffers")
"""Binary codecs that carry a type with a text form (`Foreign.text`) as a string,
made the user's type again: at decode (msgspec's dec_hook, in Cap'n Proto's and
Avro's conversion to the Struct), or when read (protobuf's reading, FlatBuffers'
view)."""
FLATBUFFERS_UNION_INSIDE: Final = (
    "a FlatBuffers union inside a vector or map is not read by the Python runtime "
    "here (a union field of a table is)"
)
NAIVE_REASON: Final = (
    "a protobuf Timestamp is an instant: it never equals a naive datetime"
)


@dataclass(slots=True)
class Refusals:
    """Collects every unmappable field, so one error names them all.

    A refusal names the codecs it concerns: some (e.g. only `protobuf`) leave the
    schema usable with the others. One that names none concerns `everyone`: the
    codecs of derived forms for a pydantic model (its own codecs always run), or,
    when `everyone` is empty (a Struct or `.proto` source, whose pydantic form is
    derived), every form, which makes the schema unusable.

    `notes` collects what is reported, not refused: code of the user's form
    (validators, computed fields) the derived forms do not run, as
    (path, what, effect) triples (`schemas.user.validators`).
    """

    found: list[str] = field(default_factory=list)
    by_codec: dict[str, list[str]] = field(default_factory=dict)
    everyone: tuple[str, ...] = ()
    notes: list[tuple[str, str, str]] = field(default_factory=list)
    on_struct: dict[tuple[str, str], str] = field(default_factory=dict)
    """(path, what) of a note -> why a derived Struct cannot run it ("": it can,
    with `--run-validators`: `schemas.user.struct_validators`)."""
    serialized: list[tuple[str, str]] = field(default_factory=list)
    """(path, serializer) of every value a serializer of the team's writes: what
    the derived forms make of it is tried (`schemas.user.model.serialized`)."""

    def add(self, path: str, reason: str, codecs: tuple[str, ...] = ()) -> Scalar:
        """Record a refusal; return a placeholder shape so reading can go on."""
        codecs = codecs or self.everyone
        line = f"{path}: {reason}"
        if codecs:
            for codec in codecs:
                lines = self.by_codec.setdefault(codec, [])
                if line not in lines:
                    lines.append(line)
        else:
            self.found.append(line)
        return Scalar("str")

    def raise_any(self) -> None:
        """Raise `ConfigError` naming every refusal, one line per field.

        Raises:
            ConfigError: "schema error: PATH: REASON" for one refusal; for more,
                "schema error: N fields cannot be mapped:" and a line for each.
        """
        if len(self.found) == 1:
            raise ConfigError("schema error: " + self.found[0])
        if self.found:
            raise ConfigError(refusal_text(self.found))


def refusal_text(found: list[str], what: str = "mapped") -> str:
    """Several refusals as one error text, a line per field."""
    lines = "".join(f"\n  {line}" for line in found)
    return f"schema error: {len(found)} fields cannot be {what}:{lines}"


def carriage(root: MessageShape, source: str) -> dict[str, list[str]]:
    """Every (codec, field) whose format cannot carry a part of `root`.

    Args:
        root: the schema's shape.
        source: the user's own form (`pydantic`, `msgspec`, `proto`): the codecs
            that run it carry everything it holds.

    Returns:
        codec -> one "PATH: REASON" line per field, in declaration order.
    """
    return walk(root, source, node_reasons, nullable_lists=True)


NodeRule = Callable[[TypeShape, str], list[str]]
"""(a part of a shape, a codec) -> what to say of that part for that codec."""


def walk(
    root: MessageShape, source: str, rule: NodeRule, *, nullable_lists: bool = False
) -> dict[str, list[str]]:
    """`rule` applied to every part of `root` for every derived codec, a line per
    (codec, field) "PATH: TEXT" (the first text of a path only).

    Args:
        root: the schema's shape.
        source: the user's own form: the codecs that run it are skipped.
        rule: what to say of one part for one codec.
        nullable_lists: also refuse protobuf a nullable list or map field.
    """
    skip = _OWN.get(source, ())
    out: dict[str, list[str]] = {}
    _walk_message(root, root.name, out, set(skip), set(), rule, nullable_lists)
    return out


def _walk_message(
    msg: MessageShape,
    path: str,
    out: dict[str, list[str]],
    skip: set[str],
    seen: set[int],
    rule: NodeRule,
    nullable_lists: bool,
) -> None:
    if id(msg) in seen:
        return
    seen.add(id(msg))
    for f in msg.fields:
        where = f"{path}.{f.name}"
        if nullable_lists and f.nullable and isinstance(f.type, ListOf | MapOf):
            _add(out, skip, ("protobuf",), where, NULLABLE_LIST_REASON)
        _walk(f.type, where, out, skip, (seen, rule, nullable_lists))


def _walk(
    shape: TypeShape,
    path: str,
    out: dict[str, list[str]],
    skip: set[str],
    how: tuple[set[int], NodeRule, bool],
) -> None:
    seen, rule, nullable_lists = how
    if isinstance(shape, MessageShape):
        _walk_message(shape, path, out, skip, seen, rule, nullable_lists)
        return
    for codec in (*DERIVED_CODECS, ORJSON):
        for reason in rule(shape, codec):
            _add(out, skip, (codec,), path, reason)
    if isinstance(shape, ListOf):
        _walk(shape.item, path + "[]", out, skip, how)
    elif isinstance(shape, MapOf):
        _walk(shape.key, path + "{key}", out, skip, how)
        _walk(shape.value, path + "{}", out, skip, how)
    elif isinstance(shape, TupleOf):
        for i, item in enumerate(shape.items):
            _walk(item, f"{path}[{i}]", out, skip, how)
    elif isinstance(shape, UnionOf):
        for member in shape.members:
            _walk(member, f"{path}<{describe(member)}>", out, skip, how)


def _add(
    out: dict[str, list[str]],
    skip: set[str],
    codecs: tuple[str, ...],
    path: str,
    reason: str,
) -> None:
    for codec in codecs:
        if codec not in skip:
            lines = out.setdefault(codec, [])
            if not any(line.startswith(f"{path}: ") for line in lines):
                lines.append(f"{path}: {reason}")


def node_reasons(shape: TypeShape, codec: str) -> list[str]:
    """Why `codec`'s format cannot carry this part of a shape (not its parts).

    The derived forms call it for the shapes they have no type for, so that a
    form printed on its own names the same reason.
    """
    if codec == ORJSON:  # orjson writes no int past 64 bits, reads one as a float
        return _scalar(shape, codec, "orjson") if isinstance(shape, Scalar) else []
    fmt = FORMAT_NAMES.get(codec)
    if fmt is None:  # a pydantic codec: the user's own model carries everything
        return []
    rule = _RULES.get(type(shape))
    return [] if rule is None else rule(shape, codec, fmt)


def _scalar(shape: TypeShape, codec: str, fmt: str) -> list[str]:
    assert isinstance(shape, Scalar)  # noqa: S101  (dispatched by type)
    kind, out = shape.kind, []
    if (
        kind == "int"
        and not fits_64_bits(shape.constraints)
        and codec != MSGSPEC_CODECS[0]
    ):
        wire = "MessagePack" if codec == "msgspec-msgpack" else fmt
        out.append(f"its bounds allow ints past 64 bits, which {wire} cannot carry")
    if kind == "datetime" and shape.constraints.tz is False and codec == "protobuf":
        out.append(NAIVE_REASON)
    if kind in _TIME_KINDS and codec in BINARY_CODECS and (kind, codec) not in TIMES:
        out.append(_TIME_KINDS[kind].get(codec) or f"{fmt} has no {kind} type")
    return out


TIMES: Final = frozenset(
    {("date", "avro")}
    | {(k, c) for k in ("date", "time", "timedelta") for c in ("capnp", "flatbuffers")}
)
"""Carried: Avro's `date` logical type (a date, both ways); Cap'n Proto's `Text`
and FlatBuffers' `string` holding msgspec's ISO 8601 text (`schemas.carried`)."""
_TIME_KINDS: Final[dict[str, dict[str, str]]] = {
    "date": {
        "protobuf": "no protobuf type decodes to a date (a Timestamp is an instant)",
    },
    "time": {
        "protobuf": "no protobuf type decodes to a time of day",
        "avro": "Avro's time-micros holds no UTC offset, which a time may carry",
    },
    "timedelta": {
        "protobuf": "google.protobuf.Duration is not mapped (its JSON form differs "
        "from pydantic's and msgspec's)",
        "avro": "Avro's duration (months, days, milliseconds) is not a timedelta",
    },
}


def _choice(shape: TypeShape, codec: str, fmt: str) -> list[str]:
    assert isinstance(shape, Choice)  # noqa: S101  (dispatched by type)
    cls = shape.enum
    if cls is None or codec not in ("protobuf", "flatbuffers"):
        return []
    kind, mixin = (
        (str, "StrEnum") if isinstance(shape.values[0], str) else (int, "IntEnum")
    )
    if issubclass(cls, kind):
        return []
    return [
        f"{cls.__name__} is a plain Enum: {fmt} decodes its values as "
        f"{kind.__name__}, which never equal a plain Enum member; derive it from {mixin}"
    ]


def _list(shape: TypeShape, codec: str, fmt: str) -> list[str]:
    assert isinstance(shape, ListOf)  # noqa: S101  (dispatched by type)
    out = []
    if codec in BINARY_CODECS and shape.container in ("set", "frozenset"):
        out.append(
            f"{fmt} has no set type: its {_LISTS[codec]} decodes to a list, with "
            "order and duplicates"
        )
    elif codec in BINARY_CODECS and shape.container == "tuple":
        out.append(f"{fmt} decodes a tuple as a list (its {_LISTS[codec]})")
    if codec == "flatbuffers" and _is_choice(shape.item):
        out.append(FLATBUFFERS_UNION_INSIDE)
    if codec == "protobuf" and isinstance(shape.item, ListOf | MapOf | TupleOf):
        out.append(
            "a list or map inside a list needs a wrapper message in protobuf, and "
            "a model holding it changes the JSON wire too (old messages no longer "
            "decode)"
        )
    return out


def _is_choice(shape: TypeShape) -> bool:
    """A union of two members or more (`X | None` alone is a None, not a choice)."""
    return isinstance(shape, UnionOf) and len(shape.members) > 1


def _map(shape: TypeShape, codec: str, fmt: str) -> list[str]:
    assert isinstance(shape, MapOf)  # noqa: S101  (dispatched by type)
    out = []
    key = shape.key
    if codec in BINARY_CODECS and not _key_carried(key, codec):
        allowed = _KEYS.get(codec, "str or int")
        out.append(f"{fmt} map keys are {allowed} here, not {describe(key)}")
    if codec == "flatbuffers" and _is_choice(shape.value):
        out.append(FLATBUFFERS_UNION_INSIDE)
    if codec == "protobuf" and isinstance(shape.value, ListOf | MapOf | TupleOf):
        out.append(
            "a list or map inside a map needs a wrapper message in protobuf, and "
            "a model holding it changes the JSON wire too (old messages no longer "
            "decode)"
        )
    return out


_KEYS: Final = {
    "capnp": "any scalar but bool",
    "avro": "str, int or an enum or Literal",
}
"""Map keys beyond str and int: Cap'n Proto's entries hold the key in its own
form, Avro's map keys are text; msgspec's conversion into the Struct makes the
key's type again."""


def _key_carried(key: Scalar | Choice, codec: str) -> bool:
    if isinstance(key, Scalar) and key.kind in ("str", "int"):
        return True
    if codec == "capnp":
        return not (isinstance(key, Scalar) and key.kind == "bool")
    return codec == "avro" and isinstance(key, Choice)


def _tuple(shape: TypeShape, codec: str, fmt: str) -> list[str]:
    if codec not in BINARY_CODECS:
        return []
    return [f"{fmt} has no fixed-length tuple (its {_LISTS[codec]} decodes a list)"]


def _union(shape: TypeShape, codec: str, fmt: str) -> list[str]:
    assert isinstance(shape, UnionOf)  # noqa: S101  (dispatched by type)
    return union_reasons(shape, codec, fmt)


def _foreign(shape: TypeShape, codec: str, fmt: str) -> list[str]:
    assert isinstance(shape, Foreign)  # noqa: S101  (dispatched by type)
    if codec in MSGSPEC_CODECS and shape.name == "Any":
        return []  # msgspec's own Any
    if shape.text is not None and codec in (*MSGSPEC_CODECS, *TEXT_FOREIGN):
        return []  # carried as its text (`schemas.carried`)
    return [f"{fmt} has no {shape.name} type"]


_RULES: Final[dict[type, Callable[[TypeShape, str, str], list[str]]]] = {
    Scalar: _scalar,
    Choice: _choice,
    ListOf: _list,
    MapOf: _map,
    TupleOf: _tuple,
    UnionOf: _union,
    Foreign: _foreign,
}


def _article(fmt: str) -> str:
    return f"an {fmt}" if fmt[0] in "AEIOU" else f"a {fmt}"
