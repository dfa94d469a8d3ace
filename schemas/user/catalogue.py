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
from typing import Annotated, Any, Final, Literal

import pydantic

from schemas.carried import carried
from schemas.formats import DERIVED_CODECS, ORJSON, Refusals, carriage
from schemas.user.model.reader import read_model


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

"""


def cells(annotation: Any) -> dict[str, str]:
    """Each derived codec's verdict on one annotation (and orjson+pydantic's, the
    one pydantic codec with a limit): native, carried or refused."""
    model = pydantic.create_model("Row", value=(annotation, ...))
    refusals = Refusals()
    shape = read_model(model, refusals)
    lines: dict[str, list[str]] = {
        c: list(found) for c, found in refusals.by_codec.items()
    }
    for codec, found in carriage(shape, "pydantic").items():
        lines.setdefault(codec, []).extend(found)
    forms = carried(shape, "pydantic")
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
    for label, annotation in (*CATALOGUE, *UNIONS):
        verdicts = cells(annotation)
        orjson = verdicts[ORJSON]
        pydantic_cell = "native" if orjson == "native" else f"native; {ORJSON} {orjson}"
        row = [label.replace("|", "\\|"), pydantic_cell] + [
            verdicts[c] for c in DERIVED_CODECS
        ]
        rows.append("| " + " | ".join(row) + " |")
    return _HEAD + "\n".join(rows) + "\n"


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(render(), encoding="utf-8")
