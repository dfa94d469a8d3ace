"""Any codec's native object as plain data: for tooling and re-encoding, never hot."""

from __future__ import annotations

from typing import Any

import msgspec
from google.protobuf.message import Message
from pydantic import BaseModel

from codec.protobuf_codec import message_to_builtins
from codec.views import LazyView, view_to_python
from schemas.derive.msgspec_structs import hooks


def native_to_builtins(obj: Any) -> dict[str, Any]:
    """Any codec's native object as dicts, lists and scalars (slow, for tooling)."""
    if isinstance(obj, msgspec.Struct):  # a type carried as text written as text
        out: dict[str, Any] = msgspec.to_builtins(
            obj, enc_hook=hooks(type(obj)).enc_hook
        )
        return out
    if isinstance(obj, BaseModel):
        # bytes, datetimes, enums as JSON has them; keys as the wire has them; a
        # computed field is no field of the message (protobuf's parser refuses it).
        return obj.model_dump(
            mode="json", by_alias=True, round_trip=True, exclude_computed_fields=True
        )
    if isinstance(obj, Message):
        return message_to_builtins(obj)
    if isinstance(obj, LazyView):  # a FlatBuffers view: read, then as msgspec has it
        out = msgspec.to_builtins(view_to_python(obj), enc_hook=str)  # text types
        return out
    raise TypeError(f"not a native message object: {type(obj).__name__}")
