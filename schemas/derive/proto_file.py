"""Derive a protobuf file from a shape, and build message classes from any file.

The classes are built at run time in a private descriptor pool per schema (no two
users' files can collide on a name), with `message_factory.GetMessageClass`: the
same upb classes `protoc` output would give, without protoc.
"""

from __future__ import annotations

from typing import Final

from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    message_factory,
    timestamp_pb2,
)
from google.protobuf.message import Message

from schemas.errors import ConfigError
from schemas.prototext.parser import TIMESTAMP_FILE, map_entry_name
from schemas.shape import (
    TIMESTAMP,
    Choice,
    FieldShape,
    ListOf,
    MapOf,
    MessageShape,
    Scalar,
    TypeShape,
    UnionOf,
    messages,
    parts,
    unique_name,
)
from schemas.unions import UNION_ONEOF, member_names

FieldProto = descriptor_pb2.FieldDescriptorProto

_TYPES: Final[dict[str, FieldProto.Type.ValueType]] = {
    "string": FieldProto.TYPE_STRING,
    "int64": FieldProto.TYPE_INT64,
    "int32": FieldProto.TYPE_INT32,
    "uint32": FieldProto.TYPE_UINT32,
    "uint64": FieldProto.TYPE_UINT64,
    "double": FieldProto.TYPE_DOUBLE,
    "bool": FieldProto.TYPE_BOOL,
    "bytes": FieldProto.TYPE_BYTES,
}


_CARRIED: Final = frozenset(
    {"str", "int", "float", "bool", "bytes", "datetime", "uuid", "decimal"}
)
"""The scalar kinds protobuf has a type for (the others: `schemas.formats`)."""


def build_file(
    root: MessageShape, package: str, filename: str
) -> descriptor_pb2.FileDescriptorProto:
    """A proto3 file with one top-level message per message shape.

    Field numbers follow declaration order from 1; a nullable field is `optional`
    (explicit presence), so None and a zero value stay distinct on the wire. Field
    names are the attribute names (identifiers); an alias is kept as `json_name`.
    UUIDs and Decimals are strings (their canonical and exact text). A part
    protobuf has no type for (a date, a set, a union: `schemas.formats`) is a
    `string` placeholder here, and the protobuf codec is refused for that schema.

    A union the format carries (`schemas.unions`) is a wrapper message
    `<Message><Field>Union` holding `oneof member` of one field per member, and
    the field (or list item, or map value) holds the wrapper: the oneof case says
    which member was sent; a message member keeps its tag field.
    """
    file = descriptor_pb2.FileDescriptorProto(
        name=filename, package=package, syntax="proto3"
    )
    all_messages = messages(root)
    wrappers = _wrappers(all_messages, file, package)
    for msg in all_messages:
        desc = file.message_type.add(name=msg.name)
        for number, f in enumerate(msg.fields, 1):
            _add_field(desc, f, number, package, wrappers)
        for field in desc.field:
            if field.proto3_optional:
                field.oneof_index = len(desc.oneof_decl)
                desc.oneof_decl.add(name="_" + field.name)
        msg.proto_name = f"{package}.{msg.name}"
    if any(f.type_name == TIMESTAMP for f in _all_fields(file)):
        file.dependency.append(TIMESTAMP_FILE)
    return file


def _wrappers(
    all_messages: list[MessageShape],
    file: descriptor_pb2.FileDescriptorProto,
    package: str,
) -> dict[int, str]:
    """A wrapper message per union in a field, list or map (union id -> full name)."""
    taken = {m.name for m in all_messages}
    out: dict[int, str] = {}
    for msg in all_messages:
        for f in msg.fields:
            pending: list[TypeShape] = [f.type]
            while pending:
                shape = pending.pop()
                if isinstance(shape, MessageShape):
                    continue
                pending.extend(parts(shape))
                if not isinstance(shape, UnionOf) or id(shape) in out:
                    continue
                camel = "".join(p.title() for p in f.name.split("_"))
                name = unique_name(f"{msg.name}{camel}Union", taken)
                desc = file.message_type.add(name=name)
                desc.oneof_decl.add(name=UNION_ONEOF)
                for number, (member, fname) in enumerate(
                    zip(shape.members, member_names(shape), strict=True), 1
                ):
                    field = desc.field.add(
                        name=fname, number=number, label=FieldProto.LABEL_OPTIONAL
                    )
                    field.oneof_index = 0
                    _set_type(field, member, package, out)
                out[id(shape)] = f".{package}.{name}"
    return out


def message_class(
    file: descriptor_pb2.FileDescriptorProto, full_name: str
) -> type[Message]:
    """The class of message `full_name` (no leading dot) in `file`.

    Raises:
        ConfigError: when the descriptor pool rejects the file (its message).
    """
    pool = descriptor_pool.DescriptorPool()
    if TIMESTAMP_FILE in file.dependency:
        pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    try:
        pool.AddSerializedFile(file.SerializeToString())
        descriptor = pool.FindMessageTypeByName(full_name)
    except (TypeError, KeyError) as exc:
        raise ConfigError(f"schema error: {file.name}: {exc}") from None
    return message_factory.GetMessageClass(descriptor)


_NO_KEY: Final = frozenset(
    {
        FieldProto.TYPE_MESSAGE,
        FieldProto.TYPE_DOUBLE,
        FieldProto.TYPE_FLOAT,
        FieldProto.TYPE_BYTES,
        FieldProto.TYPE_ENUM,
    }
)
"""Field types protobuf refuses as a map key."""


def _add_field(
    desc: descriptor_pb2.DescriptorProto,
    f: FieldShape,
    number: int,
    package: str,
    wrappers: dict[int, str],
) -> None:
    field = desc.field.add(name=f.name, number=number, label=FieldProto.LABEL_OPTIONAL)
    if f.alias:
        field.json_name = f.alias
    shape = f.type
    if f.nullable and not isinstance(shape, ListOf | MapOf):
        field.proto3_optional = True
    if isinstance(shape, MapOf):
        entry = desc.nested_type.add(name=map_entry_name(f.name))
        entry.options.map_entry = True
        for n, (name, part) in enumerate(
            (("key", shape.key), ("value", shape.value)), 1
        ):
            inner = entry.field.add(
                name=name, number=n, label=FieldProto.LABEL_OPTIONAL
            )
            _set_type(inner, part, package, wrappers)
            if name == "key" and inner.type in _NO_KEY:
                # Not a protobuf map key (a datetime, a float...): a placeholder in
                # a form the codec is refused for (`schemas.formats`), so that the
                # file builds and the other codecs run.
                inner.type = FieldProto.TYPE_STRING
                inner.ClearField("type_name")
        field.label = FieldProto.LABEL_REPEATED
        field.type = FieldProto.TYPE_MESSAGE
        field.type_name = f".{package}.{desc.name}.{entry.name}"
        return
    if isinstance(shape, ListOf):
        field.label = FieldProto.LABEL_REPEATED
        shape = shape.item
    _set_type(field, shape, package, wrappers)


def _set_type(
    field: descriptor_pb2.FieldDescriptorProto,
    shape: TypeShape,
    package: str,
    wrappers: dict[int, str],
) -> None:
    if isinstance(shape, MessageShape):
        field.type = FieldProto.TYPE_MESSAGE
        field.type_name = f".{package}.{shape.name}"
    elif isinstance(shape, UnionOf) and id(shape) in wrappers:
        field.type = FieldProto.TYPE_MESSAGE
        field.type_name = wrappers[id(shape)]
    elif isinstance(shape, Scalar | Choice) and shape.proto == TIMESTAMP:
        field.type = FieldProto.TYPE_MESSAGE
        field.type_name = TIMESTAMP
    elif isinstance(shape, Choice) or (
        isinstance(shape, Scalar) and shape.kind in _CARRIED
    ):
        field.type = _TYPES[shape.proto]
    else:  # no protobuf type: a placeholder in a form the codec is refused for
        field.type = FieldProto.TYPE_STRING


def _all_fields(
    file: descriptor_pb2.FileDescriptorProto,
) -> list[descriptor_pb2.FieldDescriptorProto]:
    out: list[descriptor_pb2.FieldDescriptorProto] = []
    pending = list(file.message_type)
    while pending:
        msg = pending.pop()
        out.extend(msg.field)
        pending.extend(msg.nested_type)
    return out
