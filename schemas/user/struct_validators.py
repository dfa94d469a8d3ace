"""A team's after-validators run by the derived msgspec Structs (`--run-validators`).

Where a pydantic model's `field_validator(mode="after")`, `model_validator(mode=
"after")` or a field's own `AfterValidator` is a plain function of the value (or of
the model), the derived Struct can call it in `__post_init__`, which msgspec runs
for every Struct it makes: on decode, and on `msgspec.convert`, so msgspec-json,
msgspec-msgpack, Avro and Cap'n Proto (which convert what they read into the
Struct) run them; protobuf and FlatBuffers (their own objects) do not. A field
validator's return value replaces the field's (`msgspec.structs.force_setattr`: the
upper-cased tracking number arrives upper-cased); whatever it raises is msgspec's
ValidationError (an AssertionError, or an AttributeError of a model validator that
reaches for pydantic's API, as a ValueError), so the message is dead-lettered.

It is an option, off by default, so that a CPU figure says what it measured: the
A/B report and `codec-schema check` say which codecs ran the validators. What
cannot run on a Struct stays "not run by", with the reason (`why_not`): before,
wrap and plain validators (they work on pydantic's input or replace its parsing),
validators that take pydantic's `ValidationInfo`, an `AfterValidator` inside a
container or union (only a field's own are run), computed fields and transforms.
A model validator's return value is not used: one that returns another model than
`self` (pydantic warns about it) changes nothing on the Struct.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec
from pydantic import AfterValidator, BaseModel
from pydantic._internal._decorators import inspect_validator

RUN_BY: Final = ("msgspec-json", "msgspec-msgpack", "avro", "capnp")
"""The derived codecs that decode into the Struct, so run its `__post_init__`."""
NESTED: Final = (
    "--run-validators runs the after validators of a field or a model only, not "
    "one inside a container or union, nor a transform"
)
"""Why a note the reader did not mark (a nested validator, a transform) does not run."""


def why_not(kind: str, mode: str, func: Any) -> str:
    """Why a validator cannot run on a Struct ("" when it can).

    Args:
        kind: `field_validator`, `model_validator`, `AfterValidator`, ...
        mode: its mode (`after`, `before`, `wrap`, `plain`; "" for none).
        func: the function pydantic calls (bound for a field validator).
    """
    if mode in ("before", "wrap", "plain"):
        return (
            f"a {mode} validator works on pydantic's input or parsing, which a "
            "Struct does not have"
        )
    if kind not in ("field_validator", "model_validator", "AfterValidator"):
        return f"--run-validators runs after validators only, not a {kind}"
    try:
        if kind == "model_validator":
            takes_info = inspect_validator(func, mode="after", type="model")
        else:
            takes_info = inspect_validator(func, mode="after", type="field")
    except Exception:
        return "its signature is not one pydantic's after validators have"
    if takes_info:
        return "it reads pydantic's ValidationInfo, which a Struct does not have"
    return ""


def field_runnable(info_metadata: list[Any]) -> list[Any]:
    """A field's own `AfterValidator`s that can run on a Struct, in order."""
    return [
        m
        for m in info_metadata
        if isinstance(m, AfterValidator)
        and not why_not("AfterValidator", "after", m.func)
    ]


def post_init(model: type[BaseModel]) -> Callable[[Any], None] | None:
    """The `__post_init__` running `model`'s runnable after validators, in
    pydantic's order (per field in declaration order: its `AfterValidator`s, then
    its field validators; then the model validators); None when there are none.
    """
    decorators = model.__pydantic_decorators__
    steps: list[tuple[str, list[Callable[[Any], Any]]]] = []
    for name, info in model.model_fields.items():
        funcs = [m.func for m in field_runnable(list(info.metadata))]
        for dec in decorators.field_validators.values():
            targets = dec.info.fields
            if ("*" in targets or name in targets) and not why_not(
                "field_validator", dec.info.mode, dec.func
            ):
                funcs.append(dec.func)
        if funcs:
            steps.append((name, funcs))
    models = [
        dec.func
        for dec in decorators.model_validators.values()
        if not why_not("model_validator", dec.info.mode, dec.func)
    ]
    if not steps and not models:
        return None
    set_field = msgspec.structs.force_setattr

    def __post_init__(self: Any) -> None:
        try:
            for name, funcs in steps:
                value = before = getattr(self, name)
                for func in funcs:
                    value = func(value)
                if value is not before:
                    set_field(self, name, value)
            for func in models:
                func(self)
        except (ValueError, TypeError):
            raise  # msgspec's ValidationError, as pydantic's
        except Exception as exc:  # an AssertionError (pydantic's too), or a
            # validator reaching for the model's API: a dead letter, not a crash
            raise ValueError(f"{type(exc).__name__}: {exc}") from exc

    return __post_init__
