"""The codec contract, over the whole registry and every schema."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, get_args

import msgspec
import pytest
from google.protobuf.internal import api_implementation
from hypothesis import HealthCheck, given, settings, strategies as st

from codec import (
    CODEC_NAMES,
    CODECS,
    REAL_CODECS,
    AutoCodec,
    CodecName,
    get_codec,
    native_to_builtins,
)
from codec.base import AVRO, CAPNP, FLATBUFFERS, JSON, MSGPACK, PROTOBUF
from loadgen.payloads import make_payloads
from schemas.errors import DecodeError
from schemas.registry import SCHEMA_NAMES, SchemaName

VECTORS = Path(__file__).parent / "vectors"
WIRE_FILE = {
    JSON: "json",
    MSGPACK: "msgpack",
    PROTOBUF: "pb",
    FLATBUFFERS: "fb",
    CAPNP: "capnp",
    AVRO: "avro",
}


@pytest.fixture(params=REAL_CODECS)
def codec_name(request: pytest.FixtureRequest) -> CodecName:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(params=SCHEMA_NAMES)
def schema(request: pytest.FixtureRequest) -> SchemaName:
    return request.param  # type: ignore[no-any-return]


def expected(schema: SchemaName) -> dict[str, Any]:
    return json.loads((VECTORS / f"{schema}.json").read_bytes())  # type: ignore[no-any-return]


class TestRegistry:
    """The registry holds exactly the keys of the CodecName Literal."""

    def test_keys_match_literal(self) -> None:
        assert set(get_args(CodecName)) == set(CODECS) == set(CODEC_NAMES)

    def test_real_codecs_are_the_six_wire_codecs(self) -> None:
        assert set(REAL_CODECS) == set(CODEC_NAMES) - {"auto"}

    def test_protobuf_runs_on_upb(self) -> None:
        assert api_implementation.Type() == "upb"

    def test_auto_is_built_with_its_json_choice(self) -> None:
        codec = get_codec("auto", "small", auto_json="orjson+pydantic")
        assert isinstance(codec, AutoCodec)
        assert codec.codec_for(b"application/json").name == "orjson+pydantic"
        assert codec.codec_for(None).name == "orjson+pydantic"


class TestRoundTrip:
    """Every codec encodes and decodes every schema's payloads to equal values."""

    def test_round_trip(self, codec_name: CodecName, schema: SchemaName) -> None:
        codec = get_codec(codec_name, schema)
        for payload in make_payloads(schema, 20, seed=3, large_bytes=12_000):
            obj = codec.from_builtins(payload)
            decoded = codec.decode(codec.encode(obj))
            assert type(decoded) is codec.native_type
            assert codec.to_builtins(decoded) == payload

    def test_content_type_names_the_wire(self, codec_name: CodecName) -> None:
        assert get_codec(codec_name, "small").content_type in WIRE_FILE


class TestKnownAnswers:
    """Fixed bytes of each wire format decode to the same known value everywhere."""

    def test_vector_decodes(self, codec_name: CodecName, schema: SchemaName) -> None:
        codec = get_codec(codec_name, schema)
        data = (VECTORS / f"{schema}.{WIRE_FILE[codec.content_type]}").read_bytes()
        assert codec.to_builtins(codec.decode(data)) == expected(schema)

    @pytest.mark.parametrize(
        "name",
        ["msgspec-msgpack", "protobuf", "msgspec-json", "flatbuffers", "capnp", "avro"],
    )
    def test_deterministic_encoders_reproduce_the_bytes(
        self, name: CodecName, schema: SchemaName
    ) -> None:
        codec = get_codec(name, schema)
        data = (VECTORS / f"{schema}.{WIRE_FILE[codec.content_type]}").read_bytes()
        assert codec.encode(codec.from_builtins(expected(schema))) == data

    def test_auto_decodes_each_wire_by_content_type(self, schema: SchemaName) -> None:
        codec = get_codec("auto", schema)
        assert isinstance(codec, AutoCodec)
        for content_type, suffix in WIRE_FILE.items():
            data = (VECTORS / f"{schema}.{suffix}").read_bytes()
            obj = codec.decode_for(content_type.encode(), data)
            assert native_to_builtins(obj) == expected(schema)


class TestForms:
    """The .proto message, the msgspec Struct and the pydantic model agree."""

    def test_same_fields_in_same_order(self, schema: SchemaName) -> None:
        from schemas.registry import SCHEMAS

        bound = SCHEMAS[schema]
        pending: list[tuple[Any, Any, Any]] = [
            (bound.proto.DESCRIPTOR, bound.struct, bound.model)
        ]
        while pending:
            descriptor, struct, model = pending.pop()
            proto_fields = [f.name for f in descriptor.fields]
            assert list(struct.__struct_fields__) == proto_fields, struct
            assert list(model.model_fields) == proto_fields, model
            hints = msgspec.structs.fields(struct)
            for f, hint in zip(descriptor.fields, hints, strict=True):
                annotation = model.model_fields[f.name].annotation
                if f.message_type is None:
                    continue
                inner_struct = hint.type.__args__[0] if f.is_repeated else hint.type
                inner_model: Any = (
                    annotation.__args__[0] if f.is_repeated else annotation
                )
                assert (
                    inner_struct.__name__ == inner_model.__name__ == f.message_type.name
                )
                pending.append((f.message_type, inner_struct, inner_model))

    def test_scalar_kinds_agree(self, schema: SchemaName) -> None:
        """A value of each proto kind survives every codec unchanged (int64, double...)."""
        payload = expected(schema)
        for name in REAL_CODECS:
            codec = get_codec(name, schema)
            assert codec.to_builtins(codec.from_builtins(payload)) == payload, name


POISON: dict[str, bytes] = {
    "garbage": b"\x00\xff\xfe garbage \x81",
    "empty": b"",
    "truncated-json": b'{"id": 1, "name": "x", "tags": [',
    "invalid-utf8": b'{"id": 1, "name": "\xff\xfe", "tags": [], "metrics": []}',
    "nan": b'{"id": 1, "name": "x", "tags": [], "metrics": [NaN]}',
    "wrong-type": b'{"id": "1", "name": "x", "tags": [], "metrics": []}',
    "unknown-field": b'{"id": 1, "name": "x", "tags": [], "metrics": [], "zzz": 1}',
    "deep-json": b"[" * 100_000 + b"]" * 100_000,
    "deep-msgpack": b"\x91" * 100_000 + b"\x90",
    "msgpack-lying-length": b"\xdd\xff\xff\xff\xff",
    "huge-int": b'{"id": ' + b"9" * 5000 + b', "name": "x", "tags": [], "metrics": []}',
    "protobuf-sgroups": b"\x0b" * 100_000,
    "protobuf-truncated": (VECTORS / "small.pb").read_bytes()[:-3],
}


LENIENT: dict[tuple[CodecName, str], str] = {
    # Zero bytes are a valid protobuf message: every field at its default.
    ("protobuf", "empty"): "{'id': 0, 'name': '', 'tags': [], 'metrics': []}",
    # The non-standard NaN token is refused by every JSON codec: the stdlib parser
    # and pydantic's read it, but the models say allow_inf_nan=False
    # (tests/unit/test_json_invalid.py).
}
"""The (codec, poison case) pairs that decode, with the value they decode to."""

REJECTED = [
    (name, case)
    for name in REAL_CODECS
    for case in sorted(POISON)
    if (name, case) not in LENIENT
]


class TestPoison:
    """Poison raises DecodeError, except the few inputs a wire accepts, listed above."""

    @pytest.mark.parametrize(("codec_name", "case"), REJECTED)
    def test_poison_raises_decode_error(self, codec_name: CodecName, case: str) -> None:
        codec = get_codec(codec_name, "small")
        with pytest.raises(DecodeError) as info:
            codec.decode(POISON[case])
        exc = info.value
        assert exc.codec == codec_name
        assert exc.reason == "decode"
        assert len(str(exc)) <= 200
        assert "garbage" not in str(exc) and "\\xff" not in str(exc)

    @pytest.mark.parametrize(("codec_name", "case"), sorted(LENIENT))
    def test_lenient_inputs_decode_to_the_listed_value(
        self, codec_name: CodecName, case: str
    ) -> None:
        codec = get_codec(codec_name, "small")
        obj = codec.decode(POISON[case])
        assert type(obj) is codec.native_type
        assert repr(codec.to_builtins(obj)) == LENIENT[codec_name, case]

    def test_wrong_types_are_rejected_by_every_codec(self) -> None:
        assert {name for name, case in REJECTED if case == "wrong-type"} == set(
            REAL_CODECS
        )

    def test_recursion_error_is_a_decode_error(self) -> None:
        codec = get_codec("msgspec-json", "small")
        with pytest.raises(DecodeError) as info:
            codec.decode(b"[" * (sys.getrecursionlimit() * 4))
        assert (
            "RecursionError" in info.value.cause_type
            or "msgspec" in info.value.cause_type
        )

    def test_pydantic_error_text_has_no_input_values(self) -> None:
        codec = get_codec("json-stdlib+pydantic", "small")
        secret = b'{"id": "S3NT1NEL", "name": 5, "tags": [], "metrics": []}'
        with pytest.raises(DecodeError) as info:
            codec.decode(secret)
        assert "S3NT1NEL" not in str(info.value)
        assert "id: int_type" in str(info.value)

    def test_msgspec_error_text_has_no_input_values(self) -> None:
        # A bad enum value is the one msgspec error that quotes the input.
        from schemas.user.loader import load_schema

        codec = get_codec(
            "msgspec-json", load_schema("tests.fixtures.usermodels.shop:Order")
        )
        with pytest.raises(DecodeError) as info:
            codec.decode(b'{"status": "S3NT1NEL"}')
        assert "S3NT1NEL" not in str(info.value)

    @settings(
        max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    @given(data=st.binary(max_size=512))
    def test_fuzz_only_decode_error(self, data: bytes) -> None:
        for name in REAL_CODECS:
            codec = get_codec(name, "medium")
            try:
                obj = codec.decode(data)
            except DecodeError:
                continue
            assert type(obj) is codec.native_type
