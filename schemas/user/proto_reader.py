"""Read a message of a parsed `.proto` file into a shape (the `.proto` is the source)."""

from __future__ import annotations

import enum
import keyword
from typing import Final

from google.protobuf import descriptor_pb2

from schemas.errors import ConfigError
from schemas.formats import Refusals
from schemas.shape import (
    TIMESTAMP,
    Choice,
    Constraints,
    FieldShape,
    ListOf,
    MapOf,
    MessageShape,
    Scalar,
    TypeShape,
    unique_name,
)

FieldProto = descriptor_pb2.FieldDescriptorProto
_Declared = descriptor_pb2.DescriptorProto | descriptor_pb2.EnumDescriptorProto

_INT_BOUNDS: Final[dict[int, Constraints]] = {
    FieldProto.TYPE_INT64: Constraints(),
    FieldProto.TYPE_SINT64: Constraints(),
    FieldProto.TYPE_SFIXED64: Constraints(),
    FieldProto.TYPE_INT32: Constraints(ge=-(2**31), le=2**31 - 1),
    FieldProto.TYPE_SINT32: Constraints(ge=-(2**31), le=2**31 - 1),
    FieldProto.TYPE_SFIXED32: Constraints(ge=-(2**31), le=2**31 - 1),
    FieldProto.TYPE_UINT32: Constraints(ge=0, le=2**32 - 1),
    FieldProto.TYPE_FIXED32: Constraints(ge=0, le=2**32 - 1),
    FieldProto.TYPE_UINT64: Constraints(ge=0, le=2**64 - 1),
    FieldProto.TYPE_FIXED64: Constraints(ge=0, le=2**64 - 1),
}
"""Each integer type's range: the derived Python forms validate it as protobuf would."""

_OTHER_SCALARS: Final[dict[int, Scalar]] = {
    FieldProto.TYPE_DOUBLE: Scalar("float"),
    FieldProto.TYPE_BOOL: Scalar("bool"),
    FieldProto.TYPE_STRING: Scalar("str"),
    FieldProto.TYPE_BYTES: Scalar("bytes"),
}


def full_message_name(file: descriptor_pb2.FileDescriptorProto, name: str) -> str:
    """The full name (no leading dot) of message `name`, relative to the package.

    Raises:
        ConfigError: when the file declares no such message.
    """
    index = _index(file)
    for candidate in (f"{file.package}.{name}" if file.package else name, name):
        if isinstance(index.get("." + candidate), descriptor_pb2.DescriptorProto):
            return candidate
    known = sorted(k[1:] for k, v in index.items() if _is_message(v))
    raise ConfigError(
        f"schema error: {file.name}: no message {name!r} (messages: {', '.join(known)})"
    )


def read_proto(file: descriptor_pb2.FileDescriptorProto, name: str) -> MessageShape:
    """The shape of message `name` (full, no leading dot) and what it nests.

    Raises:
        ConfigError: naming every field that cannot be mapped, with its path.
    """
    refusals = Refusals()
    reader = _ProtoReader(_index(file), refusals)
    shape = reader.message("." + name, name.rsplit(".", 1)[-1])
    refusals.raise_any()
    return shape


def _is_message(declared: _Declared) -> bool:
    return isinstance(declared, descriptor_pb2.DescriptorProto) and not (
        declared.options.map_entry
    )


def _index(file: descriptor_pb2.FileDescriptorProto) -> dict[str, _Declared]:
    """Every message and enum of `file` by full name with a leading dot."""
    out: dict[str, _Declared] = {}
    prefix = f".{file.package}" if file.package else ""

    def add(msg: descriptor_pb2.DescriptorProto, scope: str) -> None:
        full = f"{scope}.{msg.name}"
        out[full] = msg
        for inner in msg.nested_type:
            add(inner, full)
        for e in msg.enum_type:
            out[f"{full}.{e.name}"] = e

    for msg in file.message_type:
        add(msg, prefix)
    for e in file.enum_type:
        out[f"{prefix}.{e.name}"] = e
    return out


class _ProtoReader:
    """One pass over a message tree; each message and enum is read once."""

    def __init__(self, index: dict[str, _Declared], refusals: Refusals) -> None:
        self._index = index
        self._refusals = refusals
        self._done: dict[str, MessageShape] = {}
        self._enums: dict[str, Choice] = {}
        self._names: set[str] = set()

    def message(self, full: str, path: str) -> MessageShape:
        """Read the message `full` (leading dot), reached at `path`."""
        if full in self._done:
            return self._done[full]
        desc = self._index[full]
        if not isinstance(desc, descriptor_pb2.DescriptorProto):
            self._refusals.add(path, f"{full[1:]} is not a message")
            return MessageShape(full.rsplit(".", 1)[-1])
        name = unique_name(desc.name, self._names)
        # protobuf reads past field numbers it does not know (it keeps them as
        # unknown fields): the derived forms ignore unknown keys likewise.
        shape = MessageShape(name, proto_name=full[1:], forbid_unknown=False)
        self._done[full] = shape  # before its fields: a field may hold the message
        shape.fields = tuple(self._field(f, f"{path}.{f.name}") for f in desc.field)
        return shape

    def _field(self, f: descriptor_pb2.FieldDescriptorProto, path: str) -> FieldShape:
        if f.HasField("oneof_index") and not f.proto3_optional:
            self._refusals.add(
                path, "a oneof (one of several fields) has no pydantic or msgspec form"
            )
        if keyword.iskeyword(f.name) or f.name.startswith("_"):
            self._refusals.add(path, "the name is not a Python field name")
        if f.label != FieldProto.LABEL_REPEATED:
            if f.proto3_optional:
                return FieldShape(f.name, self._value(f, path), True, default=None)
            return FieldShape(f.name, self._value(f, path))
        entry = self._index.get(f.type_name)
        if (
            isinstance(entry, descriptor_pb2.DescriptorProto)
            and entry.options.map_entry
        ):
            key_field, value_field = entry.field
            key = self._value(key_field, f"{path}{{key}}")
            if not (isinstance(key, Scalar) and key.kind in ("str", "int")):
                key = self._refusals.add(
                    f"{path}{{key}}", "map keys must be str or int"
                )
            value = self._value(value_field, f"{path}{{}}")
            return FieldShape(f.name, MapOf(key, value), default_factory=dict)
        return FieldShape(
            f.name, ListOf(self._value(f, f"{path}[]")), default_factory=list
        )

    def _value(self, f: descriptor_pb2.FieldDescriptorProto, path: str) -> TypeShape:
        if f.type == FieldProto.TYPE_MESSAGE:
            if f.type_name == TIMESTAMP:
                return Scalar("datetime", Constraints(tz=True))
            return self.message(f.type_name, path)
        if f.type == FieldProto.TYPE_ENUM:
            return self._enum(f.type_name)
        if f.type in _INT_BOUNDS:
            return Scalar("int", _INT_BOUNDS[f.type])
        if f.type in _OTHER_SCALARS:
            return _OTHER_SCALARS[f.type]
        if f.type == FieldProto.TYPE_FLOAT:
            return self._refusals.add(
                path,
                "float (32-bit) rounds values that JSON and msgpack keep at 64 bits; "
                "declared double it is exact, but its wire type changes and protobuf "
                "then reads the messages already written as 0.0 there",
            )
        return self._refusals.add(path, "this field type is not mapped")

    def _enum(self, full: str) -> Choice:
        if full not in self._enums:
            desc = self._index[full]
            members = [(v.name, v.number) for v in getattr(desc, "value", ())]
            cls = enum.IntEnum(desc.name, members)  # type: ignore[misc]
            numbers = tuple(dict.fromkeys(number for _, number in members))
            self._enums[full] = Choice(numbers, cls, generated=True)
        return self._enums[full]
