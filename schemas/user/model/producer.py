"""Synthetic payloads as the team's producer writes them: validated by its model, then dumped.

A draw of random values is the input a producer could build its model from; the
model validates it (its validators, model validators included, accept it or not),
and what goes on the wire is what the producer writes from the model it holds:
`model_dump_json(by_alias=True)`, with `round_trip=True` where the model reads its
own output only so (a `Json[...]` field: `schemas.user.model.reader.needs_round_trip`).
So every synthetic payload is one the team's own model accepts, every serializer
has written its field, and every codec reads the bytes a real producer sends.

A draw the model rejects is drawn again. When nearly every draw is rejected (its
validators constrain fields against each other more tightly than random values
meet), the error names the validator and its message and points to recorded
traffic (`--replay`), in one line.

What the model writes is read back with the model once: a model that does not read
what it writes is not round-trip stable, and no codec (its own pydantic codecs
included) can read the producer's messages: `RoundTrip` says where.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

import pydantic
from pydantic import BaseModel

from schemas.errors import ConfigError
from schemas.user.model.reader import needs_round_trip

TRIES: Final = 40
"""Draws per payload before the model's validators are said to reject nearly every
one: a validator rejecting half the draws needs 40 in a row with odds of 1e-12."""
_MAX_TEXT: Final = 160


@dataclass(frozen=True, slots=True)
class RoundTrip:
    """Where a model does not read back what it writes.

    Attributes:
        where: the first field named by the error (or the model).
        why: pydantic's message, or the two values that differ.
    """

    where: str
    why: str

    def line(self) -> str:
        """The finding, in the words `codec-schema check` prints."""
        return (
            f"not round-trip stable: the model does not read back what it writes "
            f"(model_dump_json(by_alias=True)): {self.where}: {self.why}"
        )


def written(
    model: type[BaseModel], draw: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    """A payload as the producer writes it: the first draw `model` accepts, dumped.

    Raises:
        ConfigError: `TRIES` draws in a row rejected: the validator and its
            message, and what to do instead (one line).
    """
    return _dump(model, accepted(model, draw)[0])


def accepted(
    model: type[BaseModel], draw: Callable[[], dict[str, Any]]
) -> tuple[BaseModel, dict[str, Any]]:
    """The first draw `model` accepts: the model it makes, and the draw itself.

    A model held in another is drawn again alone (`schemas.user.synthetic`): a
    validator rejecting half its draws, in lists or maps of it, would otherwise
    reject nearly every draw of the whole message.

    Raises:
        ConfigError: `TRIES` draws in a row rejected (one line, as `written`).
    """
    first: pydantic.ValidationError | None = None
    for _ in range(TRIES):
        raw = draw()
        try:
            return model.model_validate_json(json.dumps(raw)), raw
        except pydantic.ValidationError as exc:
            first = first or exc
    assert first is not None  # noqa: S101  (every try failed with one)
    raise ConfigError(rejected(model, first))


def round_trip(model: type[BaseModel], payload: dict[str, Any]) -> RoundTrip | None:
    """None when `model` reads `payload`, what it wrote."""
    try:
        model.model_validate_json(json.dumps(payload))
    except pydantic.ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join((model.__name__, *(str(p) for p in error["loc"])))
        return RoundTrip(where, _short(error["msg"]))
    return None


def _dump(model: type[BaseModel], obj: BaseModel) -> dict[str, Any]:
    # Computed fields left out: no field of the message (every consumer computes
    # them again; protobuf's and a forbidding Struct's parsers refuse the key).
    out: dict[str, Any] = obj.model_dump(
        mode="json",
        by_alias=True,
        round_trip=_round_trip(model),
        exclude_computed_fields=True,
    )
    return out


@cache
def _round_trip(model: type[BaseModel]) -> bool:
    return needs_round_trip(model)


def rejected(model: type[BaseModel], exc: pydantic.ValidationError) -> str:
    """One line: which validator rejects the draws, its message, what to do."""
    error = exc.errors()[0]
    loc = tuple(str(p) for p in error["loc"])
    where = ".".join((model.__name__, *loc))
    who = _validator(model, loc) or "its validators"
    return (
        f"schema error: {where}: the model rejects nearly every synthetic payload "
        f"({TRIES} draws in a row): {who}: {_short(error['msg'])}; measure on your "
        "producer's messages instead: record them (codec-loadgen record) and pass "
        "the recording with --replay"
    )


def _validator(model: type[BaseModel], loc: tuple[str, ...]) -> str | None:
    """The validator of the model at `loc` that says what the error says: the
    model's own validators for an error on the model, a field's for a field."""
    cls: Any = model
    for part in loc[:-1]:  # down to the model holding the last key
        inner = getattr(_field(cls, part), "annotation", None)
        cls = inner if isinstance(inner, type) and issubclass(inner, BaseModel) else cls
    decorators = getattr(cls, "__pydantic_decorators__", None)
    if decorators is None:
        return None
    if not loc:
        found = [f"model_validator {n!r}" for n in decorators.model_validators]
    else:
        name = next(
            (n for n, f in cls.model_fields.items() if f is _field(cls, loc[-1])), ""
        )
        found = [
            f"field_validator {n!r}"
            for n, d in decorators.field_validators.items()
            if name in d.info.fields or "*" in d.info.fields
        ]
    return found[0] if len(found) == 1 else None


def _field(cls: Any, key: str) -> Any:
    """The field of `cls` an error's key names (its name or its alias)."""
    fields = getattr(cls, "model_fields", {})
    if key in fields:
        return fields[key]
    return next(
        (f for f in fields.values() if key in (f.alias, f.validation_alias)), None
    )


def _short(text: str) -> str:
    text = text.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."
