"""`auto` with `--framing confluent`: a frame is recognised by its magic byte.

A value that starts with 0 or 1 is read as a Confluent frame whatever its
`content-type` says, and the schema type its id has in the registry picks the
framed codec: AVRO -> `avro`, PROTOBUF -> `protobuf`, JSON -> the auto codec's JSON
codec. Any other value decodes by its `content-type`, as `auto` always does. JSON,
MessagePack and protobuf values never start with 0 or 1 (an object, a map, a field
tag of field 1 or more), so they cannot be mistaken for a frame; FlatBuffers and
Cap'n Proto values are never sniffed. Raw Avro can start with 0 or 1: on a topic
read this way, Avro values are expected framed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from codec.auto import AutoCodec
from codec.base import CAPNP, FLATBUFFERS, Codec, safe_decode
from codec.registry.client import (
    RegistryUnavailable,
    SchemaNotFound,
    SchemaSource,
    lookup_error,
)
from codec.registry.frame import schema_ref
from schemas.errors import DecodeError

_NEVER_SNIFFED: Final = (FLATBUFFERS, CAPNP)


class _Sniffing:
    """One content type's codec, with frames taken aside first."""

    def __init__(self, base: Codec[Any], framed: Callable[[bytes], Any]) -> None:
        self.name = base.name
        self.content_type = base.content_type
        self.native_type = base.native_type
        plain = base.decode_unchecked

        def decode_unchecked(data: bytes) -> Any:
            if data[:1] in (b"\x00", b"\x01"):
                return framed(data)
            return plain(data)

        self.decode_unchecked = decode_unchecked

    def decode(self, data: bytes, /) -> Any:
        return safe_decode(self.name, self.decode_unchecked, data)


class FramedAutoCodec(AutoCodec):
    """An `AutoCodec` whose per-content-type codecs recognise frames first.

    Args:
        auto: the auto codec (its codecs and output are kept as they are).
        framed: the framed codec of each schema type (AVRO, PROTOBUF, JSON).
        client: the registry, asked once per id for its schema type.
        cache_size: ids whose type (or whose absence) is kept.
        unknown_ttl_s: how long an id the registry did not know is not asked again.
        output: the output codec framed (`encode` writes with it), or None to
            write unframed.
    """

    def __init__(
        self,
        auto: AutoCodec,
        framed: Mapping[str, Any],
        client: SchemaSource,
        *,
        cache_size: int = 1000,
        unknown_ttl_s: float = 30.0,
        output: Any = None,
    ) -> None:
        self.__dict__.update(auto.__dict__)  # the same codecs, output and aliases
        if output is not None:
            self._output = output
        self.writer = output
        """The framed output codec (its schema registered at start), or None."""
        self._auto = auto
        self._framed = dict(framed)
        self._client = client
        self._types: dict[int | str, str] = {}
        self._unknown: dict[int | str, tuple[float, DecodeError]] = {}
        self._cache_size = cache_size
        self._ttl = unknown_ttl_s
        self._sniffing: dict[int, Any] = {}

    def codec_for(self, content_type: bytes | None) -> Any:
        """The codec for a header value, recognising frames (see the module)."""
        base = self._auto.codec_for(content_type)
        found = self._sniffing.get(id(base))
        if found is None:
            sniffs = base.content_type not in _NEVER_SNIFFED
            found = _Sniffing(base, self._decode_framed) if sniffs else base
            self._sniffing[id(base)] = found
        return found

    def schema_type(self, data: bytes) -> str:
        """The registry type (AVRO, PROTOBUF, JSON) of framed ``data``'s schema.

        Raises:
            DecodeError: not a frame, or its id's lookup failed (reason says which).
        """
        ref, _ = schema_ref(data, self.name)
        return self._types.get(ref) or self._learn(ref)

    def _decode_framed(self, data: bytes) -> Any:
        ref, _ = schema_ref(data, self.name)
        kind = self._types.get(ref)
        if kind is None:
            kind = self._learn(ref)
        codec = self._framed.get(kind)
        if codec is None:
            raise DecodeError(
                f"schema id {ref}: a {kind} schema: auto reads AVRO, PROTOBUF, JSON",
                codec=self.name,
                reason="schema_mismatch",
            )
        return codec.decode_unchecked(data)

    def _learn(self, ref: int | str) -> str:
        """The schema type of ``ref``; an unknown id (or one whose lookup the
        registry refused) is not asked again for ``unknown_ttl_s``; a registry that
        is down is (the client cools down)."""
        now = time.monotonic()
        until, error = self._unknown.get(ref, (0.0, None))
        if error is not None and until > now:
            raise error
        try:
            kind = self._client.schema_by_id(ref).schema_type
        except (SchemaNotFound, ValueError) as exc:  # not found, or refused (HTTP 4xx)
            error = lookup_error(self.name, ref, exc)
            self._bounded(self._unknown)[ref] = (now + self._ttl, error)
            raise error from None
        except RegistryUnavailable as exc:
            raise lookup_error(self.name, ref, exc) from None
        self._bounded(self._types)[ref] = kind
        return kind

    def _bounded(self, table: dict[Any, Any]) -> dict[Any, Any]:
        while len(table) >= self._cache_size:
            del table[next(iter(table))]  # the oldest
        return table
