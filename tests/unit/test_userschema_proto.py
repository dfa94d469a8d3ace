"""The protoc-free `.proto` parser: what it reads, and where it stops with a line."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from schemas.derive.proto_file import message_class
from schemas.errors import ConfigError
from schemas.prototext.parser import parse_proto

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "usermodels"
FieldProto = descriptor_pb2.FieldDescriptorProto


def parse(body: str) -> descriptor_pb2.FileDescriptorProto:
    return parse_proto(f'syntax = "proto3";\npackage p;\n{body}', "t.proto")


def error(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_proto(text, "t.proto")
    return str(info.value)


@pytest.fixture(scope="module")
def shipment() -> descriptor_pb2.FileDescriptorProto:
    text = (FIXTURES / "shipment.proto").read_text()
    return parse_proto(text, "shipment.proto")


class TestParse:
    """A proto3 file becomes the descriptor protoc would write for it."""

    def test_file_level(self, shipment: descriptor_pb2.FileDescriptorProto) -> None:
        assert shipment.syntax == "proto3"
        assert shipment.package == "logistics.v1"
        assert list(shipment.dependency) == ["google/protobuf/timestamp.proto"]
        assert [m.name for m in shipment.message_type] == ["Dimensions", "Shipment"]

    def test_nested_types_and_enums(
        self, shipment: descriptor_pb2.FileDescriptorProto
    ) -> None:
        msg = shipment.message_type[1]
        assert [n.name for n in msg.nested_type] == [
            "Leg",
            "CountersEntry",
            "LegsByIdEntry",
        ]
        assert [v.name for v in msg.enum_type[0].value][1:] == [
            "IN_TRANSIT",
            "DELIVERED",
        ]
        fields = {f.name: f for f in msg.field}
        assert fields["status"].type_name == ".logistics.v1.Shipment.Status"
        assert fields["status"].type == FieldProto.TYPE_ENUM
        assert fields["legs"].type_name == ".logistics.v1.Shipment.Leg"
        assert fields["dims"].type_name == ".logistics.v1.Dimensions"
        assert fields["shipped_at"].type_name == ".google.protobuf.Timestamp"

    def test_maps_optional_and_options(
        self, shipment: descriptor_pb2.FileDescriptorProto
    ) -> None:
        msg = shipment.message_type[1]
        fields = {f.name: f for f in msg.field}
        entry = msg.nested_type[1]
        assert entry.options.map_entry
        assert [f.name for f in entry.field] == ["key", "value"]
        assert fields["counters"].label == FieldProto.LABEL_REPEATED
        assert fields["note"].proto3_optional
        assert msg.oneof_decl[fields["note"].oneof_index].name == "_note"
        assert fields["pieces"].json_name == "pieceCount"
        assert fields["balance"].type == FieldProto.TYPE_SINT64

    def test_the_pool_accepts_it(
        self, shipment: descriptor_pb2.FileDescriptorProto
    ) -> None:
        cls = message_class(shipment, "logistics.v1.Shipment")
        msg = cls(id="x", note="")
        assert cls.FromString(msg.SerializeToString()).HasField("note")

    def test_comments_hex_and_negative_numbers(self) -> None:
        file = parse(
            "// a line comment\n/* a block\ncomment */\n"
            "enum E { option allow_alias = true; Z = 0; N = -1; H = 0x10; }\n"
            'message M { int32 a = 1 [deprecated = true, json_name = "A"]; }\n'
        )
        assert [v.number for v in file.enum_type[0].value] == [0, -1, 16]
        assert file.message_type[0].field[0].json_name == "A"

    def test_scopes_resolve_innermost_first(self) -> None:
        file = parse(
            "message Leg { string a = 1; }\n"
            "message Outer { message Leg { int64 b = 1; } Leg leg = 1; .p.Leg top = 2; }"
        )
        outer = file.message_type[1]
        assert outer.field[0].type_name == ".p.Outer.Leg"
        assert outer.field[1].type_name == ".p.Leg"


class TestErrors:
    """Unsupported or broken input stops with the file, the line and what was expected."""

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("", "t.proto:1: expected syntax"),
            ('syntax = "proto2";', "t.proto:1: only syntax"),
            ('edition = "2023";', "editions are not supported"),
            (
                'syntax = "proto3";\nmessage M {\n  int32 a = ;\n}',
                "t.proto:3: expected an integer",
            ),
            (
                'syntax = "proto3";\nmessage M { Missing m = 1; }',
                "unknown type 'Missing'",
            ),
            (
                'syntax = "proto3";\nimport "other.proto";',
                "only 'google/protobuf/timestamp.proto'",
            ),
            ('syntax = "proto3";\nmessage M {\n', "unexpected end of file"),
            (
                'syntax = "proto3";\nmessage M { required int32 a = 1; }',
                "'required' is not proto3",
            ),
            (
                'syntax = "proto3";\nextend Foo { int32 a = 1; }',
                "extend is not supported",
            ),
            (
                'syntax = "proto3";\nmessage M { map<double, int32> m = 1; }',
                "keys must be",
            ),
            ('syntax = "proto3";\nmessage M { int32 a = 1; } $', "unexpected '$'"),
        ],
    )
    def test_error(self, text: str, expected: str) -> None:
        message = error(text)
        assert message.startswith("schema error: t.proto")
        assert expected in message

    def test_the_pool_rejects_duplicate_numbers(self) -> None:
        file = parse("message M { int32 a = 1; int32 b = 1; }")
        with pytest.raises(ConfigError, match=r"schema error: t\.proto"):
            message_class(file, "p.M")


def _comparable(
    file: descriptor_pb2.FileDescriptorProto,
) -> descriptor_pb2.FileDescriptorProto:
    """What the parser promises to match: options, services, reserved ranges and
    json_name (which protoc fills in for every field) are left out."""
    out = descriptor_pb2.FileDescriptorProto.FromString(file.SerializeToString())
    out.ClearField("options")
    out.ClearField("service")
    pending = list(out.message_type)
    while pending:
        msg = pending.pop()
        msg.ClearField("reserved_range")
        msg.ClearField("reserved_name")
        for f in msg.field:
            f.ClearField("json_name")
        pending.extend(msg.nested_type)
    return out


class TestAgainstProtoc:
    """Where the development tools have protoc, the parser's descriptor equals its."""

    def test_same_descriptor_as_protoc(self, tmp_path: Path) -> None:
        protoc = pytest.importorskip("grpc_tools.protoc")
        include = Path(protoc.__file__).parent / "_proto"
        out = tmp_path / "set.pb"
        argv = [
            "protoc",
            f"-I{include}",
            f"-I{FIXTURES}",
            f"--descriptor_set_out={out}",
        ]
        assert protoc.main([*argv, "shipment.proto"]) == 0
        theirs = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
        mine = parse_proto((FIXTURES / "shipment.proto").read_text(), "shipment.proto")
        assert _comparable(mine) == _comparable(theirs)
