"""The FlatBuffers, Cap'n Proto and Avro forms of a schema, as text to print.

Each is derived from the schema's shape the way the codec derives it at start-up;
a format that cannot hold the schema gives its refusal (field path and reason)
instead of text, and only that format is affected.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from schemas.derive.avro_schema import avro_text
from schemas.derive.capnp_schema import capnp_form
from schemas.derive.fbs_schema import flatbuffers_form
from schemas.errors import ConfigError
from schemas.shape import MessageShape

WIRE_FORMS: Final[dict[str, Callable[[MessageShape], str]]] = {
    "flatbuffers": lambda shape: flatbuffers_form(shape).text,
    "capnp": lambda shape: capnp_form(shape).text,
    "avro": avro_text,
}
"""Form name -> its text (raises `ConfigError` for a refusal)."""

COMMENT: Final = {"flatbuffers": "//", "capnp": "#", "avro": "//"}
"""The comment marker of each form's headings (Avro's JSON has none: `//` is shown)."""


def wire_form(name: str, shape: MessageShape, source: str) -> str:
    """Form `name` of `shape` with a heading comment, or its refusal as a comment."""
    mark = COMMENT[name]
    try:
        text = WIRE_FORMS[name](shape)
    except ConfigError as exc:
        return f"{mark} {name}: cannot hold {source}: {exc}\n"
    if name == "avro":  # JSON has no comments: the heading goes to the caller
        return text
    return f"{mark} Derived by codec-schema from {source}.\n{text}"


def form_status(name: str, shape: MessageShape) -> str:
    """One line for `codec-schema show`: derived, or refused with the reason."""
    try:
        WIRE_FORMS[name](shape)
    except ConfigError as exc:
        return f"refused: {str(exc).removeprefix('schema error: ')}"
    return f"derived (codec-schema derive --form {name})"
