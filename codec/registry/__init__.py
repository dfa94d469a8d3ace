"""Schema-registry framing: the codecs that have a registry form, behind the Confluent frame.

Parts, in import order: `frame` (the header, message indexes) and `client` (a bounded
Confluent-compatible HTTP client; `memory`, one without a registry, for benchmarks;
`access_check`, the one request every tool makes at start, naming a wrong setting) <
`avro_resolution` (the derived Avro reader adapted to a team's writer schema),
`protobuf_fields` (a registered message's fields against the codec's) <
`decoders` (one per registered schema: Avro resolution, protobuf message indexes, JSON) < `framed` (``FramedCodec``: a wrapper
around an unframed codec, decoders cached per schema id) < `auto_framed` (`auto`
recognising frames by their magic byte) < this registry of which codec has which
registry type. May import `codec.base` and `schemas` only: the
unframed codecs and the worker's loop do not know it exists.
`FramedCodec` lives in `codec.registry.framed`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from codec.base import Codec
from codec.registry.client import RegistryAccess, RegistryClient, SchemaSource

if TYPE_CHECKING:
    from codec.auto import AutoCodec
    from codec.registry.framed import FramedCodec

__all__ = [
    "REGISTRY_TYPES",
    "RegistryAccess",
    "RegistryClient",
    "SchemaSource",
    "frame_auto",
    "frame_codec",
    "framing_refusal",
]

REGISTRY_TYPES: Final[dict[str, str]] = {
    "avro": "AVRO",
    "protobuf": "PROTOBUF",
    "json+pydantic": "JSON",
    "json-stdlib+pydantic": "JSON",
    "orjson+pydantic": "JSON",
    "msgspec-json": "JSON",
}
"""Each codec with a schema registry form, and that form's `schemaType`."""


def framing_refusal(name: str) -> str | None:
    """Why codec ``name`` cannot be framed (one line), or None if it can."""
    if name in REGISTRY_TYPES:
        return None
    takes = (
        "avro, protobuf or a JSON codec ("
        + ", ".join(n for n, t in REGISTRY_TYPES.items() if t == "JSON")
        + ")"
    )
    if name == "auto":
        return None  # frames recognised by their magic byte (`auto_framed`)
    return f"{name} has no schema registry type: --framing confluent takes {takes}"


def frame_auto(
    auto: AutoCodec,
    by_type: dict[str, Codec[Any]],
    client: SchemaSource,
    *,
    cache_size: int = 1000,
) -> AutoCodec:
    """The `auto` codec recognising frames by their magic byte (`auto_framed`),
    writing framed values when its output codec has a registry type.

    Args:
        auto: the `AutoCodec`.
        by_type: the unframed codec of each schema type (AVRO, PROTOBUF, JSON).
        client: the registry.
        cache_size: ids kept, per cache.
    """
    from codec.registry.auto_framed import FramedAutoCodec

    framed = {
        kind: frame_codec(codec, client, cache_size=cache_size)
        for kind, codec in by_type.items()
    }
    output = auto.output
    writer = None if framing_refusal(output.name) else frame_codec(output, client)
    return FramedAutoCodec(auto, framed, client, cache_size=cache_size, output=writer)


def frame_codec(
    inner: Codec[Any], client: SchemaSource, *, cache_size: int = 1000
) -> FramedCodec:
    """``inner`` behind the Confluent frame (its name must be in `REGISTRY_TYPES`).

    `framed` (with fastavro) is imported here, when a framed codec is built: a
    worker that frames nothing does not load it."""
    from codec.registry.framed import FramedCodec

    return FramedCodec(inner, REGISTRY_TYPES[inner.name], client, cache_size=cache_size)
