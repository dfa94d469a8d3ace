"""Helpers on pydantic's core schema nodes: whose function a node runs, how code is named.

A node's function is pydantic's own (a type it makes: an address, a URL, a secret)
or the team's (a validator, a serializer); the team's is named in the lines a team
reads as it declared it (`AfterValidator 'strip'`, `field_serializer 'to_cents'`).
"""

from __future__ import annotations

import functools
from typing import Any, Final

from pydantic.types import EncodedBytes

from schemas.shape import Constraints, Container, ScalarKind

CoreSchema = dict[str, Any]
"""One node of pydantic's core schema (`pydantic_core.core_schema`)."""

SCALARS: Final[dict[str, ScalarKind]] = {
    "str": "str",
    "int": "int",
    "float": "float",
    "bool": "bool",
    "bytes": "bytes",
    "datetime": "datetime",
    "date": "date",
    "time": "time",
    "timedelta": "timedelta",
    "uuid": "uuid",
    "decimal": "decimal",
}
CONTAINERS: Final[dict[str, Container]] = {
    "list": "list",
    "set": "set",
    "frozenset": "frozenset",
}
BOUNDS: Final = frozenset(Constraints.__dataclass_fields__) - {"tz"}
TRANSFORMS: Final = ("strip_whitespace", "to_lower", "to_upper")
IGNORED: Final = frozenset(
    {
        "type",
        "ref",
        "metadata",
        "serialization",
        "strict",
        "allow_inf_nan",
        "coerce_numbers_to_str",
        "microseconds_precision",
        "tz_constraint",
        "now_op",
        "now_utc_offset",
        "version",
        "fail_fast",
        "items_schema",
        "keys_schema",
        "values_schema",
        "cls",
        "members",
        "sub_type",
        "missing",
        "expected",
        "ser_json_timedelta",
        "val_temporal_unit",
        "ser_json_temporal",
        "regex_engine",
        "variadic_item_index",
        "custom_error_type",
    }
)
"""Keys of a type node that change what is accepted or how it is parsed, never
the value's type or its bounds."""
MODES: Final = {
    "function-after": "after",
    "function-before": "before",
    "function-wrap": "wrap",
    "function-plain": "plain",
}
"""Function nodes (a validator of the team's, or a type pydantic makes) by mode."""
VALIDATOR_NAMES: Final = {
    "after": "AfterValidator",
    "before": "BeforeValidator",
    "wrap": "WrapValidator",
    "plain": "PlainValidator",
}
EFFECTS: Final = {
    "after": "values arrive as sent: what it changes is not changed, what it "
    "rejects is accepted",
    "before": "input is not converted first: what it would convert is rejected "
    "or read as sent",
    "wrap": "pydantic's parsing of it is replaced by yours there: the derived "
    "form checks the declared type only",
    "plain": "pydantic's parsing of it is replaced by yours there: the derived "
    "form checks the declared type only",
    "transform": "strings are not changed on the way in",
    "discriminator": "the member is picked by its Literal tag field alone: a "
    "message your function maps otherwise (by another key, or with no tag) is "
    "rejected, or decoded as the member its tag names",
}
"""What a validator that a codec does not run means for the values it decodes."""


def owner(function: Any) -> Any:
    """The class (or object) a node's function belongs to: a bound method's
    `__self__`, a partial's function, else the function itself (pydantic passes
    a class as one)."""
    if isinstance(function, functools.partial):
        return function.func
    return getattr(function, "__self__", function)


def is_pydantic_own(function: Any) -> bool:
    """A function of pydantic's (or of the type it builds), not the team's code."""
    module = getattr(owner(function), "__module__", None) or ""
    return module.split(".")[0] in ("pydantic", "pydantic_core", "ipaddress")


def function_name(function: Any) -> str:
    """How a validator or serializer is named in a line: `'to_cents'`."""
    func = getattr(function, "__func__", function)
    return repr(getattr(func, "__name__", None) or type(func).__name__)


def validator_label(node: CoreSchema) -> str:
    """`AfterValidator 'strip'`: an `Annotated` validator as the team wrote it."""
    return (
        f"{VALIDATOR_NAMES[MODES[node['type']]]} {function_name(node_function(node))}"
    )


def serializer_label(ser: CoreSchema) -> str | None:
    """The team's serializer a node's `serialization` runs, named as declared
    (`field_serializer 'to_cents'`, `PlainSerializer 'iso'`); None for pydantic's
    own (an address's text, a secret's mask) and for no function at all."""
    if ser.get("type") not in ("function-plain", "function-wrap"):
        return None
    function = ser["function"]
    if is_pydantic_own(function):
        return None
    if ser.get("is_field_serializer"):
        kind = "field_serializer"
    else:
        kind = (
            "PlainSerializer" if ser["type"] == "function-plain" else "WrapSerializer"
        )
    return f"{kind} {function_name(function)}"


def node_function(node: CoreSchema) -> Any:
    return node["function"]["function"]


def encoded_bytes(node: CoreSchema) -> EncodedBytes | None:
    """The `EncodedBytes` (`Base64Bytes`...) a function node decodes with."""
    cls = owner(node_function(node)) if node["type"] in MODES else None
    return cls if isinstance(cls, EncodedBytes) else None


def bytes_hint(ser: str, configured: list[str]) -> str:
    """Why msgspec cannot read pydantic's bytes, and what declaring them
    `Base64Bytes` breaks (a hint must say what it does to existing messages)."""
    how = "URL-safe base64" if ser == "base64" else f"{ser} text"
    drop = f" and removing {', '.join(configured)}" if configured else ""
    return (
        f"pydantic writes bytes to JSON as {how} (ser_json_bytes={ser!r}) and msgspec "
        f"as standard base64: declaring it pydantic.Base64Bytes{drop} makes standard "
        f"base64 the JSON wire of every codec, and the messages already written as "
        f"{how} then fail to decode or decode to other bytes"
    )


def twice(configured: list[str]) -> str:
    """Why Base64Bytes under a model's own bytes setting is refused."""
    return (
        f"Base64Bytes with model_config {', '.join(configured)}: pydantic codes the "
        "field's base64 twice (its own and the model's), msgspec once; remove "
        f"{'it' if len(configured) == 1 else 'them'} and the messages already "
        "written (base64 of base64) no longer decode"
    )


def strict_or_lax(node: CoreSchema) -> CoreSchema:
    """The side of a lax-or-strict pair that names the type: the strict side when
    the lax one is a bare function of pydantic's (an address parser)."""
    lax: CoreSchema = node["lax_schema"]
    if lax["type"] == "function-plain" and is_pydantic_own(node_function(lax)):
        strict: CoreSchema = node["strict_schema"]
        return strict
    return lax


def union_choice(choice: Any) -> CoreSchema:
    """A union choice: a node, or a (node, label) pair."""
    node: CoreSchema = choice[0] if isinstance(choice, tuple) else choice
    return node


def class_name(cls: Any) -> str:
    """A class's name in a line (or the object's text)."""
    return str(getattr(cls, "__name__", None) or cls)
