"""The schema registry: the built-in schemas' three forms, and a user's, by spec.

| key | `.proto` message | msgspec Struct | pydantic model | size |
| --- | --- | --- | --- | --- |
| `small` | `Payload` | `models.Payload` | `pydantic_models.Payload` | ~100 B JSON |
| `medium` | `OrderEvent` | `models.OrderEvent` | `pydantic_models.OrderEvent` | ~1 KB JSON |
| `large` | `RoutePlan` | `models.RoutePlan` | `pydantic_models.RoutePlan` | 10 KB-1.5 MB |

Beside those keys, every tool's schema setting takes a user's spec, `MODULE:NAME`
(a pydantic v2 model or msgspec Struct) or `FILE.proto:Message`
(`schemas.user.loader.load_schema`). A `SchemaSpec` setting loads it while the
settings are validated, so a bad spec is a configuration error before Kafka is
touched; `resolve` then returns the same loaded schema for the rest of the process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Final, Literal, Protocol, TypeAlias, get_args

import msgspec
from google.protobuf.message import Message
from pydantic import AfterValidator, BaseModel

from schemas.builtin import pydantic_forms, structs
from schemas.builtin.pb import messages_pb2
from schemas.errors import ConfigError
from schemas.user.loader import UserSchema, load_schema

SchemaName = Literal["small", "medium", "large"]
SCHEMA_NAMES: Final[tuple[SchemaName, ...]] = get_args(SchemaName)


class SchemaForms(Protocol):
    """What a codec needs of a schema: a built-in `Schema` or a user's
    (`schemas.user.loader.UserSchema`)."""

    @property
    def name(self) -> str: ...
    @property
    def struct(self) -> type[msgspec.Struct]: ...
    @property
    def model(self) -> type[BaseModel]: ...
    @property
    def proto(self) -> type[Message]: ...


@dataclass(frozen=True, slots=True)
class Schema:
    """One message type in its three forms."""

    name: SchemaName
    struct: type[msgspec.Struct]
    model: type[BaseModel]
    proto: type[Message]


SCHEMAS: Final[dict[SchemaName, Schema]] = {
    "small": Schema(
        "small", structs.Payload, pydantic_forms.Payload, messages_pb2.Payload
    ),
    "medium": Schema(
        "medium",
        structs.OrderEvent,
        pydantic_forms.OrderEvent,
        messages_pb2.OrderEvent,
    ),
    "large": Schema(
        "large", structs.RoutePlan, pydantic_forms.RoutePlan, messages_pb2.RoutePlan
    ),
}

SPEC_HELP: Final = "small|medium|large, MODULE:NAME or FILE.proto:Message"
"""What a schema setting takes, for help texts and errors."""

_LOADED: dict[str, UserSchema] = {}
"""User schemas loaded by this process, by spec: each is imported and derived once."""


def resolve(spec: str, run_validators: bool = False) -> Schema | UserSchema:
    """The schema `spec` names: a built-in's forms, or a user's, loaded once per process.

    With `run_validators`, a user's pydantic model's Struct runs its after
    validators (`UserSchema.with_validators`, built once too).

    Raises:
        ConfigError: one line, "schema error: ...", for a spec that names no
            schema or a type with a field that cannot be mapped (its dotted path).
    """
    if spec in SCHEMAS:
        return SCHEMAS[spec]
    loaded = _LOADED.get(spec)
    if loaded is None:
        if ":" not in spec:
            raise ConfigError(f"schema error: {spec!r}: expected {SPEC_HELP}")
        loaded = _LOADED[spec] = load_schema(spec)
    if run_validators:
        key = f"{spec} --run-validators"
        if key not in _LOADED:
            _LOADED[key] = loaded.with_validators()
        return _LOADED[key]
    return loaded


def user_schema(spec: str) -> UserSchema | None:
    """The user's schema `spec` names (loaded once per process); None for a built-in.

    Raises:
        ConfigError: as `resolve`.
    """
    found = resolve(spec)
    return found if isinstance(found, UserSchema) else None


def _checked(spec: str) -> str:
    """Load the schema while the settings are validated (its error: one line)."""
    spec = spec.strip()
    try:
        resolve(spec)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    return spec


SchemaSpec: TypeAlias = Annotated[str, AfterValidator(_checked)]
"""A schema setting: a built-in key or a user's spec, loaded when validated."""
