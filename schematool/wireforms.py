"""The FlatBuffers, Cap'n Proto and Avro forms of a schema, as text to print.

Each is derived from the schema's shape the way the codec derives it at start-up;
a format that cannot hold the schema (the codec's verdict, `codec.codec_refusal`, as
`check` and every tool gives it) gives its refusal, a line per field, instead of
text, and only that format is affected.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Final

from codec import codec_refusal
from schemas.derive.avro_schema import avro_text
from schemas.derive.capnp_schema import capnp_form
from schemas.derive.fbs_schema import flatbuffers_form
from schemas.errors import ConfigError
from schemas.shape import MessageShape
from schemas.user.loader import UserSchema

WIRE_FORMS: Final[dict[str, Callable[[MessageShape], str]]] = {
    "flatbuffers": lambda shape: flatbuffers_form(shape).text,
    "capnp": lambda shape: capnp_form(shape).text,
    "avro": avro_text,
}
"""Form name -> its text (raises `ConfigError` for a refusal)."""

COMMENT: Final = {"flatbuffers": "//", "capnp": "#", "avro": "//"}
"""The comment marker of each form's headings (Avro's JSON has none: `//` is shown)."""


def wire_form(name: str, schema: UserSchema) -> str:
    """Form `name` of `schema` with a heading comment, or its refusal as a comment."""
    mark = COMMENT[name]
    why = codec_refusal(name, schema)
    if why is not None:
        return refusal_comment(mark, name, schema.name, why)
    try:
        text = WIRE_FORMS[name](schema.shape)
    except ConfigError as exc:
        return refusal_comment(mark, name, schema.name, str(exc))
    if name == "avro":  # JSON has no comments: the heading goes to the caller
        return text
    return f"{mark} Derived by codec-schema from {schema.name}.\n{text}"


def refusal_comment(mark: str, name: str, source: str, why: str) -> str:
    """`// protobuf: cannot hold SOURCE: ...` and a line per field, each a comment
    of the form's language (Avro's JSON has none: a JSON object holding the lines,
    which no Avro parser takes for a schema)."""
    head, *rest = why.removeprefix("schema error: ").splitlines()
    if not head.startswith(f"{name} cannot carry"):
        head = f"{name}: cannot hold {source}: {head}"
    lines = [head, *(r.strip() for r in rest)]
    if name == "avro":
        return json.dumps({"refused": lines}, indent=2, ensure_ascii=False) + "\n"
    return "".join(f"{mark} {line}\n" for line in lines)


def form_status(name: str, schema: UserSchema) -> str:
    """One line for `codec-schema show`: derived, or refused with the reason:
    the verdict `check`, codec-ab and the worker give (`codec.codec_refusal`)."""
    why = codec_refusal(name, schema)
    if why is not None:
        return f"refused: {why.removeprefix('schema error: ')}"
    form = _FORMS.get(name, name)
    return f"derived (codec-schema derive --form {form})"


_FORMS: Final = {
    "protobuf": "proto",
    "msgspec-json": "msgspec",
    "msgspec-msgpack": "msgspec",
    "json+pydantic": "pydantic",
    "json-stdlib+pydantic": "pydantic",
    "orjson+pydantic": "pydantic",
}
"""The `derive --form` each codec's form is printed by."""
