"""The type catalogue against every codec's rules: docs/types.md, generated.

Each type a team's model commonly holds is read as a one-field pydantic model, the
way a user's model is (`read_model`), and each derived codec's rules are applied to
it: refused (`schemas.formats`, the reason naming the format), carried by conversion
(`schemas.carried`), or native. A unit test keeps docs/types.md equal to `render()`;
`python -m schemas.user.catalogue docs/types.md` writes it.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import ipaddress
import sys
import uuid
from pathlib import Path
from types import GenericAlias
from typing import Annotated, Any, Final, Generic, Literal, TypeVar

import pydantic

from schemas.carried import carried
from schemas.formats import DERIVED_CODECS, ORJSON
from schemas.user.loader import from_class


class Colour(enum.Enum):
    """A plain Enum (its members are not strings)."""

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


CATALOGUE: Final[tuple[tuple[str, Any], ...]] = (
    ("`str`, `int`, `float`, `bool`", str),
    ("`constr(max_length=8)`", pydantic.constr(max_length=8)),
    ("`conint(ge=0, le=100)`", pydantic.conint(ge=0, le=100)),
    ("`confloat(ge=0)`", pydantic.confloat(ge=0)),
    ("`Annotated[int, Field(ge=1)]`", Annotated[int, pydantic.Field(ge=1)]),
    (
        "`int` bounded past 64 bits (`le=2**70`)",
        Annotated[int, pydantic.Field(le=2**70)],
    ),
    ("`datetime`", datetime.datetime),
    ("`AwareDatetime`", pydantic.AwareDatetime),
    ("`NaiveDatetime`", pydantic.NaiveDatetime),
    ("`date`", datetime.date),
    ("`time`", datetime.time),
    ("`timedelta`", datetime.timedelta),
    ("`tuple[float, float]`", tuple[float, float]),
    ("`tuple[int, ...]`", tuple[int, ...]),
    ("`set[str]`", set[str]),
    ("`frozenset[str]`", frozenset[str]),
    ("`IPv4Address`", ipaddress.IPv4Address),
    ("`IPv6Address`", ipaddress.IPv6Address),
    ("`IPv4Network`", ipaddress.IPv4Network),
    ("`IPv6Network`", ipaddress.IPv6Network),
    ("`IPvAnyAddress`", pydantic.IPvAnyAddress),
    ("`HttpUrl`", pydantic.HttpUrl),
    ("`AnyUrl`", pydantic.AnyUrl),
    ("`bytes`", bytes),
    ("`Base64Bytes`", pydantic.Base64Bytes),
    ("`Enum` (plain, str values)", Colour),
    ("`IntEnum`", Level),
    ("`StrEnum`", Mode),
    ("`Literal[1, 2]`", Literal[1, 2]),
    ('`Literal["a", "b"]`', Literal["a", "b"]),
    ("`Decimal`", decimal.Decimal),
    (
        "`Decimal` with `max_digits`, `decimal_places`",
        Annotated[decimal.Decimal, pydantic.Field(max_digits=10, decimal_places=2)],
    ),
    ("`UUID`", uuid.UUID),
    ("`int | None`", int | None),
    ("`list[int | None]`", list[int | None]),
    ("`dict[str, int]`", dict[str, int]),
    ("`dict[int, str]`", dict[int, str]),
    ("`dict[UUID, str]`", dict[uuid.UUID, str]),
    ("`dict[date, str]`", dict[datetime.date, str]),
    ("`dict[datetime, str]`", dict[datetime.datetime, str]),
    ("`dict[Level, str]` (an IntEnum key)", dict[Level, str]),
    ("`dict[Mode, str]` (a StrEnum key)", dict[Mode, str]),
)
"""(how the docs name it, the annotation): the types of a team's model, item by item."""


class Card(pydantic.BaseModel):
    """A member of a tagged union."""

    kind: Literal["card"]
    last4: str


class Transfer(pydantic.BaseModel):
    """Another member of a tagged union."""

    kind: Literal["transfer"]
    iban: str


class Street(pydantic.BaseModel):
    """A member of an untagged union."""

    street: str


class Locker(pydantic.BaseModel):
    """Another member of an untagged union."""

    locker_id: int


_TAGGED: Any = Annotated[Card | Transfer, pydantic.Field(discriminator="kind")]
UNIONS: Final[tuple[tuple[str, Any], ...]] = (
    ("`int | str`", int | str),
    ("`Card | Transfer` on a `Literal` tag (`discriminator`)", _TAGGED),
    ("`list[Card | Transfer]` (tagged)", GenericAlias(list, (_TAGGED,))),
    ("`Street | Locker` (no tag)", Street | Locker),
)
"""Unions, after the catalogue: `schemas.unions` says what each format makes of them."""


class Node(pydantic.BaseModel):
    """A model that holds itself (a tree)."""

    name: str
    children: list[Node] = []


T = TypeVar("T")


class Box(pydantic.BaseModel, Generic[T]):
    """A generic model."""

    item: T


def _cents(value: decimal.Decimal) -> int:
    return int(value.scaleb(2))


def _from_cents(value: Any) -> Any:
    return decimal.Decimal(value).scaleb(-2) if isinstance(value, int) else value


def _iso(value: datetime.datetime) -> str:
    return value.astimezone(datetime.UTC).isoformat(timespec="milliseconds")


APPLIED: Final[tuple[tuple[str, Any, dict[str, Any]], ...]] = (
    ("`Json[dict[str, int]]`", pydantic.Json[dict[str, int]], {}),
    ("`SecretStr`", pydantic.SecretStr, {}),
    ("`SecretBytes`", pydantic.SecretBytes, {}),
    ("`Enum` (plain) with `use_enum_values=True`", Colour, {"use_enum_values": True}),
    ("a model that holds itself (`children: list[Node]`)", Node, {}),
    ("a generic model (`Box[int]`)", Box[int], {}),
    (
        "`datetime` written by a `PlainSerializer` as ISO text",
        Annotated[
            pydantic.AwareDatetime,
            pydantic.PlainSerializer(_iso, return_type=str, when_used="json"),
        ],
        {},
    ),
    (
        "`Decimal` written as cents by a `PlainSerializer` (read back by a "
        "`BeforeValidator`)",
        Annotated[
            decimal.Decimal,
            pydantic.BeforeValidator(_from_cents),
            pydantic.PlainSerializer(_cents, return_type=int, when_used="json"),
        ],
        {},
    ),
)
"""What pydantic applies beyond the annotation, after the unions: (how the docs name
it, the annotation, the model's config)."""

_HEAD: Final = """# What each type becomes in each codec

Generated from the code (`schemas/user/catalogue.py`; a unit test fails when this
file differs: `python -m schemas.user.catalogue docs/types.md` rewrites it). Each row
is a one-field pydantic model read as a team's model is.

- **native**: the format has the type; the decoded attribute is the same value.
- **carried as X**: the format has no such type; the value travels as X and the
  codec makes your type again (`codec-schema check` lists each such field as
  "changed: carried as X").
- **refused**: no faithful form: that codec alone is left out, with this reason
  (the others run).

The pydantic codecs (`json+pydantic`, `json-stdlib+pydantic`, `orjson+pydantic`)
run your own model and carry every type, but for orjson's limit of 64-bit ints (its
verdict is in the pydantic column when it is not native). Validators are never
refused: `check` lists them as not run by the derived codecs.

Your model is read as pydantic reads it (its core schema), so the last rows are what
pydantic applies beyond an annotation: `Json[X]` and secrets travel as the text your
producer writes; with `use_enum_values` your model holds the values, which every
format carries; a model that holds itself and a generic model are messages like
any other. A serializer is tried on your model's own messages: what it writes is
carried where the derived forms read it back to your model's value, else that field
is refused, naming the serializer.

"""


def cells(annotation: Any, config: dict[str, Any] | None = None) -> dict[str, str]:
    """Each derived codec's verdict on one annotation (and orjson+pydantic's, the
    one pydantic codec with a limit): native, carried or refused, as a team's
    model with that one field is loaded (`from_class`)."""
    settings = pydantic.ConfigDict()
    settings.update(config or {})  # type: ignore[typeddict-item]
    model = pydantic.create_model("Row", __config__=settings, value=(annotation, ...))
    schema = from_class(model, "catalogue:Row")
    lines = {codec: list(found) for codec, found in schema.refused.items()}
    forms = carried(schema.shape, "pydantic")
    out: dict[str, str] = {}
    for codec in (*DERIVED_CODECS, ORJSON):
        if lines.get(codec):
            out[codec] = "refused: " + "; ".join(_reason(r) for r in lines[codec])
        elif forms.get(codec):
            out[codec] = "; ".join(_reason(f) for f in forms[codec])
        else:
            out[codec] = "native"
    return out


def _reason(line: str) -> str:
    return line.partition(": ")[2].replace("|", "\\|")


def render() -> str:
    """docs/types.md: the catalogue against every codec, as a markdown table."""
    head = ["type", "pydantic codecs", *DERIVED_CODECS]
    rows = [
        "| " + " | ".join(head) + " |",
        "|" + " --- |" * len(head),
    ]
    rows_of: list[tuple[str, Any, dict[str, Any]]] = [
        (label, a, {}) for label, a in (*CATALOGUE, *UNIONS)
    ]
    for label, annotation, config in (*rows_of, *APPLIED):
        verdicts = cells(annotation, config)
        orjson = verdicts[ORJSON]
        pydantic_cell = "native" if orjson == "native" else f"native; {ORJSON} {orjson}"
        row = [label.replace("|", "\\|"), pydantic_cell] + [
            verdicts[c] for c in DERIVED_CODECS
        ]
        rows.append("| " + " | ".join(row) + " |")
    return _HEAD + "\n".join(rows) + "\n"


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(render(), encoding="utf-8")
