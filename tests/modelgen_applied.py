"""The generator's models of what pydantic applies beyond an annotation.

Generic models (`Box[X]`, aliased or subclassed), models that hold themselves, a
model validator constraining two fields, a model serializer, serializers with the
validator that reads their output back, `Json[X]` and `SecretStr`: the rows
`tests.modelgen` adds to its catalogue, as (annotation, values, label).
"""

from __future__ import annotations

import datetime
import decimal
import json
from typing import Annotated, Any, Generic, TypeVar

import pydantic
from hypothesis import strategies as st

Values = st.SearchStrategy[Any]
T = TypeVar("T")


class Box(pydantic.BaseModel, Generic[T]):
    """A generic model: drawn as an alias (`Box[int]`) and as a subclass."""

    item: T
    note: str = ""


class TreeNode(pydantic.BaseModel):
    """A model that holds itself through a list."""

    label: str
    children: list[TreeNode] = []


class Chain(pydantic.BaseModel):
    """A model that holds itself through an optional field."""

    value: int
    next: Chain | None = None


class Window(pydantic.BaseModel):
    """Two fields constrained against each other by a model validator."""

    opens: int
    closes: int

    @pydantic.model_validator(mode="after")
    def closes_after_opening(self) -> Window:
        if self.closes < self.opens:
            raise ValueError("closes before it opens")
        return self


class Passthrough(pydantic.BaseModel):
    """A model serializer that writes what pydantic would (the wire is unchanged)."""

    code: str

    @pydantic.model_serializer(mode="wrap")
    def as_is(self, handler: Any) -> Any:
        return handler(self)


def _to_cents(value: decimal.Decimal) -> int:
    return int(value.scaleb(2))


def _from_cents(value: Any) -> Any:
    return decimal.Decimal(value).scaleb(-2) if isinstance(value, int) else value


def _iso_millis(value: datetime.datetime) -> str:
    return value.astimezone(datetime.UTC).isoformat(timespec="milliseconds")


_Cents = Annotated[
    decimal.Decimal,
    pydantic.BeforeValidator(_from_cents),
    pydantic.PlainSerializer(_to_cents, return_type=int, when_used="json"),
]
_IsoMillis = Annotated[
    pydantic.AwareDatetime,
    pydantic.PlainSerializer(_iso_millis, return_type=str, when_used="json"),
]


def applied(text: Values, ints: Any, aware: Values) -> list[tuple[Any, Values, str]]:
    """The rows: annotation, a strategy of valid input values, a label."""
    return [
        (
            pydantic.Json[dict[str, int]],
            st.dictionaries(text, ints(), max_size=3).map(json.dumps),
            "Json",
        ),
        (pydantic.SecretStr, text, "SecretStr"),
        (
            _Cents,
            st.decimals("-999999.99", "999999.99", places=2),
            "cents (PlainSerializer, BeforeValidator)",
        ),
        (_IsoMillis, aware, "datetime as text (PlainSerializer)"),
        (TreeNode, _trees(text), "TreeNode"),
        (Chain, _chains(ints), "Chain"),
        (Window, _windows(ints), "Window"),
        (Passthrough, st.fixed_dictionaries({"code": text}), "Passthrough"),
    ]


def _trees(text: Values) -> Values:
    leaf = st.fixed_dictionaries({"label": text})
    return st.recursive(
        leaf,
        lambda kids: st.fixed_dictionaries(
            {"label": text, "children": st.lists(kids, max_size=2)}
        ),
        max_leaves=4,
    )


def _chains(ints: Any) -> Values:
    end = st.fixed_dictionaries({"value": ints()})
    return st.recursive(
        end,
        lambda rest: st.fixed_dictionaries({"value": ints(), "next": rest}),
        max_leaves=3,
    )


def _windows(ints: Any) -> Values:
    pair = st.tuples(ints(-(10**6), 10**6), ints(0, 10**6))
    return pair.map(lambda p: {"opens": p[0], "closes": p[0] + p[1]})
