"""The codec registry: every key of DESIGN.md, each bound to a schema once.

| key | decode path | wire |
| --- | --- | --- |
| `json+pydantic` | `Model.model_validate_json(data)` | JSON |
| `json-stdlib+pydantic` | `Model.model_validate(json.loads(data))` | JSON |
| `orjson+pydantic` | `Model.model_validate(orjson.loads(data))` | JSON |
| `msgspec-json` | `msgspec.json.Decoder(Struct)` | JSON |
| `msgspec-msgpack` | `msgspec.msgpack.Decoder(Struct)` | MessagePack |
| `protobuf` | generated class `FromString` (upb) | protobuf |
| `auto` | chosen per message by the `content-type` header | any |
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal, get_args

from codec.auto import AutoCodec
from codec.base import (
    JSON,
    MSGPACK,
    PROTOBUF,
    Codec,
    as_decode_error,
    as_encode_error,
)
from codec.convert import native_to_builtins
from codec.msgspec_codec import MsgspecJsonCodec, MsgspecMsgpackCodec
from codec.protobuf_codec import ProtobufCodec
from codec.pydantic_json import (
    OrjsonPydanticCodec,
    PydanticJsonCodec,
    StdlibJsonPydanticCodec,
)
from schemas.errors import ConfigError
from schemas.registry import SCHEMAS, SchemaForms, SchemaName

__all__ = [
    "CODECS",
    "CODEC_NAMES",
    "REAL_CODECS",
    "AutoCodec",
    "Codec",
    "CodecName",
    "JsonCodecName",
    "as_decode_error",
    "as_encode_error",
    "codec_refusal",
    "get_codec",
    "native_to_builtins",
]

CodecName = Literal[
    "json+pydantic",
    "json-stdlib+pydantic",
    "orjson+pydantic",
    "msgspec-json",
    "msgspec-msgpack",
    "protobuf",
    "auto",
]
JsonCodecName = Literal[
    "json+pydantic", "json-stdlib+pydantic", "orjson+pydantic", "msgspec-json"
]
CODEC_NAMES: Final[tuple[CodecName, ...]] = get_args(CodecName)

_Factory = Callable[[SchemaForms], Codec[Any]]

CODECS: Final[dict[CodecName, _Factory | None]] = {
    "json+pydantic": lambda s: PydanticJsonCodec(s.model),
    "json-stdlib+pydantic": lambda s: StdlibJsonPydanticCodec(s.model),
    "orjson+pydantic": lambda s: OrjsonPydanticCodec(s.model),
    "msgspec-json": lambda s: MsgspecJsonCodec(s.struct),
    "msgspec-msgpack": lambda s: MsgspecMsgpackCodec(s.struct),
    "protobuf": lambda s: ProtobufCodec(s.proto),
    "auto": None,  # built by get_codec: it needs the JSON and output codec choices
}
"""Registry key -> factory taking a schema. A unit test keeps it equal to CodecName."""

REAL_CODECS: Final[tuple[CodecName, ...]] = tuple(
    name for name, factory in CODECS.items() if factory is not None
)
"""Every codec with one wire format (what an A/B compares)."""


def get_codec(
    name: CodecName,
    schema: SchemaName | SchemaForms,
    *,
    auto_json: JsonCodecName = "msgspec-json",
    auto_output: CodecName | None = None,
) -> Codec[Any]:
    """Build the codec `name` bound to `schema`'s native type.

    Args:
        name: a registry key.
        schema: a schema registry key, or a schema's forms (a user's schema).
        auto_json: for `auto`, the codec that decodes JSON messages.
        auto_output: for `auto`, the codec `encode` writes with (default: `auto_json`).

    Raises:
        KeyError: for an unknown codec or schema (configuration validates first).
        ConfigError: the schema has a field codec `name` cannot carry (for
            `auto`: its JSON or output codec; it leaves out the others).
    """
    bound = SCHEMAS[schema] if isinstance(schema, str) else schema
    factory = CODECS[name]
    if factory is not None:
        refused = codec_refusal(name, bound)
        if refused is not None:
            raise ConfigError(refused)
        return factory(bound)
    wire: tuple[tuple[str, CodecName], ...] = (
        (JSON, auto_json),
        (MSGPACK, "msgspec-msgpack"),
        (PROTOBUF, "protobuf"),
    )
    by_type = {
        content_type: get_codec(codec, bound)
        for content_type, codec in wire
        if content_type == JSON or codec_refusal(codec, bound) is None
    }
    output = get_codec(auto_output or auto_json, bound)
    return AutoCodec(by_type, output)


def codec_refusal(name: str, schema: SchemaForms) -> str | None:
    """Why codec `name` cannot run `schema` (one line per field), or None."""
    refusal = getattr(schema, "refusal", None)
    return None if refusal is None else str(refusal(name) or "") or None
