"""What a codec carries by conversion: a type its format lacks, as a string, and back.

A format without a type for a value may still carry it faithfully as text: the exact
text of a Decimal, the canonical text of a UUID, an address or URL as pydantic writes
it to JSON. The codec (or the reading of its values) makes the user's value again, so
a consumer gets what pydantic gives, but the wire is text and the conversion is work
that codec does: `codec-schema check` lists each such (codec, field) as "changed:
carried as <form>", so a team sees it. What no form carries faithfully is refused
(`schemas.formats`), never listed here.

| type | codec | carried as | made again by |
| --- | --- | --- | --- |
| `IPv4Address`, `IPv6Address`, `IPv4Network`, `IPv6Network`, `HttpUrl`, `AnyUrl`... | msgspec-json, msgspec-msgpack; Cap'n Proto, Avro; protobuf, FlatBuffers | str; Text, string; string | msgspec's `dec_hook` at decode (the attribute is the user's class); the reading (protobuf), the view (FlatBuffers) |
| `UUID` | protobuf, FlatBuffers, Cap'n Proto | string | the reading (protobuf), the view (FlatBuffers), the decode (Cap'n Proto) |
| `Decimal` | protobuf, FlatBuffers, Cap'n Proto; Avro unless `max_digits` and `decimal_places` are set | string | as UUID; Avro's decode |
| `date`, `time`, `timedelta` | Cap'n Proto, FlatBuffers | Text, string (ISO 8601, msgspec's form) | the decode (Cap'n Proto), the view (FlatBuffers) |
| `dict[int, V]` (an int enum or Literal too) | Avro | a map keyed by the int's decimal text | Avro's decode |
| `Json[X]` | every derived codec | the JSON text the producer writes | not made again: the attribute is the text (compared parsed) |
| `SecretStr`, `SecretBytes` | every derived codec | the secret's text (pydantic writes `**********` unless a serializer reveals it) | not made again: the attribute is the text |
"""

from __future__ import annotations

from typing import Final

from schemas.formats import (
    BINARY_CODECS,
    DERIVED_CODECS as DERIVED,
    MSGSPEC_CODECS,
    TEXT_FOREIGN,
    TIMES,
    node_reasons,
    walk,
)
from schemas.shape import Choice, Foreign, MapOf, MessageShape, Scalar, TypeShape

_TEXT_KINDS: Final = {
    "uuid": "string (the canonical UUID text, made a UUID again when read)",
    "decimal": "string (the exact Decimal text, made a Decimal again when read)",
}
_AS_TEXT: Final = ("protobuf", "flatbuffers", "capnp")
_HELD: Final = {
    "json": "{kind} (the JSON text your producer writes; your model holds it "
    "parsed, and the codec's attribute is the text)",
    "secret": "{kind} (the secret's text, as your producer writes it; never printed)",
    "secret-bytes": "{kind} (the secret's text, as your producer writes it; never "
    "printed)",
}
_FOREIGN_WHEN: Final = {
    "protobuf": "when read (protobuf's string field)",
    "flatbuffers": "when read (the view's property)",
}
_TEXT_TIMES: Final = {
    "capnp": ("Text", "at decode"),
    "flatbuffers": ("string", "when read"),
}


def carried(root: MessageShape, source: str) -> dict[str, list[str]]:
    """Every (codec, field) `root` is carried by conversion in.

    Args:
        root: the schema's shape.
        source: the user's own form (its codecs carry it as it is).

    Returns:
        codec -> one "PATH: carried as FORM" line per field, in declaration order.
    """
    return walk(root, source, node_forms)


def node_forms(shape: TypeShape, codec: str) -> list[str]:
    """`["carried as FORM"]` when `codec` carries this part by conversion, else `[]`
    (native, or refused: `schemas.formats.node_reasons` says why)."""
    if node_reasons(shape, codec):
        return []
    form = _form(shape, codec)
    return [] if form is None else [f"carried as {form}"]


def _form(shape: TypeShape, codec: str) -> str | None:
    if isinstance(shape, Scalar) and shape.holds is not None and codec in DERIVED:
        kind = (
            "Text"
            if codec == "capnp"
            else "str"
            if codec in MSGSPEC_CODECS
            else "string"
        )
        return _HELD[shape.holds].format(kind=kind)
    if isinstance(shape, Foreign) and shape.text is not None:
        if codec in MSGSPEC_CODECS:
            return (
                f"str (the {shape.name} text; msgspec's dec_hook makes the "
                f"{shape.name} again at decode)"
            )
        if codec in TEXT_FOREIGN:
            kind = "Text" if codec == "capnp" else "string"
            when = _FOREIGN_WHEN.get(codec, "at decode")
            return f"{kind} (the {shape.name} text, made the {shape.name} again {when})"
        return None
    if isinstance(shape, Scalar) and codec in BINARY_CODECS:
        if codec != "avro" and (shape.kind, codec) in TIMES:
            kind, when = _TEXT_TIMES[codec]
            return (
                f"{kind} (the ISO 8601 text msgspec writes, made a {shape.kind} "
                f"again {when})"
            )
        if shape.kind in _TEXT_KINDS and codec in _AS_TEXT:
            return _TEXT_KINDS[shape.kind]
        if shape.kind == "decimal" and codec == "avro" and not _logical(shape):
            return (
                "string (the exact Decimal text; Avro's decimal type needs "
                "max_digits and decimal_places)"
            )
    if isinstance(shape, MapOf) and codec == "avro" and _int_key(shape):
        return "a map keyed by the int's decimal text (Avro keys are strings)"
    return None


def _int_key(shape: MapOf) -> bool:
    key = shape.key
    if isinstance(key, Choice):
        return isinstance(key.values[0], int)
    return key.kind == "int"


def _logical(shape: Scalar) -> bool:
    """`schemas.derive.avro_schema.logical_decimal`'s rule (a unit test keeps the
    two equal): both bounds set, 0 <= scale <= precision > 0."""
    digits, places = shape.constraints.max_digits, shape.constraints.decimal_places
    return digits is not None and places is not None and 0 <= places <= digits > 0
