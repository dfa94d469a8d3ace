"""Derive msgspec Structs from a shape, with the built-in Structs' options.

Like `schemas.builtin.structs`: `kw_only` and `gc=False` (a decoded message is a tree
of values that cannot form a reference cycle, a message that holds itself too);
`frozen` when the source's objects are (pydantic's `frozen=True`), so a handler that
sets a field works on the Struct wherever it works on the model. Unknown fields are rejected
when the source rejects them (pydantic's `extra="forbid"`) and ignored otherwise,
as pydantic's default `extra="ignore"` does. Aliases are the wire keys (`rename`).
msgspec is strict: "42" is not an int. Bounds msgspec cannot check (on a Decimal,
an int bound past int64, `max_digits`, `decimal_places`) are left out of `Meta`:
`msgspec_bounds` says which, and `codec-schema check` reports them.

The members of a tagged union (`UnionOf.tag_field`) are tagged Structs: the tag is
`tag_field`/`tag` (msgspec reads the member the tag names, as pydantic's
discriminator does) and stays readable by attribute (a property returning the tag),
as logic reads it on every codec. An untagged union of messages is typed as its
`UntaggedUnion` class, which each member inherits (`schemas.untagged`): msgspec's
own codecs are refused for it, and the binary codecs' `dec_hook` makes the member
their format recorded. A type msgspec has no type for but a text form
(`Foreign.text`: `IPv4Address`, `HttpUrl`...) is carried as a JSON or MessagePack
string: the field keeps the user's class, and `hooks` gives msgspec the `dec_hook`
that makes the value from its text at decode (a ValueError there is a validation
error, as pydantic's) and the `enc_hook` that writes `str(value)`: a consumer reading
the attribute gets the same `IPv4Address` or `HttpUrl` as from pydantic, and the
decode figure includes making it. Other `Foreign` parts are `Any` here, and the
codecs of this form are refused for them (`schemas.formats`).
"""

from __future__ import annotations

import datetime
import decimal
import ipaddress
import types
import uuid
from collections.abc import Callable
from types import GenericAlias
from typing import Annotated, Any, Final, Literal, NamedTuple, Union

import msgspec
import pydantic

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
from schemas.unions import union_tags
from schemas.untagged import UntaggedUnion, is_untagged, untagged_class

DERIVED_MODULE: Final = "schemas.derived"
"""The `__module__` of every derived class (they live in no importable module)."""

PYTHON_TYPES: Final[dict[str, type]] = {
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "bytes": bytes,
    "datetime": datetime.datetime,
    "uuid": uuid.UUID,
    "decimal": decimal.Decimal,
    "date": datetime.date,
    "time": datetime.time,
    "timedelta": datetime.timedelta,
}
_CONTAINERS: Final[dict[str, type]] = {
    "list": list,
    "set": set,
    "frozenset": frozenset,
}

_INT64: Final = (-(2**63), 2**63 - 1)
_ADDRESSES: Final = (
    ipaddress.IPv4Address,
    ipaddress.IPv6Address,
    ipaddress.IPv4Network,
    ipaddress.IPv6Network,
)
_TEXT_TYPES: Final[dict[type, dict[Any, Callable[..., Any]]]] = {}
"""Root Struct -> the types it carries as text, with the maker of each from it."""
_NUMERIC: Final = frozenset({"gt", "ge", "lt", "le", "multiple_of"})
_NEVER: Final = frozenset({"max_digits", "decimal_places"})


def build_structs(
    root: MessageShape, post_inits: dict[int, Callable[[Any], None]] | None = None
) -> type[msgspec.Struct]:
    """The Struct for `root`, built after the Structs it nests.

    Args:
        root: the message's shape.
        post_inits: a `__post_init__` by message shape id (a team's validators:
            `schemas.user.struct_validators`); none by default.
    """
    built: dict[int, Any] = {}
    tags = tagged_members(root)
    unions = _untagged(root)
    built.update(unions)  # a field's type, before any member is built
    later: list[tuple[Any, FieldShape]] = []
    for msg in messages(root):
        tag = tags.get(id(msg))
        kept = [f for f in msg.fields if tag is None or f.name != tag[0]]
        options: dict[str, Any] = {}
        if tag is not None:
            name, wire, value = tag
            options = {
                "tag_field": wire,
                "tag": value,
                "namespace": {name: _constant(value)},
            }
        rename = {f.name: f.alias for f in kept if f.alias}
        post = (post_inits or {}).get(id(msg))
        if post is not None:
            options.setdefault("namespace", {})["__post_init__"] = post
        markers = [u for u in unions.values() if msg in u.shape.members]
        if markers:  # a member of an untagged union is an instance of its type
            options["bases"] = (_member_base(msg.name, markers, msg.frozen),)
        ahead = [f for f in kept if _ahead(f.type, built)]
        struct = msgspec.defstruct(
            msg.name,
            [_field(f, built) for f in kept],
            module=DERIVED_MODULE,
            frozen=msg.frozen,
            kw_only=True,
            forbid_unknown_fields=msg.forbid_unknown,
            gc=False,
            rename=rename or None,
            **options,
        )
        built[id(msg)] = struct
        later.extend((struct, f) for f in ahead)
    for struct, f in later:  # a message that holds itself: typed once all are built
        struct.__annotations__[f.name] = _field(f, built)[1]
    for union in unions.values():
        union.members = tuple(built[id(m)] for m in union.shape.members)
    root_struct: type[msgspec.Struct] = built[id(root)]
    carried = _carried_as_text(root)
    carried.update({u: u.make for u in unions.values()})
    if carried:
        _TEXT_TYPES[root_struct] = carried
    return root_struct


class Hooks(NamedTuple):
    """msgspec's extension hooks for a Struct that carries types as text."""

    enc_hook: Callable[[Any], Any] | None
    dec_hook: Callable[[type, Any], Any] | None


NO_HOOKS: Final = Hooks(None, None)


def hooks(struct: type) -> Hooks:
    """The hooks `struct`'s encoders and decoders need (none for most schemas, so a
    codec of a schema without such types passes none and pays nothing)."""
    carried = _TEXT_TYPES.get(struct)
    if not carried:
        return NO_HOOKS

    def dec_hook(kind: type, obj: Any) -> Any:
        if isinstance(kind, type) and issubclass(kind, UntaggedUnion):
            return kind.make(obj, dec_hook)
        make = carried.get(kind)
        if make is not None and not isinstance(obj, str) and isinstance(obj, kind):
            return obj  # `convert` of an object that holds the value already
        if make is None or not isinstance(obj, str):
            raise TypeError(f"expected the text of {getattr(kind, '__name__', kind)}")
        return make(obj)  # its ValueError is msgspec's ValidationError

    classes = (*_ADDRESSES, *(c for c in carried if isinstance(c, type)))

    def enc_hook(obj: Any) -> Any:
        if isinstance(obj, classes):  # IPvAnyAddress makes an IPv4Address...
            return str(obj)
        raise NotImplementedError(f"{type(obj).__name__} is not carried by msgspec")

    return Hooks(enc_hook, dec_hook)


class _AnyTimedelta(type):
    """Every `timedelta` is an `IsoDuration`: msgspec takes the hook's plain one."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, datetime.timedelta)


class IsoDuration(datetime.timedelta, metaclass=_AnyTimedelta):
    """A derived Struct's `timedelta` field: read by `dec_hook` (`iso_duration`),
    so the year unit pydantic writes (`P1Y`) is read as pydantic reads it; the
    attribute is a plain `timedelta`, written by msgspec as before."""

    __slots__ = ()


def iso_duration(text: str) -> datetime.timedelta:
    """msgspec's reading of an ISO 8601 duration, and pydantic's where it has a
    year unit (pydantic writes 365 days as `P1Y`, which msgspec rejects).

    Raises:
        ValueError: neither reads it (msgspec's `ValidationError` at decode).
    """
    try:
        return msgspec.convert(text, datetime.timedelta)
    except msgspec.ValidationError:
        if "Y" not in text.split("T", 1)[0]:
            raise
    return _PYDANTIC_TIMEDELTA.validate_python(
        text
    )  # its ValidationError: a ValueError


_PYDANTIC_TIMEDELTA: Final = pydantic.TypeAdapter(datetime.timedelta)


def _carried_as_text(root: MessageShape) -> dict[Any, Callable[..., Any]]:
    out: dict[Any, Callable[..., Any]] = {}
    pending: list[Any] = [f.type for m in messages(root) for f in m.fields]
    while pending:
        shape = pending.pop()
        if isinstance(shape, Foreign) and shape.text is not None:
            out[shape.annotation] = shape.text
        if isinstance(shape, Scalar) and shape.kind == "timedelta":
            out[IsoDuration] = iso_duration
        if not isinstance(shape, MessageShape):
            pending.extend(parts(shape))
    return out


def _untagged(root: MessageShape) -> dict[int, type[UntaggedUnion]]:
    """The type of each untagged union of messages, by the union shape's id."""
    out: dict[int, type[UntaggedUnion]] = {}
    pending: list[Any] = [f.type for m in messages(root) for f in m.fields]
    while pending:
        shape = pending.pop()
        if isinstance(shape, UnionOf) and is_untagged(shape) and id(shape) not in out:
            out[id(shape)] = untagged_class(shape)
        if not isinstance(shape, MessageShape):
            pending.extend(parts(shape))
    return out


def _ahead(shape: TypeShape, built: dict[int, Any]) -> bool:
    """`shape` refers to a message not built yet (a message that holds itself)."""
    if isinstance(shape, MessageShape):
        return id(shape) not in built
    return any(_ahead(inner, built) for inner in parts(shape))


def _member_base(name: str, markers: list[type[UntaggedUnion]], frozen: bool) -> type:
    """A Struct base with no fields that makes its subclass an instance of each
    union type in `markers` (their classes hold no slots)."""
    kwds = {"frozen": frozen, "kw_only": True, "gc": False}
    return types.new_class(f"{name}Member", (msgspec.Struct, *markers), kwds)


def _constant(value: str | int) -> property:
    """A read-only attribute holding a tagged Struct's tag, as logic reads it."""
    return property(lambda _self: value)


def tagged_members(root: MessageShape) -> dict[int, tuple[str, str, str | int]]:
    """Members of tagged unions: message id -> (tag attribute, wire key, value)."""
    out: dict[int, tuple[str, str, str | int]] = {}
    pending: list[Any] = [f.type for m in messages(root) for f in m.fields]
    while pending:
        shape = pending.pop()
        if isinstance(shape, UnionOf) and shape.tag_field is not None:
            for member, value in zip(shape.members, union_tags(shape), strict=True):
                assert isinstance(member, MessageShape)  # noqa: S101  (tagged)
                tag = next(f for f in member.fields if f.name == shape.tag_field)
                out.setdefault(id(member), (tag.name, tag.wire, value))
        if not isinstance(shape, MessageShape):
            pending.extend(parts(shape))
    return out


def _field(
    f: FieldShape, built: dict[int, type[msgspec.Struct]]
) -> tuple[str, Any] | tuple[str, Any, Any]:
    annotation = _annotation(f.type, built)
    if f.nullable:
        annotation = annotation | None
    if f.default_factory is not None:
        return f.name, annotation, msgspec.field(default_factory=f.default_factory)
    if not f.required:
        return f.name, annotation, f.default
    return f.name, annotation


def _annotation(shape: TypeShape, built: dict[int, type[msgspec.Struct]]) -> Any:
    if isinstance(shape, MessageShape):
        return built.get(id(shape), Any)  # Any: not built yet (`_ahead`)
    if isinstance(shape, Choice):
        return shape.enum or Literal.__getitem__(shape.values)
    if isinstance(shape, Foreign):
        return Any if shape.text is None else shape.annotation
    if isinstance(shape, TupleOf):
        return GenericAlias(tuple, tuple(_annotation(s, built) for s in shape.items))
    if isinstance(shape, UnionOf) and id(shape) in built:  # untagged messages
        return built[id(shape)] | None if shape.nullable else built[id(shape)]
    if isinstance(shape, UnionOf):
        members = [_annotation(s, built) for s in shape.members]
        return Union.__getitem__((*members, *([None] if shape.nullable else [])))
    if isinstance(shape, ListOf):
        item = _annotation(shape.item, built)
        if shape.container == "tuple":
            base: Any = GenericAlias(tuple, (item, ...))
        else:
            base = GenericAlias(_CONTAINERS[shape.container], (item,))
    elif isinstance(shape, MapOf):
        key, value = _annotation(shape.key, built), _annotation(shape.value, built)
        base = GenericAlias(dict, (key, value))
    elif shape.kind == "timedelta":
        base = IsoDuration
    else:
        base = PYTHON_TYPES[shape.kind]
    kind = shape.kind if isinstance(shape, Scalar) else ""
    bounds, _ = msgspec_bounds(shape.constraints, kind)
    return Annotated[base, msgspec.Meta(**bounds)] if bounds else base


def msgspec_bounds(
    constraints: Constraints, kind: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The bounds `msgspec.Meta` checks, and those it cannot (left out).

    Args:
        constraints: the field's bounds.
        kind: the scalar kind ("" for a list or map).
    """
    kept: dict[str, Any] = {}
    skipped: dict[str, Any] = {}
    for key, value in constraints.items().items():
        if key in _NEVER or (key in _NUMERIC and kind == "decimal"):
            skipped[key] = value
        elif kind == "int" and key in _NUMERIC and not _INT64[0] <= value <= _INT64[1]:
            # msgspec checks int bounds within int64 only; its ints stop at uint64.
            skipped[key] = value
        else:
            kept[key] = value
    return kept, skipped
