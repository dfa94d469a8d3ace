"""The shape of a user's message type: the one description every form is derived from.

A `MessageShape` is what the three forms (msgspec Struct, pydantic model, protobuf
message) have in common. Each source (a pydantic model, a msgspec Struct, a `.proto`
message) is read into a shape; each form is built from it. A shape holds what the
user's own form does; a part a format cannot carry refuses that codec alone
(`schemas.formats`), with the field's dotted path.

| shape | Python | protobuf |
| --- | --- | --- |
| `Scalar("str")` | `str` | `string` |
| `Scalar("int")` | `int` | `int64`; `int32`/`uint32`/`uint64` when bounds fit |
| `Scalar("float")` | `float` | `double` |
| `Scalar("bool")` | `bool` | `bool` |
| `Scalar("bytes")` | `bytes` (standard base64 in JSON) | `bytes` |
| `Scalar("datetime")` | `datetime` | `google.protobuf.Timestamp` |
| `Scalar("uuid")` | `uuid.UUID` | `string` (the canonical text, converted back) |
| `Scalar("decimal")` | `decimal.Decimal` | `string` (the exact text, converted back) |
| `Choice` of str | a `str` Enum or `Literal` of str | `string` |
| `Choice` of int | an `IntEnum` or `Literal` of int | `int64` (or the `.proto` enum) |
| `ListOf` | `list[X]` | `repeated X` |
| `MapOf` | `dict[K, V]` | `map<K, V>` (K `str` or `int` only) |
| `MessageShape` | a nested model / Struct | a message |
| nullable field | `X | None` | `optional X` (field presence) |
| `ListOf(container=...)` | `set[X]`, `frozenset[X]`, `tuple[X, ...]` | refused |
| `TupleOf` | `tuple[X, Y]` | refused |
| `UnionOf` | `A | B` (tagged when every member is a message with its own `Literal` in one field) | a wrapper message with `oneof member` (`schemas.unions`) |
| `Foreign` with `text` | `IPv4Address`, `IPv6Address`, `IPv4Network`, `IPv6Network`, `HttpUrl`, `AnyUrl`... | `string` (its text, made the type again when read) |
| `Foreign` | a type only the user's own form holds (`Any`, a class no reader knows) | refused |
| `Scalar("date")`, `"time"`, `"timedelta"` | `date`, `time`, `timedelta` | refused |

A field's `alias` is its key on the JSON and MessagePack wires; `name` is the
attribute every form has.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields as dc_fields
from typing import Any, Final, Literal, TypeAlias

ScalarKind = Literal[
    "str",
    "int",
    "float",
    "bool",
    "bytes",
    "datetime",
    "uuid",
    "decimal",
    "date",
    "time",
    "timedelta",
]
Container = Literal["list", "tuple", "set", "frozenset"]

TIMESTAMP: Final = ".google.protobuf.Timestamp"
"""The protobuf type a datetime maps to (an instant with nanosecond resolution)."""


class _NoDefault(enum.Enum):
    """The marker of a required field (None is a legitimate default)."""

    NO_DEFAULT = "NO_DEFAULT"


NO_DEFAULT: Final = _NoDefault.NO_DEFAULT


@dataclass(frozen=True, slots=True)
class Constraints:
    """Validation bounds carried from the source to the derived Python forms.

    protobuf has no validation: its codec accepts any value of the field's type.
    """

    gt: int | float | None = None
    ge: int | float | None = None
    lt: int | float | None = None
    le: int | float | None = None
    multiple_of: int | float | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    tz: bool | None = None
    max_digits: int | None = None
    decimal_places: int | None = None

    def items(self) -> dict[str, Any]:
        """The bounds that are set, by name (`msgspec.Meta` and `Field` keywords)."""
        return {
            f.name: getattr(self, f.name)
            for f in dc_fields(self)
            if getattr(self, f.name) is not None
        }

    def merged(self, **changes: Any) -> Constraints:
        """A copy with `changes` applied (None values ignored)."""
        values = self.items() | {k: v for k, v in changes.items() if v is not None}
        return Constraints(**values)


NO_CONSTRAINTS: Final = Constraints()


Holds = Literal["json", "secret", "secret-bytes"]
"""What a string on the wire holds for the model: JSON text it parses (`Json[X]`),
a secret's text (`SecretStr`) or bytes (`SecretBytes`)."""


@dataclass(frozen=True, slots=True)
class Scalar:
    """A single value: see the module table for each kind's protobuf type.

    Attributes:
        kind: which value.
        constraints: its bounds.
        holds: for a `str` the producer writes as text what the model holds as
            something else: `json` (pydantic's `Json[X]`: the model holds the
            parsed `inner` value), `secret` (`SecretStr`), `secret-bytes`
            (`SecretBytes`). Every derived form carries the text.
        inner: the shape of the value a `json` text holds.
    """

    kind: ScalarKind
    constraints: Constraints = NO_CONSTRAINTS
    holds: Holds | None = None
    inner: TypeShape | None = None

    @property
    def proto(self) -> str:
        """The protobuf type: a scalar keyword or `TIMESTAMP`."""
        if self.kind == "int":
            return int_width(self.constraints)
        return _PROTO_SCALARS.get(self.kind, "string")  # refused: `schemas.formats`


_PROTO_SCALARS: Final[dict[str, str]] = {
    "str": "string",
    "float": "double",
    "bool": "bool",
    "bytes": "bytes",
    "datetime": TIMESTAMP,
    "uuid": "string",
    "decimal": "string",
}


@dataclass(frozen=True, slots=True)
class Choice:
    """One of fixed values: an Enum (`enum` set) or a Literal (`enum` None).

    Attributes:
        values: the allowed values, all `str` or all `int`.
        enum: the Enum class whose members the Python forms decode to.
        generated: True when `enum` was made from a `.proto` enum (derived source
            text must define it rather than import it).
    """

    values: tuple[str, ...] | tuple[int, ...]
    enum: type[enum.Enum] | None = None
    generated: bool = False

    @property
    def proto(self) -> str:
        """`string` for str values, `int64` for int values."""
        return "string" if isinstance(self.values[0], str) else "int64"


@dataclass(frozen=True, slots=True)
class ListOf:
    """A list of one item type (`repeated` in protobuf); `container` says which
    Python collection decodes it (a set or a variable tuple besides a list)."""

    item: TypeShape
    constraints: Constraints = NO_CONSTRAINTS
    container: Container = "list"


@dataclass(frozen=True, slots=True)
class TupleOf:
    """A fixed-length tuple (`tuple[float, float]`): one shape per position."""

    items: tuple[TypeShape, ...]


@dataclass(frozen=True, slots=True)
class UnionOf:
    """One of several types (`A | B`), None too when `nullable`.

    Attributes:
        members: the member shapes, in declaration order.
        nullable: None is a member (inside a list or map, or beside others).
        tag_field: the attribute every member (all messages) holds a distinct
            one-value `Literal` in (pydantic's discriminator): the member the tag
            names is the one decoded. None when the members are not so tagged.
    """

    members: tuple[TypeShape, ...]
    nullable: bool = False
    tag_field: str | None = None


@dataclass(frozen=True, slots=True)
class Foreign:
    """A type with no shape kind (`IPv4Address`, `HttpUrl`, `Any`...).

    Attributes:
        annotation: the user's annotation, which a derived pydantic model keeps.
        name: its name in messages (`IPv4Address`).
        sample: makes a valid JSON value from a random source, for synthetic
            payloads; None when none can be made (a default or None is sent).
    """

    annotation: Any
    name: str
    sample: Callable[[Any], Any] | None = None
    text: Callable[[str], Any] | None = None
    """Makes the user's value from its text (`IPv4Address(text)`): the type is
    carried as a string where a format has no such type (`schemas.formats`,
    "carried as str"); None: it has no text form, and only the user's own form
    holds it."""


@dataclass(frozen=True, slots=True)
class MapOf:
    """A dict (`map<K, V>` in protobuf, where K is `str` or `int` only)."""

    key: Scalar | Choice
    value: TypeShape
    constraints: Constraints = NO_CONSTRAINTS


@dataclass(frozen=True, slots=True)
class FieldShape:
    """One field of a message.

    Attributes:
        name: the attribute name (the protobuf field name too).
        type: the value's shape.
        nullable: the field accepts None (`X | None`; protobuf field presence).
        default: the default value, or `NO_DEFAULT` when required.
        default_factory: what makes the default (`list`, `dict`, `uuid.uuid4`...).
        alias: the key on the JSON and MessagePack wires when it is not `name`
            (pydantic's alias, a Struct's rename; protobuf's `json_name`).
        read_key: the key the source reads the field under when not `wire` (a
            `validation_alias`): synthetic input's key; None: `wire`.
        serializer: the team's serializer of the value (`field_serializer
            'to_cents'`), if any: the wire holds what it returns.
    """

    name: str
    type: TypeShape
    nullable: bool = False
    default: Any = NO_DEFAULT
    default_factory: Callable[[], Any] | None = None
    alias: str | None = None
    read_key: str | None = None
    serializer: str | None = None

    @property
    def wire(self) -> str:
        """The field's key on the JSON and MessagePack wires."""
        return self.alias or self.name

    @property
    def required(self) -> bool:
        """True when the field has neither a default nor a default factory."""
        return self.default is NO_DEFAULT and self.default_factory is None


@dataclass(eq=False, slots=True)
class MessageShape:
    """A message: named fields in declaration order.

    Attributes:
        name: unique among the schema's messages (a Python class and proto name).
        fields: in declaration order (protobuf field numbers follow it from 1).
        source: the user's class this shape was read from, if any.
        proto_name: the full protobuf name, when read from a `.proto` file.
        forbid_unknown: the source rejects unknown fields (pydantic's
            `extra="forbid"`, a Struct's `forbid_unknown_fields`); the derived
            Python forms follow it.
        lax: the source coerces values (a pydantic model's default lax mode:
            "42" is an int), which the strict derived forms do not.
        frozen: the source's objects are immutable (pydantic's `frozen=True`, a
            frozen Struct); the derived Structs follow it.
        serializer: the team's serializer of the whole message
            (`model_serializer 'envelope'`), when it has one.

    A message may hold itself (through a list, a map, an optional field or a
    union): its shape is then reached again from its own fields, the same object.
    """

    name: str
    fields: tuple[FieldShape, ...] = ()
    source: type | None = None
    proto_name: str = ""
    forbid_unknown: bool = True
    lax: bool = False
    frozen: bool = False
    serializer: str | None = None


from schemas.int_widths import (  # noqa: E402  (re-exported: after the shapes it reads)
    fits_64_bits as fits_64_bits,
    int_range as int_range,
    int_width as int_width,
)

TypeShape: TypeAlias = (
    Scalar | Choice | ListOf | MapOf | TupleOf | UnionOf | Foreign | MessageShape
)


def messages(root: MessageShape) -> list[MessageShape]:
    """Every message reachable from `root`, each after the messages it uses."""
    out: list[MessageShape] = []
    seen: set[int] = set()

    def visit(msg: MessageShape) -> None:
        if id(msg) in seen:
            return
        seen.add(id(msg))
        for f in msg.fields:
            for inner in nested(f.type):
                visit(inner)
        out.append(msg)

    visit(root)
    return out


def nested(shape: TypeShape) -> Iterator[MessageShape]:
    """The messages a type shape refers to directly (through lists, maps, tuples
    and union members)."""
    if isinstance(shape, MessageShape):
        yield shape
    else:
        for inner in parts(shape):
            yield from nested(inner)


def parts(shape: TypeShape) -> tuple[TypeShape, ...]:
    """The shapes a container holds: a list's item, a map's key and value, a
    tuple's items, a union's members (none for a scalar or a message)."""
    if isinstance(shape, ListOf):
        return (shape.item,)
    if isinstance(shape, MapOf):
        return (shape.key, shape.value)
    if isinstance(shape, TupleOf):
        return shape.items
    if isinstance(shape, UnionOf):
        return shape.members
    return ()


def unique_name(base: str, taken: set[str]) -> str:
    """`base`, or `base2`, `base3`... : the first not in `taken` (then added)."""
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}{n}"
    taken.add(name)
    return name


def describe(shape: TypeShape) -> str:
    """A short Python-like name of a shape, for summaries and messages."""
    if isinstance(shape, Foreign):
        return shape.name
    if isinstance(shape, TupleOf):
        return "tuple[" + ", ".join(describe(s) for s in shape.items) + "]"
    if isinstance(shape, UnionOf):
        names = [describe(s) for s in shape.members]
        return " | ".join(names + (["None"] if shape.nullable else []))
    if isinstance(shape, ListOf) and shape.container != "list":
        if shape.container == "tuple":
            return f"tuple[{describe(shape.item)}, ...]"
        return f"{shape.container}[{describe(shape.item)}]"
    if isinstance(shape, Scalar) and shape.holds is not None:
        inner = describe(shape.inner) if shape.inner is not None else "Any"
        return f"Json[{inner}]" if shape.holds == "json" else _HELD[shape.holds]
    if isinstance(shape, Scalar):
        return _SCALAR_NAMES.get(shape.kind, shape.kind)
    if isinstance(shape, Choice):
        if shape.enum is not None:
            return shape.enum.__name__
        return "Literal[" + ", ".join(repr(v) for v in shape.values) + "]"
    if isinstance(shape, ListOf):
        return f"list[{describe(shape.item)}]"
    if isinstance(shape, MapOf):
        return f"dict[{describe(shape.key)}, {describe(shape.value)}]"
    return shape.name


_SCALAR_NAMES: Final = {"uuid": "UUID", "decimal": "Decimal"}
_HELD: Final = {"secret": "SecretStr", "secret-bytes": "SecretBytes"}
"""The Python names of the kinds not spelled as their type."""
