"""The codec interface and the one place library errors become `DecodeError` (and
`EncodeError`).

A codec is constructed once per schema with its target type bound (nothing is built
per message). `decode` is the safe entry point: it raises only `DecodeError`.
`decode_unchecked` is the library's own decoder, bound once, for the worker's hot
loop: the loop wraps a whole batch in one `try` and turns whatever escapes into a
`DecodeError` with `as_decode_error`, which saves a Python call frame per message.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final, Protocol, TypeVar

import msgspec
import pydantic
from google.protobuf.message import DecodeError as ProtobufDecodeError

from schemas.errors import DecodeError, EncodeError

T = TypeVar("T")

JSON: Final = "application/json"
MSGPACK: Final = "application/vnd.msgpack"
PROTOBUF: Final = "application/x-protobuf"
FLATBUFFERS: Final = "application/x-flatbuffers"
"""No media type is registered for FlatBuffers or Cap'n Proto: the de facto ones."""
CAPNP: Final = "application/x-capnp"
AVRO: Final = "application/avro"
"""Avro binary, a bare record (no container file, no schema registry framing)."""

_QUOTED: Final = re.compile(r"'[^']*'")
"""A single-quoted span of an error text: an input value, never shown."""

_MAX_DETAIL: Final = 200
"""Error details are cut to this many characters: they travel in DLQ headers."""


class Codec(Protocol[T]):
    """Encodes and decodes one schema's native type.

    Attributes:
        name: the registry key, e.g. `msgspec-msgpack`.
        content_type: the `content-type` header value this codec writes.
        native_type: the type `decode` returns.
        decode_unchecked: the library decoder; may raise anything.
    """

    name: str
    content_type: str
    native_type: type[T]

    @property
    def decode_unchecked(self) -> Callable[[bytes], T]:
        """The library decoder, bound once; may raise anything."""
        ...

    def decode(self, data: bytes, /) -> T:
        """Decode `data`; raise `DecodeError` on any failure."""
        ...

    def encode(self, obj: T, /) -> bytes:
        """Encode `obj`; raise `EncodeError` on any failure."""
        ...

    def to_builtins(self, obj: T, /) -> dict[str, Any]:
        """Convert a native object to dicts, lists and scalars (not for hot paths)."""
        ...

    def from_builtins(self, data: dict[str, Any], /) -> T:
        """Build a native object from `to_builtins` output (not for hot paths)."""
        ...


def _pydantic_detail(exc: pydantic.ValidationError) -> str:
    # errors() carries the input values; keep only where and what kind of error.
    parts = [
        f"{'.'.join(str(p) for p in err['loc']) or '$'}: {err['type']}"
        for err in exc.errors(include_input=False, include_url=False)[:3]
    ]
    return f"{exc.error_count()} validation error(s): " + "; ".join(parts)


class MalformedBuffer(ValueError):
    """A codec's own check of a buffer failed; the text names the check (never
    input bytes), so it is kept in the `DecodeError`."""


def _detail(exc: BaseException) -> str:
    """A description of `exc` that never contains payload values."""
    if isinstance(exc, MalformedBuffer):
        return f"{type(exc).__name__}: {exc}"
    if isinstance(exc, pydantic.ValidationError):
        return _pydantic_detail(exc)
    if isinstance(exc, msgspec.MsgspecError | ProtobufDecodeError | RecursionError):
        # msgspec messages name a type and a path (`$.items[0]`) in backticks; the
        # one that quotes input ("Invalid enum value 'x'") does so in single quotes.
        return _QUOTED.sub("'...'", str(exc))
    # Other messages (UnicodeDecodeError, ValueError...) may quote input bytes.
    return type(exc).__name__


def as_decode_error(codec: str, exc: BaseException) -> DecodeError:
    """Turn any library exception into a `DecodeError` whose text is safe to log."""
    if isinstance(exc, DecodeError):
        return exc
    cause = type(exc)
    return DecodeError(
        _detail(exc)[:_MAX_DETAIL],
        codec=codec,
        reason="decode",
        cause_type=f"{cause.__module__}.{cause.__qualname__}",
    )


def as_encode_error(codec: str, exc: BaseException) -> EncodeError:
    """Turn any library exception into an `EncodeError` named by its type only."""
    if isinstance(exc, EncodeError):
        return exc
    error = EncodeError(type(exc).__name__, codec=codec, reason="encode")
    error.__cause__ = exc
    return error


def safe_decode(codec: str, decode: Callable[[bytes], T], data: bytes) -> T:
    """Call `decode`, re-raising any failure but `MemoryError` as `DecodeError`."""
    try:
        return decode(data)
    except (MemoryError, DecodeError):
        raise  # a DecodeError keeps its own cause (the library error it names)
    except Exception as exc:
        raise as_decode_error(codec, exc) from exc
