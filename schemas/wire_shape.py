"""The shape of any schema the codecs take: a user's own, or a built-in's, read once.

The FlatBuffers, Cap'n Proto and Avro forms are derived from a shape; a built-in
schema has none stored, so its msgspec Struct (which mirrors messages.proto) is read.
"""

from __future__ import annotations

from typing import Protocol

import msgspec

from schemas.shape import FieldShape, MessageShape
from schemas.user.msgspec_reader import read_struct

_READ: dict[type, MessageShape] = {}
"""Shapes read from Structs, by Struct: each is read once per process."""


class _HasStruct(Protocol):
    @property
    def struct(self) -> type[msgspec.Struct]: ...


def shape_of(schema: _HasStruct) -> MessageShape:
    """`schema.shape` when it has one (a user's schema), else its Struct's shape."""
    shape = getattr(schema, "shape", None)
    if isinstance(shape, MessageShape):
        return shape
    found = _READ.get(schema.struct)
    if found is None:
        found = _READ[schema.struct] = read_struct(schema.struct)
    return found


def field_path(path: str, f: FieldShape) -> str:
    """`path.name`: the dotted path of a field, for refusals."""
    return f"{path}.{f.name}"
