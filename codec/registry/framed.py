"""``FramedCodec``: a codec's values behind the Confluent frame, decoders cached per id.

It wraps an unframed codec (avro, protobuf or a JSON codec) and changes nothing in
it: ``decode_unchecked`` reads the frame's header (`frame`), finds the decoder of
that schema id in a bounded dict and calls it; the registry is asked once per id,
on the first message that carries it, never per message.

Faults are decode errors, so the worker dead-letters the message (its reason header
says which, its message header names the id) and goes on with the partition:

| reason | when |
| --- | --- |
| `frame` | an empty or short value, a magic byte other than 0 or 1, bad indexes |
| `schema_unknown` | the registry does not know the id (remembered for `unknown_ttl_s`) |
| `schema_mismatch` | the writer's schema is another type, or does not resolve |
| `registry_unavailable` | no answer within the client's bounded attempts; for the
  client's cooldown after that, new ids fail at once (known ids keep decoding) |

confluent-kafka 2.x's header form (`__value_schema_id`: the value unframed, the
frame's header in a message header) is read by `decode_headed`, which the worker
calls only after a decode failed on a message carrying that header (as
confluent-kafka's `dual_schema_id_deserializer`, the header wins over the value's
first bytes): messages without it pay nothing for it.

Performance note: a known id costs a length test, one byte test, an int from 4 bytes
and one dict lookup over the unframed codec (`codec-bench` measures it). The cache
holds at most `cache_size` ids; past that the oldest is dropped (a later message of
it asks the registry again).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any, Final

import msgspec

from codec.base import Codec, as_decode_error, as_encode_error, safe_decode
from codec.registry.client import (
    RegistryUnavailable,
    SchemaNotFound,
    SchemaSource,
    lookup_error,
)
from codec.registry.decoders import (
    FramedDecoder,
    avro_decoder,
    json_decoder,
    protobuf_decoder,
    protobuf_index_path,
)
from codec.registry.frame import (
    GUID_HEADER,
    ID_HEADER,
    MAGIC_GUID,
    MAGIC_ID,
    SCHEMA_ID_HEADER,
    frame_error,
    id_header,
    indexes_bytes,
    schema_ref,
)
from schemas.errors import DecodeError, EncodeError

_JSON_SCHEMA: Final = "http://json-schema.org/draft-07/schema#"
_BUILDERS: Final[dict[str, Callable[[Codec[Any], Any, int | str], FramedDecoder]]] = {
    "AVRO": avro_decoder,
    "PROTOBUF": protobuf_decoder,
    "JSON": json_decoder,
}


def _naming(ref: int | str, error: DecodeError) -> DecodeError:
    """``error`` (a payload the codec refused) naming the schema id it was
    written with, for the dead letter's message."""
    return DecodeError(
        f"schema id {ref}: {error}",
        codec=error.codec,
        reason=error.reason,
        cause_type=error.cause_type,
    )


class FramedCodec:
    """Decodes and encodes ``inner``'s values inside the Confluent frame.

    Args:
        inner: the unframed codec (avro, protobuf or a JSON codec).
        schema_type: its registry type: AVRO, PROTOBUF or JSON.
        client: the registry client (bounded calls).
        cache_size: decoders kept, one per schema id.
        unknown_ttl_s: how long an id the registry did not know is not asked again.
    """

    def __init__(
        self,
        inner: Codec[Any],
        schema_type: str,
        client: SchemaSource,
        *,
        cache_size: int = 1000,
        unknown_ttl_s: float = 30.0,
    ) -> None:
        self.inner = inner
        self.schema_type = schema_type
        self.name = f"{inner.name}+confluent"
        self.content_type = inner.content_type
        self.native_type = inner.native_type
        self.client = client
        self._cache_size = cache_size
        self._ttl = unknown_ttl_s
        self._decoders: dict[int | str, FramedDecoder] = {}
        self._prefix: bytes | None = None
        decoders, learn, name = self._decoders, self._learn, self.name

        def decode_unchecked(data: bytes) -> Any:
            ref, pos = schema_ref(data, name)
            found = decoders.get(ref)
            if found is None:
                found = learn(ref)
            try:  # free unless it raises (zero-cost try since Python 3.11)
                return found(data, pos)
            except (DecodeError, MemoryError):
                raise  # a frame or schema fault names the id already
            except Exception as exc:
                raise _naming(ref, as_decode_error(name, exc)) from exc

        self.decode_unchecked = decode_unchecked

    @property
    def cached_ids(self) -> int:
        """How many schema ids have a decoder (or a remembered failure) now."""
        return len(self._decoders)

    def _learn(self, ref: int | str) -> FramedDecoder:
        """Builds (and caches) the decoder of ``ref``; raises `DecodeError` if it
        cannot, remembering an unknown or mismatched id for ``unknown_ttl_s``."""
        try:
            writer = self.client.schema_by_id(ref)
            build = _BUILDERS[self.schema_type]
            decoder = build(self.inner, writer, ref)
        except (SchemaNotFound, ValueError, DecodeError) as exc:
            # not found, or refused (HTTP 401, 403, 422...): not asked again for a while
            error = (
                exc
                if isinstance(exc, DecodeError)
                else lookup_error(self.name, ref, exc)
            )
            self._remember(ref, self._failing(ref, error))
            raise error from None
        except RegistryUnavailable as exc:  # not remembered: the client cools down
            raise lookup_error(self.name, ref, exc) from None
        self._remember(ref, decoder)
        return decoder

    def _failing(self, ref: int | str, error: DecodeError) -> FramedDecoder:
        until = time.monotonic() + self._ttl
        decoders = self._decoders

        def fail(data: bytes, pos: int) -> Any:
            if time.monotonic() >= until:
                decoders.pop(ref, None)
                return self.decode_unchecked(data)
            raise error

        return fail

    def _remember(self, ref: int | str, decoder: FramedDecoder) -> None:
        while len(self._decoders) >= self._cache_size:
            del self._decoders[next(iter(self._decoders))]  # the oldest
        self._decoders[ref] = decoder

    def decode(self, data: bytes, /) -> Any:
        return safe_decode(self.name, self.decode_unchecked, data)

    def decode_headed(self, header: bytes, data: bytes, /) -> Any:
        """Decodes an unframed value whose frame header came in the
        `__value_schema_id` message header (magic 1 and a GUID, or magic 0 and an
        id; protobuf's message indexes after it).

        Performance note: it copies the value once (header + value): it is the
        failure path's, never called for a value that decoded framed.

        Raises:
            DecodeError: reason `frame` for a header that is not a schema id; else
                as `decode_unchecked`.
        """
        need = {MAGIC_ID: ID_HEADER, MAGIC_GUID: GUID_HEADER}.get(
            header[0] if header else -1, 0
        )
        if not need or len(header) < need:
            raise frame_error(
                self.name,
                f"{SCHEMA_ID_HEADER} header is not a schema id: {bytes(header[:24])!r}",
            )
        return self.decode_unchecked(bytes(header) + data)

    # -- writing ----------------------------------------------------------------------

    def schema_text(self) -> str:
        """The schema to register for ``inner``'s type: Avro JSON, a base64
        FileDescriptorProto (as confluent-kafka's serializer registers it), or a
        JSON Schema."""
        native = self.inner.native_type
        if self.schema_type == "AVRO":
            return json.dumps(self.inner.schema)  # type: ignore[attr-defined]
        if self.schema_type == "PROTOBUF":
            file = native.DESCRIPTOR.file
            from google.protobuf import descriptor_pb2

            proto = descriptor_pb2.FileDescriptorProto()
            file.CopyToProto(proto)
            return base64.b64encode(proto.SerializeToString()).decode()
        if isinstance(native, type) and issubclass(native, msgspec.Struct):
            schema: dict[str, Any] = msgspec.json.schema(native)
        else:
            schema = native.model_json_schema(ref_template="#/$defs/{model}")
        top = schema.pop("$ref", "").rpartition("/")[2]
        # a registry discovers the type from a top-level object schema
        body = schema.get("$defs", {}).get(top, {}) if top else {}
        return json.dumps({"$schema": _JSON_SCHEMA, **schema, **body})

    def record_name(self) -> str:
        """The record's full name (RecordNameStrategy's subject): Avro's full name,
        the protobuf message's, a JSON Schema's `title` (as confluent-kafka's
        serializers name them)."""
        native = self.inner.native_type
        if self.schema_type == "AVRO":
            schema = self.inner.schema  # type: ignore[attr-defined]
            space = schema.get("namespace")
            return f"{space}.{schema['name']}" if space else str(schema["name"])
        if self.schema_type == "PROTOBUF":
            return str(native.DESCRIPTOR.full_name)
        title = json.loads(self.schema_text()).get("title")
        return str(title) if title else f"{native.__module__}.{native.__qualname__}"

    def use_writer(self, schema_id: int) -> None:
        """Writes values framed with ``schema_id`` (the id ``schema_text`` got)."""
        prefix = id_header(schema_id)
        if self.schema_type == "PROTOBUF":
            path, _ = protobuf_index_path(self.inner.native_type)
            prefix += indexes_bytes(path)
        self._prefix = prefix

    def register(self, subject: str) -> int:
        """Looks ``schema_text`` up under ``subject``, registers it if it is not
        there, and writes with its id.

        Raises:
            RegistryUnavailable: the registry could not be used.
            ValueError: it refused the schema (incompatible with the subject's).
        """
        text = self.schema_text()
        schema_id = self.client.lookup(subject, self.schema_type, text)
        if schema_id is None:
            schema_id = self.client.register(subject, self.schema_type, text)
        self.use_writer(schema_id)
        return schema_id

    def encode(self, obj: Any, /) -> bytes:
        if self._prefix is None:
            raise EncodeError(
                "no writer schema id: register the schema first",
                codec=self.name,
                reason="encode",
            )
        try:
            return self._prefix + self.inner.encode(obj)
        except EncodeError:
            raise
        except Exception as exc:
            raise as_encode_error(self.name, exc) from exc

    def to_builtins(self, obj: Any, /) -> dict[str, Any]:
        return self.inner.to_builtins(obj)

    def from_builtins(self, data: dict[str, Any], /) -> Any:
        return self.inner.from_builtins(data)
