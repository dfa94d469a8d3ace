"""A `FileDescriptorProto` as `.proto` text (the parser reads it back to the same file)."""

from __future__ import annotations

from typing import Final

from google.protobuf import descriptor_pb2

FieldProto = descriptor_pb2.FieldDescriptorProto

_SCALAR_NAMES: Final[dict[int, str]] = {
    FieldProto.TYPE_DOUBLE: "double",
    FieldProto.TYPE_FLOAT: "float",
    FieldProto.TYPE_INT64: "int64",
    FieldProto.TYPE_UINT64: "uint64",
    FieldProto.TYPE_INT32: "int32",
    FieldProto.TYPE_FIXED64: "fixed64",
    FieldProto.TYPE_FIXED32: "fixed32",
    FieldProto.TYPE_BOOL: "bool",
    FieldProto.TYPE_STRING: "string",
    FieldProto.TYPE_BYTES: "bytes",
    FieldProto.TYPE_UINT32: "uint32",
    FieldProto.TYPE_SFIXED32: "sfixed32",
    FieldProto.TYPE_SFIXED64: "sfixed64",
    FieldProto.TYPE_SINT32: "sint32",
    FieldProto.TYPE_SINT64: "sint64",
}


def proto_source(file: descriptor_pb2.FileDescriptorProto, comment: str = "") -> str:
    """The `.proto` text of `file`, led by `comment` lines (`// ...`)."""
    lines = [f"// {line}" if line else "//" for line in comment.splitlines()]
    lines += [f'syntax = "{file.syntax or "proto3"}";', ""]
    if file.package:
        lines += [f"package {file.package};", ""]
    if file.dependency:
        lines += [*(f'import "{d}";' for d in file.dependency), ""]
    blocks = [_enum(e, "") for e in file.enum_type]
    blocks += [_message(m, file, "") for m in file.message_type]
    return "\n".join(lines) + "\n" + "\n\n".join(blocks) + "\n"


def field_declaration(
    field: descriptor_pb2.FieldDescriptorProto,
    msg: descriptor_pb2.DescriptorProto,
    file: descriptor_pb2.FileDescriptorProto,
) -> str:
    """One field as declared in `.proto` text, without the trailing `;`."""
    entry = _map_entry(field, msg)
    if entry is not None:
        key, value = entry.field
        kind = f"map<{_type(key, file)}, {_type(value, file)}>"
    elif field.label == FieldProto.LABEL_REPEATED:
        kind = f"repeated {_type(field, file)}"
    elif field.proto3_optional:
        kind = f"optional {_type(field, file)}"
    else:
        kind = _type(field, file)
    text = f"{kind} {field.name} = {field.number}"
    if field.HasField("json_name"):
        text += f' [json_name = "{field.json_name}"]'
    return text


def find_message(
    file: descriptor_pb2.FileDescriptorProto, full_name: str
) -> descriptor_pb2.DescriptorProto:
    """The message `full_name` (no leading dot) of `file`, nested ones included."""
    prefix = f"{file.package}." if file.package else ""
    parts = full_name.removeprefix(prefix).split(".")
    found = next(m for m in file.message_type if m.name == parts[0])
    for part in parts[1:]:
        found = next(m for m in found.nested_type if m.name == part)
    return found


def _message(
    msg: descriptor_pb2.DescriptorProto,
    file: descriptor_pb2.FileDescriptorProto,
    indent: str,
) -> str:
    inner = indent + "  "
    lines = [f"{indent}message {msg.name} {{"]
    lines += [
        _message(nested, file, inner)
        for nested in msg.nested_type
        if not nested.options.map_entry
    ]
    lines += [_enum(e, inner) for e in msg.enum_type]
    emitted: set[int] = set()
    for field in msg.field:
        if not field.HasField("oneof_index") or field.proto3_optional:
            lines.append(f"{inner}{field_declaration(field, msg, file)};")
        elif field.oneof_index not in emitted:
            # A oneof's fields are written together, where its first field stands.
            index = field.oneof_index
            emitted.add(index)
            members = [
                f"{inner}  {field_declaration(f, msg, file)};"
                for f in msg.field
                if f.HasField("oneof_index")
                and f.oneof_index == index
                and not f.proto3_optional
            ]
            name = msg.oneof_decl[index].name
            lines += [f"{inner}oneof {name} {{", *members, f"{inner}}}"]
    lines.append(f"{indent}}}")
    return "\n".join(lines)


def _enum(enum: descriptor_pb2.EnumDescriptorProto, indent: str) -> str:
    values = [f"{indent}  {v.name} = {v.number};" for v in enum.value]
    return "\n".join([f"{indent}enum {enum.name} {{", *values, f"{indent}}}"])


def _map_entry(
    field: descriptor_pb2.FieldDescriptorProto, msg: descriptor_pb2.DescriptorProto
) -> descriptor_pb2.DescriptorProto | None:
    if field.label != FieldProto.LABEL_REPEATED or not field.type_name:
        return None
    name = field.type_name.rsplit(".", 1)[-1]
    for nested in msg.nested_type:
        if nested.name == name and nested.options.map_entry:
            return nested
    return None


def _type(
    field: descriptor_pb2.FieldDescriptorProto, file: descriptor_pb2.FileDescriptorProto
) -> str:
    if field.type in _SCALAR_NAMES:
        return _SCALAR_NAMES[field.type]
    prefix = f".{file.package}." if file.package else "."
    # Relative to the package: `Shipment.Leg` resolves the same from anywhere in it.
    return field.type_name.removeprefix(prefix).lstrip(".")
