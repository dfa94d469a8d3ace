"""One decoder per registered schema: the writer's schema met with the codec's own.

A decoder takes the whole framed value and the offset after its header, so nothing
is copied before it is needed. Built once per schema id (the framed codec caches
them); a writer's schema that cannot meet the reader's is refused here, once,
with reason `schema_mismatch`.

- Avro: the writer's schema resolved against the reader's (fastavro's reader-schema
  resolution: a field added with a default, a field removed, a promoted type), the
  reader first taking the writer's names, enums and fixeds and leaving out the fields
  the model defaults that the writer lacks (`avro_resolution`); an identical schema
  (same parsing canonical form) takes the codec's own decoder.
- Protobuf: the message indexes must name, in the registered file, the message the
  codec decodes (same name path), whose fields are the codec's number for number
  (`protobuf_fields`); the codec's generated class decodes the rest.
- JSON Schema: the codec's own JSON decoder (the registered JSON Schema is not
  validated per message: the codec's typed decode is the check).
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import re
from collections.abc import Callable
from typing import Any, Final

import fastavro
import msgspec
from fastavro.read import SchemaResolutionError
from fastavro.schema import to_parsing_canonical_form
from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError as ProtobufDecodeError

from codec.base import Codec, MalformedBuffer
from codec.registry.avro_resolution import (
    Unresolvable,
    optional_fields,
    resolution_reader,
)
from codec.registry.client import RegisteredSchema
from codec.registry.frame import indexes_bytes, message_indexes
from codec.registry.protobuf_fields import field_mismatch
from schemas.derive.avro_schema import NAMESPACE
from schemas.errors import ConfigError, DecodeError
from schemas.prototext.parser import parse_proto

FramedDecoder = Callable[[bytes, int], Any]
"""Decodes a framed value from the offset after its header."""

_MESSAGE: Final = re.compile(r"\bmessage\s+([A-Za-z_][A-Za-z0-9_]*)\s*\{|[{}]")
_COMMENT: Final = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def mismatch(codec: str, ref: int | str, text: str) -> DecodeError:
    """The error of a writer's schema the codec cannot read (reason `schema_mismatch`)."""
    return DecodeError(
        f"schema id {ref}: {text}", codec=codec, reason="schema_mismatch"
    )


def avro_decoder(
    inner: Codec[Any], writer: RegisteredSchema, ref: int | str
) -> FramedDecoder:
    """Decodes values written with ``writer``, resolved against the codec's schema."""
    name = inner.name
    if writer.schema_type != "AVRO":
        raise mismatch(name, ref, f"a {writer.schema_type} schema, not AVRO")
    reader_schema = inner.schema  # type: ignore[attr-defined]  # an AvroCodec
    try:
        named: dict[str, Any] = {}  # the named types of the schemas it references
        for text in writer.references:
            fastavro.parse_schema(json.loads(text), named_schemas=named)
        writer_schema = json.loads(writer.text)
        same = not named and to_parsing_canonical_form(
            writer_schema
        ) == to_parsing_canonical_form(reader_schema)
        writer_parsed = fastavro.parse_schema(writer_schema, named_schemas=dict(named))
    except Exception as exc:
        raise mismatch(
            name, ref, f"not an Avro schema ({type(exc).__name__})"
        ) from None
    own = inner.decode_unchecked
    if same:
        return lambda data, pos: own(data[pos:])
    optional = optional_fields(inner.shape, NAMESPACE)  # type: ignore[attr-defined]
    try:
        reader = resolution_reader(reader_schema, writer_schema, optional, named)
        reader_parsed = fastavro.parse_schema(reader)
    except Unresolvable as exc:
        raise mismatch(name, ref, f"does not resolve: {exc}") from None
    except Exception as exc:  # a writer's schema fastavro cannot meet ours with
        raise mismatch(
            name, ref, f"does not resolve ({type(exc).__name__}: {str(exc)[:120]})"
        ) from None
    struct = inner.native_type
    dec_hook = inner._hooks.dec_hook  # type: ignore[attr-defined]  # an AvroCodec
    read, convert, bytes_io = fastavro.schemaless_reader, msgspec.convert, io.BytesIO

    def decode(data: bytes, pos: int) -> Any:
        stream = bytes_io(data)
        stream.seek(pos)
        try:
            record = read(stream, writer_parsed, reader_parsed)
        except SchemaResolutionError as exc:
            raise mismatch(name, ref, f"does not resolve: {str(exc)[:120]}") from None
        if stream.tell() != len(data):
            raise MalformedBuffer("trailing bytes after the Avro record")
        return convert(record, struct, str_keys=True, dec_hook=dec_hook)

    return decode


def message_names(text: str) -> dict[tuple[int, ...], tuple[str, ...]]:
    """Each message's index path in a registered .proto (text or base64 descriptor)
    mapped to its name path, e.g. ``{(0,): ("Payload",), (1, 0): ("Order", "Line")}``."""
    try:
        raw = base64.b64decode(text, validate=True)
        file = descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, ValueError, ProtobufDecodeError):
        return _names_from_text(text)
    found: dict[tuple[int, ...], tuple[str, ...]] = {}

    def walk(messages: Any, names: tuple[str, ...], path: tuple[int, ...]) -> None:
        for i, message in enumerate(messages):
            found[(*path, i)] = (*names, message.name)
            walk(message.nested_type, (*names, message.name), (*path, i))

    walk(file.message_type, (), ())
    return found


def registered_file(text: str) -> descriptor_pb2.FileDescriptorProto:
    """A registered Protobuf schema: a base64 `FileDescriptorProto`, else `.proto`
    text (parsed as `--schema FILE.proto` is).

    Raises:
        ConfigError: text the parser refuses (its line says why).
    """
    try:
        raw = base64.b64decode(text, validate=True)
        return descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, ValueError, ProtobufDecodeError):
        return parse_proto(text, "registered.proto")


def _names_from_text(text: str) -> dict[tuple[int, ...], tuple[str, ...]]:
    found: dict[tuple[int, ...], tuple[str, ...]] = {}
    stack: list[tuple[tuple[str, ...], tuple[int, ...], list[int]] | None] = []
    names: tuple[str, ...] = ()
    path: tuple[int, ...] = ()
    counts = [0]
    for match in _MESSAGE.finditer(_COMMENT.sub("", text)):
        if match.group(1):
            stack.append((names, path, counts))
            path = (*path, counts[-1])
            counts[-1] += 1
            names = (*names, match.group(1))
            found[path] = names
            counts = [*counts, 0]
        elif match.group(0) == "{":
            stack.append(None)  # an enum, a oneof, an option: not a message
        elif stack:
            top = stack.pop()
            if top is not None:
                names, path, counts = top
    return found


def protobuf_index_path(message: Any) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """A generated message class's index path in its file, and its name path."""
    descriptor = message.DESCRIPTOR
    chain = []
    while descriptor is not None:
        chain.append(descriptor)
        descriptor = descriptor.containing_type
    chain.reverse()
    path, names = [], []
    siblings = list(chain[0].file.message_types_by_name.values())
    for link in chain:
        path.append([d.full_name for d in siblings].index(link.full_name))
        names.append(link.name)
        siblings = list(link.nested_types)
    return tuple(path), tuple(names)


def protobuf_decoder(
    inner: Codec[Any], writer: RegisteredSchema, ref: int | str
) -> FramedDecoder:
    """Decodes values whose message indexes name the codec's message in ``writer``."""
    name = inner.name
    if writer.schema_type != "PROTOBUF":
        raise mismatch(name, ref, f"a {writer.schema_type} schema, not PROTOBUF")
    registered = message_names(writer.text)
    _, ours = protobuf_index_path(inner.native_type)
    accepted = {path for path, names in registered.items() if names == ours}
    if not accepted:
        raise mismatch(name, ref, f"no message {'.'.join(ours)} in the registered file")
    try:
        file = registered_file(writer.text)
    except ConfigError as exc:
        raise mismatch(name, ref, f"its fields cannot be checked: {exc}") from None
    for path in sorted(accepted):
        why = field_mismatch(file, path, inner.native_type.DESCRIPTOR)
        if why is not None:
            raise mismatch(name, ref, why)
    own = inner.decode_unchecked
    # The indexes as a writer of this message writes them: compared as bytes first
    # (their encoding is prefix-free), parsed only when they differ.
    usual = indexes_bytes(min(accepted))
    skip = len(usual)

    def decode(data: bytes, pos: int) -> Any:
        if data.startswith(usual, pos):
            return own(data[pos + skip :])
        indexes, pos = message_indexes(data, pos, name)
        if indexes not in accepted:
            got = ".".join(registered.get(indexes, ("?",)))
            raise mismatch(name, ref, f"message indexes {list(indexes)} name {got}")
        return own(data[pos:])

    return decode


def json_decoder(
    inner: Codec[Any], writer: RegisteredSchema, ref: int | str
) -> FramedDecoder:
    """Decodes values registered with a JSON Schema with the codec's own decoder."""
    if writer.schema_type != "JSON":
        raise mismatch(inner.name, ref, f"a {writer.schema_type} schema, not JSON")
    own = inner.decode_unchecked
    return lambda data, pos: own(data[pos:])
