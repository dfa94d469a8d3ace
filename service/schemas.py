"""The schema registry: each payload profile's three forms, defined once each.

| key | `.proto` message | msgspec Struct | pydantic model | size |
| --- | --- | --- | --- | --- |
| `small` | `Payload` | `models.Payload` | `pydantic_models.Payload` | ~100 B JSON |
| `medium` | `OrderEvent` | `models.OrderEvent` | `pydantic_models.OrderEvent` | ~1 KB JSON |
| `large` | `RoutePlan` | `models.RoutePlan` | `pydantic_models.RoutePlan` | 10 KB-1.5 MB |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, Protocol, get_args

import msgspec
from google.protobuf.message import Message
from pydantic import BaseModel

from service import models, pydantic_models
from service.pb import messages_pb2

SchemaName = Literal["small", "medium", "large"]
SCHEMA_NAMES: Final[tuple[SchemaName, ...]] = get_args(SchemaName)


class SchemaForms(Protocol):
    """What a codec needs of a schema: a built-in `Schema` or a user's
    (`service.userschema.UserSchema`)."""

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
        "small", models.Payload, pydantic_models.Payload, messages_pb2.Payload
    ),
    "medium": Schema(
        "medium",
        models.OrderEvent,
        pydantic_models.OrderEvent,
        messages_pb2.OrderEvent,
    ),
    "large": Schema(
        "large", models.RoutePlan, pydantic_models.RoutePlan, messages_pb2.RoutePlan
    ),
}
