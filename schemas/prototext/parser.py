"""A proto3 `.proto` parser that needs no protoc: text to a `FileDescriptorProto`.

protoc comes with grpcio-tools, a development dependency only, and no runtime package
here parses `.proto` text, so the worker reads a user's `.proto` with this parser.
It covers what messages use: `syntax`, `package`, the Timestamp import, options
(read and ignored, but `json_name`), messages and enums (nested too), `repeated`,
`optional`, `map<K, V>`, `oneof` (kept; the shape reader refuses it), `reserved`;
`service` blocks are skipped. proto2, editions, `extend` and groups are refused.
The descriptor pool validates the rest (numbers, duplicate names) when it is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from google.protobuf import descriptor_pb2

from schemas.errors import ConfigError
from schemas.prototext.lexer import TokenCursor

FieldProto = descriptor_pb2.FieldDescriptorProto

TIMESTAMP_FILE: Final = "google/protobuf/timestamp.proto"

_SCALARS: Final[dict[str, FieldProto.Type.ValueType]] = {
    "double": FieldProto.TYPE_DOUBLE,
    "float": FieldProto.TYPE_FLOAT,
    "int64": FieldProto.TYPE_INT64,
    "uint64": FieldProto.TYPE_UINT64,
    "int32": FieldProto.TYPE_INT32,
    "fixed64": FieldProto.TYPE_FIXED64,
    "fixed32": FieldProto.TYPE_FIXED32,
    "bool": FieldProto.TYPE_BOOL,
    "string": FieldProto.TYPE_STRING,
    "bytes": FieldProto.TYPE_BYTES,
    "uint32": FieldProto.TYPE_UINT32,
    "sfixed32": FieldProto.TYPE_SFIXED32,
    "sfixed64": FieldProto.TYPE_SFIXED64,
    "sint32": FieldProto.TYPE_SINT32,
    "sint64": FieldProto.TYPE_SINT64,
}
"""Scalar type keywords (the public descriptor enum, by name)."""


@dataclass(slots=True)
class _Pending:
    """A field whose type name is resolved once every message is known."""

    field: descriptor_pb2.FieldDescriptorProto
    scope: str
    name: str


def parse_proto(text: str, filename: str) -> descriptor_pb2.FileDescriptorProto:
    """Parse proto3 `text` into a file descriptor named `filename`.

    Raises:
        ConfigError: "schema error: FILE:LINE: what was expected".
    """
    return _Parser(text, filename).parse()


def map_entry_name(field_name: str) -> str:
    """protoc's name of a map field's entry message: `attrs_by_id` -> `AttrsByIdEntry`."""
    return "".join(p[:1].upper() + p[1:] for p in field_name.split("_")) + "Entry"


class _Parser(TokenCursor):
    """Recursive descent over the token list; one instance per file."""

    def __init__(self, text: str, filename: str) -> None:
        super().__init__(text, filename)
        self._file = descriptor_pb2.FileDescriptorProto(name=filename)
        self._declared: dict[str, str] = {}
        self._pending: list[_Pending] = []

    def parse(self) -> descriptor_pb2.FileDescriptorProto:
        self._syntax()
        while not self._at_end():
            self._top_level()
        self._resolve()
        return self._file

    # --- file level -------------------------------------------------------------

    def _syntax(self) -> None:
        if self._peek() == "edition":
            self._fail('editions are not supported: use syntax = "proto3"')
        if self._peek() != "syntax":
            self._fail('expected syntax = "proto3" (proto2 is not supported)')
        self._next()
        self._expect("=")
        if self._string() != "proto3":
            self._fail('only syntax = "proto3" is supported')
        self._expect(";")
        self._file.syntax = "proto3"

    def _top_level(self) -> None:
        keyword = self._peek()
        if keyword == "package":
            self._next()
            self._file.package = self._name()
            self._expect(";")
        elif keyword == "import":
            self._import()
        elif keyword == "option":
            self._option()
        elif keyword == "message":
            self._message(self._file.message_type.add(), self._file.package)
        elif keyword == "enum":
            self._enum(self._file.enum_type.add(), self._file.package)
        elif keyword == "service":
            self._next()
            self._name()
            self._skip_block()
        elif keyword == ";":
            self._next()
        else:
            self._fail(f"unexpected {keyword!r} (extend is not supported)")

    def _import(self) -> None:
        self._next()
        if self._peek() in ("public", "weak"):
            self._next()
        path = self._string()
        self._expect(";")
        if path != TIMESTAMP_FILE:
            self._fail(f"import {path!r}: only {TIMESTAMP_FILE!r} is supported")
        self._file.dependency.append(path)
        self._declared[".google.protobuf.Timestamp"] = "message"

    def _option(self) -> None:
        self._next()
        self._option_assignment()
        self._expect(";")

    def _option_assignment(self) -> tuple[str, str]:
        """`name = value` (a parenthesised custom option name is allowed)."""
        parts = []
        while self._peek() != "=":
            parts.append(self._next().text)
        self._expect("=")
        if self._peek() == "{":
            self._skip_block()
            return "".join(parts), ""
        sign = self._next().text if self._peek() in ("-", "+") else ""
        token = self._next()
        value = token.text[1:-1] if token.kind == "string" else sign + token.text
        return "".join(parts), value

    # --- messages and enums -----------------------------------------------------

    def _message(self, msg: descriptor_pb2.DescriptorProto, scope: str) -> None:
        self._next()
        msg.name = self._name()
        full = f"{scope}.{msg.name}" if scope else msg.name
        self._declared["." + full] = "message"
        self._expect("{")
        while self._peek() != "}":
            self._message_item(msg, full)
        self._next()
        for f in msg.field:
            if f.proto3_optional:
                f.oneof_index = len(msg.oneof_decl)
                msg.oneof_decl.add(name="_" + f.name)

    def _message_item(self, msg: descriptor_pb2.DescriptorProto, full: str) -> None:
        keyword = self._peek()
        if keyword == "message":
            self._message(msg.nested_type.add(), full)
        elif keyword == "enum":
            self._enum(msg.enum_type.add(), full)
        elif keyword == "option":
            self._option()
        elif keyword in ("reserved", "extensions"):
            while self._next().text != ";":
                pass
        elif keyword == ";":
            self._next()
        elif keyword == "oneof":
            self._next()
            index = len(msg.oneof_decl)
            msg.oneof_decl.add(name=self._name())
            self._expect("{")
            while self._peek() != "}":
                if self._peek() == "option":
                    self._option()
                else:
                    self._field(msg, full).oneof_index = index
            self._next()
        elif keyword == "map":
            self._map(msg, full)
        elif keyword in ("extend", "group", "required"):
            self._fail(f"{keyword!r} is not proto3")
        else:
            self._field(msg, full)

    def _field(
        self, msg: descriptor_pb2.DescriptorProto, scope: str
    ) -> descriptor_pb2.FieldDescriptorProto:
        field = msg.field.add(label=FieldProto.LABEL_OPTIONAL)
        if self._peek() == "repeated":
            self._next()
            field.label = FieldProto.LABEL_REPEATED
        elif self._peek() == "optional":
            self._next()
            field.proto3_optional = True
        self._set_type(field, self._name(), scope)
        self._field_tail(field)
        return field

    def _map(self, msg: descriptor_pb2.DescriptorProto, scope: str) -> None:
        self._next()
        self._expect("<")
        key = self._name()
        self._expect(",")
        value = self._name()
        self._expect(">")
        field = msg.field.add(label=FieldProto.LABEL_REPEATED)
        entry = msg.nested_type.add()
        self._field_tail(field)
        entry.name = map_entry_name(field.name)
        entry.options.map_entry = True
        if key not in _SCALARS or key in ("double", "float", "bytes"):
            self._fail(f"map<{key}, ...>: keys must be an integer, bool or string type")
        for number, (name, type_name) in enumerate((("key", key), ("value", value)), 1):
            part = entry.field.add(name=name, number=number)
            part.label = FieldProto.LABEL_OPTIONAL
            self._set_type(part, type_name, scope)
        field.type = FieldProto.TYPE_MESSAGE
        field.type_name = f".{scope}.{entry.name}"

    def _set_type(
        self, field: descriptor_pb2.FieldDescriptorProto, name: str, scope: str
    ) -> None:
        if name in _SCALARS:
            field.type = _SCALARS[name]
        else:
            self._pending.append(_Pending(field, scope, name))

    def _field_tail(self, field: descriptor_pb2.FieldDescriptorProto) -> None:
        """`name = NUMBER [options];`"""
        field.name = self._name()
        self._expect("=")
        field.number = self._int()
        if self._peek() == "[":
            self._next()
            while True:
                key, value = self._option_assignment()
                if key == "json_name":
                    field.json_name = value
                if self._peek() != ",":
                    break
                self._next()
            self._expect("]")
        self._expect(";")

    def _enum(self, enum: descriptor_pb2.EnumDescriptorProto, scope: str) -> None:
        self._next()
        enum.name = self._name()
        self._declared[f".{scope}.{enum.name}" if scope else "." + enum.name] = "enum"
        self._expect("{")
        while self._peek() != "}":
            if self._peek() == "option":
                self._option()
            elif self._peek() == "reserved":
                while self._next().text != ";":
                    pass
            elif self._peek() == ";":
                self._next()
            else:
                value = enum.value.add(name=self._name())
                self._expect("=")
                value.number = self._int()
                if self._peek() == "[":
                    while self._next().text != "]":
                        pass
                self._expect(";")
        self._next()

    # --- names ------------------------------------------------------------------

    def _resolve(self) -> None:
        """Resolve each type name from the innermost scope outwards (protobuf's rule)."""
        for p in self._pending:
            full = self._lookup(p.name, p.scope)
            if full is None:
                raise ConfigError(
                    f"schema error: {self._filename}: unknown type {p.name!r} "
                    f"(in {p.scope or 'the file'})"
                )
            p.field.type_name = full
            kind = self._declared[full]
            p.field.type = (
                FieldProto.TYPE_MESSAGE if kind == "message" else FieldProto.TYPE_ENUM
            )

    def _lookup(self, name: str, scope: str) -> str | None:
        if name.startswith("."):
            return name if name in self._declared else None
        parts = scope.split(".") if scope else []
        for end in range(len(parts), -1, -1):
            candidate = "." + ".".join([*parts[:end], name])
            if candidate in self._declared:
                return candidate
        return None
