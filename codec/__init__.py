"""The codec registry: every key of DESIGN.md, each bound to a schema once.

| key | decode path | wire |
| --- | --- | --- |
| `json+pydantic` | `Model.model_validate_json(data)` | JSON |
| `json-stdlib+pydantic` | `Model.model_validate(json.loads(data))` | JSON |
| `orjson+pydantic` | `Model.model_validate(orjson.loads(data))` | JSON |
| `msgspec-json` | `msgspec.json.Decoder(Struct)` | JSON |
| `msgspec-msgpack` | `msgspec.msgpack.Decoder(Struct)` | MessagePack |
| `protobuf` | generated class `FromString` (upb) | protobuf |
| `flatbuffers` | verify, then a lazy view over flatc's accessors | FlatBuffers |
| `capnp` | pycapnp reader, traversed once, then a lazy view | Cap'n Proto |
| `avro` | `fastavro.schemaless_reader`, converted to the Struct | Avro binary |
| `auto` | chosen per message by the `content-type` header | any |

`base` holds the interface and the one place library errors become `DecodeError`;
`views` the lazy views of the zero-copy readers, `protobuf_unions` a union's oneof
wrapper, `record_names` Avro's record names on an untagged union; one module per
codec family stands
on them (`msgspec_codec`, `pydantic_json`, `protobuf_codec`, `avro_codec`,
`capnp_codec`, and `flatbuffers/`, a subpackage for its generator, layout and
verifier); `convert` and `auto` on those; this registry on top. The package may
import `schemas` only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Final, Literal, get_args

from codec.auto import AutoCodec
from codec.base import (
    AVRO,
    CAPNP,
    FLATBUFFERS,
    JSON,
    MSGPACK,
    PROTOBUF,
    Codec,
    as_decode_error,
    as_encode_error,
)
from codec.convert import native_to_builtins
from codec.flatbuffers.accessors import generated_modules
from codec.msgspec_codec import MsgspecJsonCodec, MsgspecMsgpackCodec
from codec.protobuf_codec import ProtobufCodec
from codec.pydantic_json import (
    OrjsonPydanticCodec,
    PydanticJsonCodec,
    StdlibJsonPydanticCodec,
)
from schemas.derive.avro_schema import avro_schema
from schemas.derive.capnp_schema import capnp_form
from schemas.derive.fbs_schema import FbsForm, flatbuffers_form
from schemas.errors import ConfigError
from schemas.registry import SCHEMAS, SchemaForms, SchemaName
from schemas.wire_shape import shape_of

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
    "check_form",
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
    "flatbuffers",
    "capnp",
    "avro",
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
    "protobuf": lambda s: ProtobufCodec(s.proto, getattr(s, "shape", None)),
    "flatbuffers": lambda s: _flatbuffers(s),
    "capnp": lambda s: _capnp(s),
    "avro": lambda s: _avro(s),
    "auto": None,  # built by get_codec: it needs the JSON and output codec choices
}
"""Registry key -> factory taking a schema. A unit test keeps it equal to CodecName.

The FlatBuffers, Cap'n Proto and Avro codecs import their runtimes when first
built: a worker of another codec does not load them (the flatbuffers runtime
imports numpy), so its RSS and heap are its own codec's."""


def _flatbuffers(s: SchemaForms) -> Codec[Any]:
    from codec.flatbuffers.codec import FlatbuffersCodec

    return FlatbuffersCodec(s.struct, shape_of(s))


def _capnp(s: SchemaForms) -> Codec[Any]:
    from codec.capnp_codec import CapnpCodec

    return CapnpCodec(s.struct, shape_of(s))


def _avro(s: SchemaForms) -> Codec[Any]:
    from codec.avro_codec import AvroCodec

    return AvroCodec(s.struct, shape_of(s))


_OPTIONAL_AUTO: Final[dict[str, CodecName]] = {
    FLATBUFFERS: "flatbuffers",
    CAPNP: "capnp",
    AVRO: "avro",
}
"""Formats `auto` reads when the schema has their form (a refusal leaves one out)."""

REAL_CODECS: Final[tuple[CodecName, ...]] = tuple(
    name for name, factory in CODECS.items() if factory is not None
)
"""Every codec with one wire format (what an A/B compares)."""


_DERIVED_FORMS: Final[dict[str, Callable[[Any], object]]] = {
    "flatbuffers": flatbuffers_form,
    "capnp": capnp_form,
    "avro": avro_schema,
}


def check_form(name: str, schema: SchemaName | SchemaForms) -> None:
    """Refuse a schema codec `name` cannot carry, before anything is built.

    Settings validation calls it, so a refusal is a configuration error naming the
    field. The form is derived in process; for `flatbuffers`, flatc's accessors are
    generated too (once, cached), so a missing flatc is a configuration error as well.

    Raises:
        ConfigError: one line per field codec `name` cannot carry, with the reason.
    """
    why = codec_refusal(name, schema)
    if why is not None:
        raise ConfigError(why)


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
    for content_type, key in _OPTIONAL_AUTO.items():
        # A schema the format cannot hold: that format's messages are refused.
        with contextlib.suppress(ConfigError):
            by_type[content_type] = get_codec(key, bound)
    output = get_codec(auto_output or auto_json, bound)
    return AutoCodec(by_type, output)


def codec_refusal(name: str, schema: SchemaName | SchemaForms) -> str | None:
    """Why codec `name` cannot run `schema` (one line per field), or None.

    Two sources, both listed in full: the parts of a user's schema the codec's
    format cannot carry (`schemas.formats`: a date for protobuf, an int past 64
    bits for MessagePack...), and, for FlatBuffers, Cap'n Proto and Avro, the
    derived form's own rules (names, nesting), each field once.
    """
    bound = SCHEMAS[schema] if isinstance(schema, str) else schema
    verdicts = getattr(bound, "verdicts", None)
    if verdicts is None:
        return _refusal(name, bound)
    if name not in verdicts:
        verdicts[name] = _refusal(name, bound)
    why: str | None = verdicts[name]
    return why


def _refusal(name: str, bound: SchemaForms) -> str | None:
    refusal = getattr(bound, "refusal", None)
    derive = _DERIVED_FORMS.get(name)
    failed = None
    if derive is not None:
        try:
            form = derive(shape_of(bound))
            if isinstance(form, FbsForm):
                generated_modules(form)
        except ConfigError as exc:
            failed = str(exc)
    if refusal is None:
        return failed
    known = tuple(getattr(bound, "refused", {}).get(name, ()))
    more = tuple(line for line in _lines(failed) if not _listed(line, known))
    why = refusal(name, more)
    return None if why is None else str(why)


def _lines(text: str | None) -> list[str]:
    """The "PATH: REASON" lines of a refusal's text (`Refusals.raise_any`)."""
    if text is None:
        return []
    head, *rest = text.splitlines()
    if rest:
        return [line.strip() for line in rest]
    return [head.removeprefix("schema error: ")]


def _listed(line: str, known: tuple[str, ...]) -> bool:
    """The same field (last path part) and reason is listed already."""
    path, _, reason = line.partition(": ")
    field = path.rsplit(".", 1)[-1]
    for other in known:
        other_path, _, other_reason = other.partition(": ")
        if other_reason == reason and other_path.rsplit(".", 1)[-1] == field:
            return True
    return False
