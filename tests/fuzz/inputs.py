"""What the codecs are fuzzed with: profiles, valid seed payloads, hostile structures.

Mutating valid payloads reaches far deeper into a decoder than random bytes do (a
random input is rejected at its first byte), so both runners start from the
project's own payload generators. A profile is a schema: the built-in `small`,
`medium` and `large`, and `events`, a user's msgspec Struct (tests/fixtures) whose
int enum, timestamp, bytes, map, optional and bounded fields take decode paths the
built-in schemas never do (datetime parsing, base64, protobuf Timestamp).

The hostile inputs are RELIABILITY.md's (P2 "hostile structures", section 4.2):
deep nesting (100k-deep JSON and MessagePack arrays, protobuf groups and nested
messages), lying lengths, a 4301-digit integer, long escape runs, invalid UTF-8,
NaN. Each wire's are tried on every codec: to a JSON codec a MessagePack bomb is
garbage, which is a case too.
"""

from __future__ import annotations

import functools
import struct
from typing import Any, Final, NamedTuple

from codec import CODEC_NAMES, Codec, CodecName, get_codec
from codec.base import AVRO, CAPNP, FLATBUFFERS, JSON, MSGPACK, PROTOBUF
from loadgen.payloads import make_payloads as builtin_payloads
from schemas.registry import SCHEMA_NAMES, SCHEMAS, SchemaForms, resolve
from schemas.user.loader import UserSchema
from schemas.user.synthetic import make_payloads as user_payloads
from tests.fuzz.wire_hostile import wire_hostile

USER_SCHEMAS: Final[dict[str, str]] = {
    "events": "tests.fixtures.usermodels.events:Event"
}
"""User-schema profiles: name -> spec (`MODULE:NAME`)."""

PROFILES: Final[tuple[str, ...]] = (*SCHEMA_NAMES, *USER_SCHEMAS)

LARGE_BYTES: Final = 4_000
"""JSON size of a `large` seed: big enough for two vehicles, small enough to mutate."""

AUTO_HEADERS: Final[tuple[bytes | None, ...]] = (
    None,  # no header: the JSON codec
    b"application/json",
    b"application/x-msgpack",
    b"application/vnd.google.protobuf",
    b"application/x-flatbuffers",
    b"application/capnp",
    b"avro/binary",
    b" Application/MsgPack ; charset=binary",  # the slow path: params, case, spaces
    b"text/plain",  # unknown: DecodeError before any decoding
)
"""The `content-type` values the `auto` codec is fuzzed under."""

WIRE_CODECS: Final[dict[str, CodecName]] = {
    JSON: "msgspec-json",
    MSGPACK: "msgspec-msgpack",
    PROTOBUF: "protobuf",
    FLATBUFFERS: "flatbuffers",
    CAPNP: "capnp",
    AVRO: "avro",
}
"""The codec that writes each wire's seeds for `auto`."""


class Sample(NamedTuple):
    """One message: its `content-type` header (only `auto` reads it) and value."""

    content_type: bytes | None
    data: bytes


def schema_forms(profile: str) -> SchemaForms:
    """The schema a profile names (a user's is loaded once per process)."""
    if profile in USER_SCHEMAS:
        return resolve(USER_SCHEMAS[profile])
    return SCHEMAS[profile]  # type: ignore[index]


@functools.cache
def codec(key: CodecName, profile: str) -> Codec[Any]:
    """The codec `key` bound to `profile`'s schema, built once per process."""
    if key not in CODEC_NAMES:
        raise KeyError(key)
    return get_codec(key, schema_forms(profile))


AUTO_LENIENT: Final[dict[str, Any]] = {
    "auto_json": "json-stdlib+pydantic",
    "auto_output": "protobuf",
}
"""A second `auto` set-up: the most lenient JSON decoder (unbounded ints, lone
surrogates), writing the strictest types (int64, valid UTF-8) to its output."""


@functools.cache
def codecs(key: CodecName, profile: str) -> tuple[Codec[Any], ...]:
    """The codecs fuzzed as `key`: `auto` in its default set-up and AUTO_LENIENT."""
    if key != "auto":
        return (codec(key, profile),)
    lenient = get_codec("auto", schema_forms(profile), **AUTO_LENIENT)
    return codec(key, profile), lenient


def payloads(profile: str, count: int, *, seed: int = 0) -> list[dict[str, Any]]:
    """`count` valid payloads of `profile` as builtins, reproducible from `seed`."""
    forms = schema_forms(profile)
    if isinstance(forms, UserSchema):
        return user_payloads(forms.shape, count, seed=seed)
    return builtin_payloads(forms.name, count, seed=seed, large_bytes=LARGE_BYTES)  # type: ignore[arg-type]


def samples(key: CodecName, profile: str, count: int, *, seed: int = 0) -> list[Sample]:
    """Valid messages for codec `key`: `count` payloads in its wire format (`auto`:
    in each of the three wires, with that wire's `content-type`)."""
    writers = list(WIRE_CODECS.values()) if key == "auto" else [key]
    out = []
    for writer_key in writers:
        writer = codec(writer_key, profile)
        header = writer.content_type.encode()
        out += [
            Sample(header, writer.encode(writer.from_builtins(payload)))
            for payload in payloads(profile, count, seed=seed)
        ]
    return out


class Target(NamedTuple):
    """One way a fuzz input is decoded: a codec bound to a profile, under a header."""

    label: str  # profile, and which set-up of `auto`
    codec: Codec[Any]
    content_type: bytes | None


def targets(key: CodecName) -> list[Target]:
    """Every way `key` decodes an input: each profile (`auto`: x set-up x header;
    AUTO_LENIENT only under the JSON and MessagePack headers: a protobuf message
    needs no conversion to its protobuf output)."""
    if key != "auto":
        return [Target(f"{p}#0", codec(key, p), None) for p in PROFILES]
    by_setup = (AUTO_HEADERS, (None, b"application/x-msgpack"))
    return [
        Target(f"{p}#{i}", c, h)
        for p in PROFILES
        for i, c in enumerate(codecs(key, p))
        for h in by_setup[i]
    ]


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _nested_messages(depth: int, field: int = 99) -> bytes:
    """`depth` length-delimited unknown fields, each inside the one before."""
    tag, headers, length = _varint(field << 3 | 2), [], 0
    for _ in range(depth):
        headers.append(tag + _varint(length))
        length += len(headers[-1])
    return b"".join(reversed(headers))


HOSTILE_DEPTHS: Final = (64, 1_000, 100_000)
"""Nesting depths: past every parser's recursion limit (~100 to 1024), and far past."""


def hostile(depth: int) -> dict[str, bytes]:
    """Structures that scale with `depth`: nesting, wide containers, long runs."""
    d = depth
    start, end = _varint(99 << 3 | 3), _varint(99 << 3 | 4)
    return {
        "json-arrays": b"[" * d + b"]" * d,
        "json-objects": b'{"a":' * d + b"1" + b"}" * d,
        "json-unclosed": b"[" * d,
        "json-deep-field": b'{"tags":' + b"[" * d + b"]" * d + b"}",
        "json-wide-array": b"[" + b"0," * d + b"0]",
        "json-duplicate-keys": b"{" + b'"id":1,' * d + b'"id":1}',
        "json-long-int": b"9" * d,
        "json-long-exponent": b"1e" + b"9" * d,
        "json-escapes": b'"' + b"\\u0000" * d + b'"',
        "json-surrogates": b'"' + b"\\ud800" * d + b'"',
        "msgpack-arrays": b"\x91" * d + b"\x90",
        "msgpack-maps": b"\x81\xa1a" * d + b"\xc0",
        "msgpack-deep-field": b"\x81\xa4tags" + b"\x91" * d + b"\x90",
        "msgpack-wide-array": b"\xdd" + struct.pack(">I", d) + b"\xc0" * d,
        "protobuf-groups": start * d + end * d,
        "protobuf-unclosed-groups": b"\x0b" * d,
        "protobuf-nested-unknown": _nested_messages(d),
    }


HOSTILE_FIXED: Final[dict[str, bytes]] = {
    "json-4301-digit-int": b'{"id":' + b"9" * 4301 + b"}",  # past int's str limit
    "json-invalid-utf8": b'{"id":1,"name":"\xff\xfe","tags":[],"metrics":[]}',
    "json-nan-infinity": b'{"id":1,"name":"x","tags":[],"metrics":[NaN,-Infinity]}',
    "msgpack-lying-array32": b"\xdd\xff\xff\xff\xff",
    "msgpack-lying-map32": b"\xdf\xff\xff\xff\xff",
    "msgpack-lying-str32": b"\xdb\xff\xff\xff\xff",
    "msgpack-lying-bin32": b"\xc6\xff\xff\xff\xff",
    "msgpack-lying-ext32": b"\xc9\xff\xff\xff\xff\x01",
    "msgpack-timestamp-bad-nanos": b"\xd7\xff" + b"\xff" * 8,
    "msgpack-timestamp96": b"\xc7\x0c\xff" + b"\xff" * 12,
    "protobuf-overlong-varint": b"\x08" + b"\xff" * 20,
    "protobuf-lying-length": b"\x12\xff\xff\xff\xff\x0f",
    "protobuf-bad-utf8": b"\x12\x02\xff\xfe",
    "protobuf-field-zero": b"\x00",
    "protobuf-stray-end-group": b"\x0c",
    "protobuf-packed-odd-length": b"\x22\x03abc",
    "empty": b"",
}
"""Hostile inputs that do not scale: lying lengths, malformed scalars."""


def all_hostile() -> dict[str, bytes]:
    """Every hostile input, named `CASE@DEPTH` for the scaled ones."""
    out = {**HOSTILE_FIXED, **wire_hostile()}
    for depth in HOSTILE_DEPTHS:
        out.update({f"{name}@{depth}": v for name, v in hostile(depth).items()})
    return out


_JSON_TOKENS: Final = [
    *(bytes([b]) for b in b'{}[]:,"'),
    b"true",
    b"false",
    b"null",
    b"NaN",
    b"-Infinity",
    b"1e999",
    b"-0",
    b"0.5",
    b"\\u0000",
    b"\\ud800",
    b'\\"',
]
_MSGPACK_TOKENS: Final = [
    *(bytes([b]) for b in b"\xc0\xc2\xc3\xc4\xca\xcb\xcf\xd3\xd9\xdc\xdd\xde\xdf"),
    b"\xd6\xff",
    b"\xd7\xff",
    b"\xc7\x0c\xff",
    b"\xff\xff\xff\xff",
]


@functools.cache
def field_names() -> frozenset[str]:
    """Every field name of every profile, nested messages' too."""
    names: set[str] = set()
    pending = [schema_forms(p).proto.DESCRIPTOR for p in PROFILES]
    while pending:
        descriptor = pending.pop()
        for f in descriptor.fields:
            names.add(f.name)
            if f.message_type is not None:
                pending.append(f.message_type)
    return frozenset(names)


def tokens(key: CodecName) -> list[bytes]:
    """Words of the codec's wire(s), for a fuzzer's dictionary and mutations: the
    syntax, and each field name of every profile as that wire spells it."""
    codec_types = (
        set(WIRE_CODECS) if key == "auto" else {codec(key, "small").content_type}
    )
    names = sorted(field_names())
    out: list[bytes] = []
    if JSON in codec_types:
        out += _JSON_TOKENS
        out += [b'"' + n.encode() + b'":' for n in names]
    if MSGPACK in codec_types:
        out += _MSGPACK_TOKENS
        out += [bytes([0xA0 | len(n)]) + n.encode() for n in names if len(n) < 32]
    if PROTOBUF in codec_types:
        out += [_varint(f << 3 | w) for f in range(1, 16) for w in (0, 1, 2, 3, 4, 5)]
        out += [b"\xff\xff\xff\xff\x0f", b"\x80" * 9 + b"\x01"]
    if codec_types & {FLATBUFFERS, CAPNP}:  # offsets, lengths, sizes, pointers
        out += [b"\x00\x00\x00\x00", b"\xff\xff\xff\xff", b"\xff\xff\xff\x7f"]
        out += [b"\x04\x00", b"\x08\x00", b"\xff\xff", b"\x01\x00\x00\x00"]
    if FLATBUFFERS in codec_types:  # each profile's file identifier
        fb = [codec("flatbuffers", p) for p in SCHEMA_NAMES]
        out += [c.form.identifier.encode() for c in fb]  # type: ignore[attr-defined]
    if CAPNP in codec_types:  # far, list (inline composite) and struct pointers
        out += [
            b"\x02\x00\x00\x00\x00\x00\x00\x00",
            b"\x01\x00\x00\x00\x17\x00\x00\x00",
        ]
        out += [b"\x00\x00\x00\x00\x01\x00\x01\x00", b"\xfc\xff\xff\xff"]
    if AVRO in codec_types:  # zig-zag varints: 0, -1, 1, huge, overlong
        out += [b"\x00", b"\x01", b"\x02", b"\xfe\xff\xff\xff\x0f", b"\xff" * 10]
    return out
