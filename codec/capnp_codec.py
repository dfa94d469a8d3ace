"""The Cap'n Proto codec: pycapnp, the reference C++ reader behind Python objects.

The .capnp form is derived from the shape (`schemas.derive.capnp_schema`) and parsed in
process by `capnp.load` (pycapnp embeds the schema parser: no compiler binary).
Messages are the standard unpacked framing (segment table, then segments), read
zero-copy with `from_segments` after the segment table is checked here.

`decode` reads every field inside the call, into the schema's msgspec Struct: an
eager decode. Cap'n Proto's reader is lazy and checks bounds on every access, but
an error then surfaces only when the business logic reads the field, and pycapnp
has no verifier that is safe on untrusted bytes: `total_size`, which walks the
message, aborts the whole process (an uncaught C++ exception) on an out-of-bounds
pointer. Reading every field through the checked accessors is the only way to
turn every bad buffer into a `DecodeError` at decode, so a safe Cap'n Proto decode
in Python costs a full read. The values read are converted into the Struct by
`msgspec.convert` (keyed by the wire keys, the aliases): a UUID, Decimal, date, time
or timedelta stored as text becomes a `uuid.UUID`, `Decimal` or the `datetime` type
again, and the Struct's checks run.
"""

from __future__ import annotations

import datetime
import decimal
import hashlib
import struct as struct_module
import uuid
from collections.abc import Callable
from operator import attrgetter
from typing import Any, Final, Generic, TypeVar

import capnp
import msgspec

from codec.base import CAPNP, MalformedBuffer, as_encode_error, safe_decode
from codec.flatbuffers.accessors import cache_root
from codec.flatbuffers.layout import micros_reader, to_micros
from schemas.derive.capnp_schema import CapnpForm, capnp_form, capnp_name
from schemas.derive.msgspec_structs import hooks
from schemas.errors import ConfigError
from schemas.shape import (
    Choice,
    FieldShape,
    Foreign,
    ListOf,
    MapOf,
    MessageShape,
    Scalar,
    TypeShape,
    UnionOf,
    messages,
)
from schemas.unions import member_names, union_tags
from schemas.untagged import is_untagged, member_index

S = TypeVar("S", bound=msgspec.Struct)

MAX_SEGMENTS: Final = 512
"""More segments than this is refused (Cap'n Proto's own reader allows 512)."""
NESTING_LIMIT: Final = 64
"""Nested structs and lists allowed (Cap'n Proto's default)."""

_U32: Final = struct_module.Struct("<I").unpack_from
_READER_NAMES: Final = frozenset(dir(capnp.lib.capnp._DynamicStructReader))
Read = Callable[[Any], Any]


def segments(data: bytes) -> list[memoryview]:
    """The segments of a standard unpacked message, as views of `data` (no copy).

    Raises:
        MalformedBuffer: when the segment table does not describe `data` exactly.
    """
    if len(data) < 8:
        raise MalformedBuffer("shorter than a segment table")
    count = _U32(data, 0)[0] + 1
    if count > MAX_SEGMENTS:
        raise MalformedBuffer("too many segments")
    header = (4 + 4 * count + 7) // 8 * 8
    if len(data) < header:
        raise MalformedBuffer("segment table longer than the message")
    sizes = struct_module.unpack_from(f"<{count}I", data, 4)
    if header + 8 * sum(sizes) != len(data):
        raise MalformedBuffer("segment sizes do not match the message length")
    view, out, at = memoryview(data), [], header
    for size in sizes:
        out.append(view[at : at + 8 * size])
        at += 8 * size
    return out


def load_form(form: CapnpForm) -> Any:
    """The module `capnp.load` gives for `form` (its text written once to a cache)."""
    digest = hashlib.sha256(form.text.encode()).hexdigest()[:16]
    path = cache_root().parent / "capnp" / f"s{digest}.capnp"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        tmp = path.with_suffix(f".{digest}.tmp")
        tmp.write_text(form.text, encoding="utf-8")
        tmp.replace(path)
    try:
        return capnp.load(str(path))
    except Exception as exc:  # the parser's KjException: its first line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ConfigError(
            f"schema error: capnp: the derived schema was refused: {first}"
        ) from None


class CapnpCodec(Generic[S]):
    """`from_segments` and a full read into the Struct; builders to encode."""

    name = "capnp"
    content_type = CAPNP

    def __init__(self, struct: type[S], shape: MessageShape) -> None:
        self._struct = struct
        self.native_type = struct
        self.form = capnp_form(shape)
        for msg_id, fields in _field_names(shape):
            for fname in fields:
                if fname in _READER_NAMES:
                    raise ConfigError(
                        f"schema error: capnp: field {fname!r} of "
                        f"{self.form.structs[msg_id]} clashes with a pycapnp method"
                    )
        module = load_form(self.form)
        self._module = module
        root = getattr(module, self.form.structs[id(shape)])
        self._root = root
        self._shape = shape
        from_segments = root.from_segments
        read = _Reader(self.form).message(shape)
        convert = msgspec.convert
        self._hooks = carried = hooks(struct)
        dec_hook = carried.dec_hook

        def decode_unchecked(data: bytes) -> S:
            # The traversal limit is the message's own size: each field is read
            # once, so a valid message reads each word once, and a list of
            # zero-sized elements (each counted as a word) cannot make a small
            # message a long loop (the default, 8 Mi words, would allow 8 Mi items).
            limit = (len(data) >> 3) + 8
            reader = from_segments(segments(data), limit, NESTING_LIMIT)
            return convert(read(reader), struct, dec_hook=dec_hook)

        self.decode_unchecked = decode_unchecked

    def decode(self, data: bytes, /) -> S:
        return safe_decode(self.name, self.decode_unchecked, data)

    def encode(self, obj: S, /) -> bytes:
        try:
            builder = self._root.new_message()
            _fill(builder, self._shape, obj, self.form, self._module)
            return bytes(builder.to_bytes())
        except Exception as exc:
            raise as_encode_error(self.name, exc) from exc

    def to_builtins(self, obj: S, /) -> dict[str, Any]:
        out: dict[str, Any] = msgspec.to_builtins(obj, enc_hook=self._hooks.enc_hook)
        return out

    def from_builtins(self, data: dict[str, Any], /) -> S:
        return msgspec.convert(
            data, self._struct, dec_hook=self._hooks.dec_hook, str_keys=True
        )


def _field_names(shape: MessageShape) -> list[tuple[int, list[str]]]:
    return [(id(m), [capnp_name(f.name) for f in m.fields]) for m in messages(shape)]


class _Reader:
    """Readers of every field through pycapnp's checked accessors."""

    def __init__(self, form: CapnpForm) -> None:
        self._form = form
        self._done: dict[int, Read] = {}

    def message(self, msg: MessageShape) -> Read:
        found = self._done.get(id(msg))
        if found is not None:
            return found
        pairs: list[tuple[str, Read]] = []

        def read(r: Any) -> dict[str, Any]:
            return {name: one(r) for name, one in pairs}

        self._done[id(msg)] = read
        pairs.extend((f.wire, self._field(msg, f)) for f in msg.fields)
        return read

    def _field(self, msg: MessageShape, f: FieldShape) -> Read:
        get = attrgetter(capnp_name(f.name))
        if isinstance(f.type, MapOf):
            key, value = self.value(f.type.key), self.value(f.type.value)
            conv: Read = lambda v: {key(e.key): value(e.value) for e in v}  # noqa: E731
        else:
            conv = self.value(f.type)
        if f.nullable:
            return lambda r: None if (g := get(r)).which() == "none" else conv(g.value)
        return lambda r: conv(get(r))

    def value(self, shape: TypeShape) -> Read:
        if isinstance(shape, MessageShape):
            return self.message(shape)
        if isinstance(shape, UnionOf) and is_untagged(shape):  # (name, record):
            named = {  # the member the discriminant names (`UntaggedUnion.make`)
                capnp_name(n): (getattr(m, "name", ""), self.value(m))
                for m, n in zip(shape.members, member_names(shape), strict=True)
            }

            def read_named(v: Any) -> tuple[str, Any]:
                member, read = named[(w := v.which())]
                return member, read(getattr(v, w))

            return read_named
        if isinstance(shape, UnionOf):  # the wrapper struct: its set member
            by_name = {
                capnp_name(n): self.value(m)
                for m, n in zip(shape.members, member_names(shape), strict=True)
            }
            return lambda v: by_name[(w := v.which())](getattr(v, w))
        if isinstance(shape, ListOf):
            item = self.value(shape.item)
            return lambda v: [item(x) for x in v]
        if not isinstance(shape, Scalar) or shape.kind != "datetime":
            return _same
        return micros_reader(shape)


def _same(value: Any) -> Any:
    return value


def _fill(b: Any, msg: MessageShape, obj: Any, form: CapnpForm, module: Any) -> None:
    for f in msg.fields:
        value = getattr(obj, f.name)
        name = capnp_name(f.name)
        if f.nullable:
            group = getattr(b, name)
            if value is None:
                group.none = None
                continue
            _set(group, "value", f.type, value, form, module)
        else:
            _set(b, name, f.type, value, form, module)


def _set(
    b: Any, name: str, shape: TypeShape, value: Any, form: CapnpForm, module: Any
) -> None:
    if isinstance(shape, UnionOf):
        _set_union(b.init(name), shape, value, form, module)
    elif isinstance(shape, MessageShape):
        _fill(b.init(name), shape, value, form, module)
    elif isinstance(shape, MapOf):
        entries = b.init(name, len(value))
        for i, (k, v) in enumerate(value.items()):
            _set(entries[i], "key", shape.key, k, form, module)
            _set(entries[i], "value", shape.value, v, form, module)
    elif isinstance(shape, ListOf):
        items = b.init(name, len(value))
        for i, v in enumerate(value):
            _set_item(items, i, shape.item, v, form, module)
    else:
        setattr(b, name, _plain(shape, value))


def _set_item(
    items: Any, i: int, shape: TypeShape, value: Any, form: CapnpForm, module: Any
) -> None:
    if isinstance(shape, UnionOf):
        _set_union(items[i], shape, value, form, module)
    elif isinstance(shape, MessageShape):
        _fill(items[i], shape, value, form, module)
    elif isinstance(shape, ListOf):
        inner = items.init(i, len(value))
        for j, v in enumerate(value):
            _set_item(inner, j, shape.item, v, form, module)
    else:
        items[i] = _plain(shape, value)


def _set_union(
    b: Any, shape: UnionOf, value: Any, form: CapnpForm, module: Any
) -> None:
    """Set the member `value` is in a union's wrapper struct: by its tag, else by
    its class (untagged messages: `schemas.untagged`) or its Python type (a union
    of distinct scalars: `schemas.unions`)."""
    names = member_names(shape)
    if shape.tag_field is not None:
        tag = getattr(value, shape.tag_field)
        i = union_tags(shape).index(getattr(tag, "value", tag))
    elif is_untagged(shape):
        i = member_index(shape, value)
    else:
        i = next(
            i
            for i, m in enumerate(shape.members)
            if isinstance(m, Scalar) and _is_kind(value, m.kind)
        )
    _set(b, capnp_name(names[i]), shape.members[i], value, form, module)


def _is_kind(value: Any, kind: str) -> bool:
    if isinstance(value, bool):
        return kind == "bool"
    return isinstance(value, _KIND_TYPES.get(kind, ()))


_KIND_TYPES: Final[dict[str, type]] = {
    "int": int,
    "float": float,
    "str": str,
    "bytes": bytes,
}


def _plain(shape: TypeShape, value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        return to_micros(value)
    if isinstance(value, uuid.UUID | decimal.Decimal):
        return str(value)
    if isinstance(value, datetime.date | datetime.time | datetime.timedelta):
        return msgspec.to_builtins(value)  # ISO 8601 text, which convert reads back
    if isinstance(shape, Choice):
        return getattr(value, "value", value)
    if isinstance(shape, Foreign):  # an IPv4Address, a URL...: its text
        return str(value)
    return value
