"""Random pydantic v2 models from the type catalogue, with valid and edge values.

`models()` is a hypothesis strategy of (model class, a strategy of its input
values). Fields are drawn from the types of issue 29's item 4 (the rows of
`schemas.user.catalogue`: dates and times, naive, aware and plain datetimes,
tuples, sets, addresses and networks, URLs, bytes, enums, Literals, Decimal, UUID,
constrained and Annotated scalars, nested Optional, dicts with non-string keys),
nested in lists, dicts, Optional, sub-models, discriminated unions of
sub-models on a `Literal` tag and untagged unions of sub-models (smart mode); models get camelCase aliases or per-field aliases,
and field, model (before and after) and Annotated validators that keep a
validated value as it is (a derived codec does not run them, so one that changed
values would be a difference the check explains, not a round-trip failure).

And what pydantic applies beyond the annotation: generic models (`Box[X]` as an
alias and as a subclass), models that hold themselves (a tree, a chain), `Json[X]`,
`SecretStr`, `use_enum_values` and `frozen`, serializers with the validator that
reads their output back (cents written as an int; a datetime as text; a model
serializer), and model validators that constrain two fields against each other
(a window that must not close before it opens), which random input breaks about
half the time.

Values hold the edges a format may not carry faithfully: naive and aware
datetimes and times with odd offsets, ints at the int64 and uint64 ends and past
64 bits where the bounds allow, floats not exact in 32 bits, the smallest and
largest doubles, sets of several members, negative timedeltas, empty strings and
containers, and dates before the epoch.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import enum
import ipaddress
import itertools
import uuid
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

import pydantic
from hypothesis import strategies as st
from pydantic.alias_generators import to_camel

from tests.modelgen_applied import Box, applied

Values = st.SearchStrategy[Any]


class Colour(enum.Enum):
    """A plain Enum with str values."""

    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    """An IntEnum."""

    LOW = 1
    HIGH = 2


class Mode(enum.StrEnum):
    """A StrEnum."""

    FAST = "fast"
    SAFE = "safe"


_NONE: Final = object()


@dataclass(frozen=True)
class Gen:
    """One field type: its annotation, a strategy of valid values, a label, and
    the empty default a team would give it (`[]`, `set()`...), if any."""

    annotation: Any
    values: Values
    label: str
    empty: Any = _NONE


INT64: Final = (-(2**63), 2**63 - 1)
_OFFSETS: Final = st.integers(-23 * 60 - 59, 23 * 60 + 59).map(
    lambda m: datetime.timezone(datetime.timedelta(minutes=m))
)
_ZONES: Final = st.one_of(st.just(datetime.UTC), _OFFSETS)
_EDGE_TIMES: Final = (
    datetime.datetime(1969, 12, 31, 23, 59, 59, 999999),
    datetime.datetime(1970, 1, 1),
    datetime.datetime(2038, 1, 19, 3, 14, 8),
    datetime.datetime(1900, 3, 1, 0, 0, 0, 1),
)
_DATETIMES: Final = st.one_of(
    st.datetimes(datetime.datetime(1900, 1, 2), datetime.datetime(2200, 1, 1)),
    st.sampled_from(_EDGE_TIMES),
)
_FLOATS: Final = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.1, 1 / 3, 5e-324, 1.7976931348623157e308, -0.0, 16777217.0]),
)
_TEXT: Final = st.text(max_size=12)
_URLS: Final = (
    "https://example.com/",
    "http://a.example:8080/p/q?x=1&y=%20#frag",
    "https://user:pw@example.org/path",
    "https://xn--bcher-kva.example/",
)


def _ints(lo: int = INT64[0], hi: int = INT64[1]) -> Values:
    ends = [v for v in (lo, hi, 0, -1, 1) if lo <= v <= hi]
    return st.one_of(st.integers(lo, hi), st.sampled_from(ends))


def _aware(values: Values) -> Values:
    return st.tuples(values, _ZONES).map(lambda p: p[0].replace(tzinfo=p[1]))


def _networks(version: Literal[4, 6]) -> Values:
    bits = 32 if version == 4 else 128
    return st.tuples(st.ip_addresses(v=version), st.integers(0, bits)).map(
        lambda p: ipaddress.ip_network((p[0], p[1]), strict=False)
    )


def _scalars() -> list[Gen]:
    wide = Annotated[int, pydantic.Field(ge=0, le=2**70)]
    money = Annotated[decimal.Decimal, pydantic.Field(max_digits=10, decimal_places=2)]
    times = st.times(timezones=st.one_of(st.none(), _ZONES))
    return [
        Gen(str, _TEXT, "str"),
        Gen(int, _ints(), "int"),
        Gen(float, _FLOATS, "float"),
        Gen(bool, st.booleans(), "bool"),
        Gen(pydantic.constr(max_length=8), st.text(max_size=8), "constr"),
        Gen(pydantic.conint(ge=0, le=100), _ints(0, 100), "conint"),
        Gen(pydantic.confloat(ge=0), st.floats(0, allow_infinity=False), "confloat"),
        Gen(Annotated[int, pydantic.Field(ge=1)], _ints(1), "Annotated int ge=1"),
        Gen(wide, _ints(0, 2**70) | st.sampled_from([2**64, 2**70]), "int le=2**70"),
        Gen(datetime.datetime, _DATETIMES | _aware(_DATETIMES), "datetime"),
        Gen(pydantic.AwareDatetime, _aware(_DATETIMES), "AwareDatetime"),
        Gen(pydantic.NaiveDatetime, _DATETIMES, "NaiveDatetime"),
        Gen(datetime.date, st.dates(datetime.date(1, 1, 1)), "date"),
        Gen(datetime.time, times, "time"),
        Gen(datetime.timedelta, st.timedeltas(), "timedelta"),
        Gen(tuple[float, float], st.tuples(_FLOATS, _FLOATS), "tuple[float, float]"),
        Gen(tuple[int, ...], st.lists(_ints(), max_size=3).map(tuple), "tuple", ()),
        Gen(set[str], st.sets(_TEXT, max_size=4), "set[str]", set()),
        Gen(
            frozenset[int], st.frozensets(_ints(), max_size=4), "frozenset", frozenset()
        ),
        Gen(ipaddress.IPv4Address, st.ip_addresses(v=4), "IPv4Address"),
        Gen(ipaddress.IPv6Address, st.ip_addresses(v=6), "IPv6Address"),
        Gen(ipaddress.IPv4Network, _networks(4), "IPv4Network"),
        Gen(ipaddress.IPv6Network, _networks(6), "IPv6Network"),
        Gen(pydantic.HttpUrl, st.sampled_from(_URLS), "HttpUrl"),
        Gen(pydantic.AnyUrl, st.sampled_from((*_URLS, "ftp://f.example/x")), "AnyUrl"),
        Gen(bytes, _TEXT.map(str.encode), "bytes"),
        Gen(
            pydantic.Base64Bytes,
            st.binary(max_size=9).map(base64.b64encode),
            "Base64Bytes",
        ),
        Gen(Colour, st.sampled_from(Colour), "Enum"),
        Gen(Level, st.sampled_from(Level), "IntEnum"),
        Gen(Mode, st.sampled_from(Mode), "StrEnum"),
        Gen(Literal[1, 2], st.sampled_from([1, 2]), "Literal[1, 2]"),
        Gen(Literal["a", "b"], st.sampled_from(["a", "b"]), "Literal[a, b]"),
        Gen(
            decimal.Decimal,
            st.decimals(allow_nan=False, allow_infinity=False),
            "Decimal",
        ),
        Gen(
            money, st.decimals("-99999999.99", "99999999.99", places=2), "Decimal(10,2)"
        ),
        Gen(uuid.UUID, st.uuids(), "UUID"),
        Gen(
            Annotated[str, pydantic.AfterValidator(str.strip)],
            _TEXT.map(str.strip),
            "Annotated[str, AfterValidator]",
        ),
    ]


SCALARS: Final = _scalars()
APPLIED: Final = [Gen(*spec) for spec in applied(_TEXT, _ints, _aware(_DATETIMES))]
"""What pydantic applies beyond the annotation (`tests.modelgen_applied`), drawn
as often as a catalogue scalar."""
_KEYS: Final = [
    Gen(str, _TEXT, "str"),
    Gen(int, _ints(), "int"),
    Gen(uuid.UUID, st.uuids(), "UUID"),
    Gen(datetime.date, st.dates(datetime.date(1900, 1, 1)), "date"),
    Gen(datetime.datetime, _DATETIMES | _aware(_DATETIMES), "datetime"),
    Gen(Level, st.sampled_from(Level), "IntEnum"),
    Gen(Mode, st.sampled_from(Mode), "StrEnum"),
]
_names = itertools.count()


def _optional(inner: Gen) -> Gen:
    return Gen(
        inner.annotation | None, st.none() | inner.values, f"{inner.label} | None"
    )


def _list(inner: Gen) -> Gen:
    return Gen(
        list[inner.annotation],  # type: ignore[name-defined]
        st.lists(inner.values, max_size=3),
        f"list[{inner.label}]",
        [],
    )


def _boxed(inner: Gen, subclass: bool) -> Gen:
    """`Box[X]` as a team aliases it, or a subclass of it."""
    alias: Any = Box[inner.annotation]  # type: ignore[name-defined]
    if subclass:
        alias = pydantic.create_model(f"Boxed{next(_names)}", __base__=alias)
    values = st.fixed_dictionaries({"item": inner.values}, optional={"note": _TEXT})
    return Gen(alias, values, f"Box[{inner.label}]")


def _dict(pair: tuple[Gen, Gen]) -> Gen:
    key, value = pair
    return Gen(
        dict[key.annotation, value.annotation],  # type: ignore[name-defined]
        st.dictionaries(key.values, value.values, max_size=3),
        f"dict[{key.label}, {value.label}]",
        {},
    )


@st.composite
def _submodel(draw: st.DrawFn, inner: Values, tag: str | None = None) -> Gen:
    """A nested model of 1-3 fields (with a `kind` tag when `tag` is given)."""
    gens = draw(st.lists(inner, min_size=1, max_size=3))
    return _build(draw, gens, tag)


@st.composite
def _union(draw: st.DrawFn, inner: Values) -> Gen:
    """A union of 2-3 models: discriminated on a Literal `kind`, or untagged
    (pydantic's smart mode picks the member; msgspec is refused for it)."""
    n = draw(st.integers(2, 3))
    tagged = draw(st.booleans())
    members = [
        draw(_submodel(inner, tag=f"k{i}" if tagged else None)) for i in range(n)
    ]
    annotation: Any = members[0].annotation
    for m in members[1:]:
        annotation = annotation | m.annotation
    values = st.one_of(*(m.values for m in members))
    if not tagged:
        return Gen(annotation, values, "untagged")
    union = Annotated[annotation, pydantic.Field(discriminator="kind")]
    return Gen(union, values, "union")


def _build(draw: st.DrawFn, gens: list[Gen], tag: str | None) -> Gen:
    """A model of `gens`, with random aliases, defaults and validators."""
    name = f"M{next(_names)}"
    camel, values_only, frozen = draw(st.tuples(*[st.booleans()] * 3))
    config = pydantic.ConfigDict(
        alias_generator=to_camel if camel else None,
        populate_by_name=True,
        use_enum_values=values_only,
        frozen=frozen,
    )
    fields: dict[str, Any] = {}
    values: dict[str, Values] = {}
    optional: dict[str, Values] = {}
    if tag is not None:
        fields["kind"] = (Literal[tag], ...)
        values["kind"] = st.just(tag)
    for i, gen in enumerate(gens):
        fname = f"field_{i}_{gen.label.split('[')[0].split(' ')[0].lower()}"[:30]
        fname = "".join(c if c.isalnum() or c == "_" else "_" for c in fname)
        alias = None if camel or not draw(st.booleans()) else f"F{i}-x"
        how = draw(st.integers(0, 5))
        if how == 0:
            fields[fname] = (gen.annotation | None, pydantic.Field(None, alias=alias))
            values[fname] = st.none() | gen.values
        elif how == 1 and gen.empty is not _NONE:  # left out of some inputs
            fields[fname] = (gen.annotation, pydantic.Field(gen.empty, alias=alias))
            optional[fname] = gen.values
        else:
            fields[fname] = (gen.annotation, pydantic.Field(..., alias=alias))
            values[fname] = gen.values
    validators: dict[str, Any] = {}
    field_level, after, before = draw(st.tuples(*[st.booleans()] * 3))
    if field_level:
        first = next(n for n in fields if n != "kind")
        validators["keep_field"] = pydantic.field_validator(first)(_keep_field)
    if after:
        validators["after"] = pydantic.model_validator(mode="after")(_keep_model)
    if before:
        validators["before"] = pydantic.model_validator(mode="before")(_keep_data)
    model = pydantic.create_model(
        name, __config__=config, __validators__=validators, **fields
    )
    return Gen(model, st.fixed_dictionaries(values, optional=optional), name)


def _keep_field(cls: Any, value: Any) -> Any:
    return value


def _keep_model(self: Any) -> Any:
    return self


def _keep_data(cls: Any, data: Any) -> Any:
    return data


def field_types(depth: int = 2) -> st.SearchStrategy[Gen]:
    """A field type: a catalogue scalar, or one nested in a container, an Optional,
    a sub-model or a union of sub-models (at most `depth` levels)."""
    leaves = st.one_of(st.sampled_from(SCALARS), st.sampled_from(APPLIED))
    if depth == 0:
        return leaves
    inner = field_types(depth - 1)
    return st.one_of(
        leaves,
        leaves,
        inner.map(_optional),
        inner.map(_list),
        st.tuples(inner, st.booleans()).map(lambda p: _boxed(*p)),
        st.tuples(st.sampled_from(_KEYS), inner).map(_dict),
        _submodel(inner),
        _union(inner),
    )


@st.composite
def models(draw: st.DrawFn, max_fields: int = 5) -> Gen:
    """A top-level model (its `values` give input dicts pydantic validates)."""
    gens = draw(st.lists(field_types(), min_size=1, max_size=max_fields))
    return _build(draw, gens, None)
