"""Both codecs' verdicts on one message, compared field by field (the shadow's core)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, Literal

import msgspec
import pydantic

from codec import AutoCodec, Codec
from schemas.compare import diff, read_native, wire_keyed
from schemas.errors import CodecError, DecodeError
from schemas.registry import SchemaForms
from schemas.shape import MessageShape, nested
from schemas.user.msgspec_reader import read_struct

Outcome = Literal["agree", "differ", "shadow_rejected", "primary_rejected"]

_AT: Final = re.compile(r"^(?P<what>.*?) - at `\$(?P<path>[^`]*)`$")
_NAMED: Final = (
    (re.compile(r"^Expected `[^`']*`, got `[^`']*`$"), ""),
    (
        re.compile(r"^Object contains unknown field `(?P<name>[^`]*)`$"),
        "an unknown field",
    ),
    (
        re.compile(r"^Object missing required field `(?P<name>[^`]*)`$"),
        "a missing field",
    ),
)
"""msgspec messages that quote types or field names only, and their reason
("": the message itself)."""
_INDEX: Final = re.compile(r"\[[^\]]*\]")
"""A list index or map key in a `diff` path. A str key holding "]" leaves debris,
but the result is then no schema path, so it is counted as `other`."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """Both codecs' verdicts on one message.

    Attributes:
        outcome: agree, differ, shadow_rejected or primary_rejected.
        mode: `decode` (same wire: the shadow decodes the bytes) or `round-trip`
            (the primary's values re-encoded by the shadow and decoded back).
        paths: schema field paths where the decodes differ (indexes stripped).
        error_type: the rejecting side's exception type (qualified name). Only the
            type: library error texts may quote input (msgspec names the value
            of a bad enum), and samples' headers never hold payload values.
        error_path: the field the rejecting side refused (`items.qty`, `$` for
            the message), when its error names one (`located`).
        error_reason: why, in words that quote no value (types, "an unknown
            field"), when the error gives one.
    """

    outcome: Outcome
    mode: str
    paths: tuple[str, ...] = ()
    error_type: str = ""
    error_path: str = ""
    error_reason: str = ""


class Comparer:
    """Decodes one message with both codecs and compares them field by field.

    Through the shadow directly when it reads the primary's wire format (e.g.
    json+pydantic live, msgspec-json shadow): this tests what the shadow accepts.
    For another wire format the primary's values are encoded by the shadow and
    decoded back: this tests what survives the switch (None vs a default, float
    precision, int width); a message the primary rejects has nothing to re-encode
    and is left out.

    Args:
        primary: the live codec (an `AutoCodec` picks one per content-type).
        shadow: the shadow codec (one wire format).
        shape: the schema's shape, which guides reading and comparing.
    """

    def __init__(self, primary: Codec[Any], shadow: Codec[Any], shape: MessageShape):
        self._primary = primary
        self._codec_for = primary.codec_for if isinstance(primary, AutoCodec) else None
        self._shadow = shadow
        self._shape = shape
        self._known = schema_paths(shape)

    def compare(self, value: bytes, content_type: bytes | None) -> Verdict | None:
        """Both verdicts on `value`; None when there is nothing to compare."""
        primary = self._primary
        if self._codec_for is not None:
            try:
                primary = self._codec_for(content_type)
            except DecodeError:
                return None  # no codec's verdict: the live path set it aside
        obj, p_error = _decode(primary, value)
        shadow = self._shadow
        expected: dict[str, Any] | None = None
        if primary.content_type == shadow.content_type:
            mode = "decode"
            other, s_error = _decode(shadow, value)
        elif p_error is not None:
            return None
        else:
            mode = "round-trip"
            expected = self._read(obj)
            other, s_error = self._round_trip(expected)
        if p_error is not None:
            if s_error is not None:
                return Verdict("agree", mode)  # both reject: the switch changes nothing
            return Verdict("primary_rejected", mode, (), *_named(p_error))
        if s_error is not None:
            return Verdict("shadow_rejected", mode, (), *_named(s_error))
        if expected is None:
            expected = self._read(obj)
        found = diff(expected, self._read(other), self._shape, "")
        if not found:
            return Verdict("agree", mode)
        paths = dict.fromkeys(self._bounded(field_path(p)) for p, _ in found)
        return Verdict("differ", mode, tuple(paths))

    def _read(self, obj: Any) -> dict[str, Any]:
        return read_native(obj, self._shape)

    def _round_trip(self, values: dict[str, Any]) -> tuple[Any, Exception | None]:
        shadow = self._shadow
        try:
            # to_builtins: datetimes, bytes and enums as every codec's
            # `from_builtins` takes them (what `to_builtins` gives back).
            # Keyed by the wire keys (aliases), as `from_builtins` takes them.
            wire = wire_keyed(values, self._shape)
            obj = shadow.from_builtins(msgspec.to_builtins(wire))
            return shadow.decode_unchecked(shadow.encode(obj)), None
        except Exception as exc:  # any failure is the shadow's verdict
            return None, exc

    def _bounded(self, path: str) -> str:
        return path if path in self._known else "other"


def _decode(codec: Codec[Any], value: bytes) -> tuple[Any, Exception | None]:
    try:
        return codec.decode_unchecked(value), None
    except Exception as exc:  # any failure is this codec's verdict (see Comparer)
        return None, exc


def _named(exc: Exception) -> tuple[str, str, str]:
    """(error type, field path, reason) of a rejection, for a `Verdict`."""
    return (_error_type(exc), *located(exc))


def located(exc: BaseException) -> tuple[str, str]:
    """(field path, reason) of a decode error, quoting no payload value.

    msgspec ends its messages with ``- at `$.items[3].qty` `` (indexes are
    stripped: `items.qty`); pydantic gives `loc` and an error type code. The
    reason is kept only when it names types or fields, never a value: msgspec's
    ``Invalid enum value 'weird'`` gives the path alone. ("", "") when the error
    names no field.
    """
    cause = exc.__cause__ if isinstance(exc, CodecError) and exc.__cause__ else exc
    if isinstance(cause, pydantic.ValidationError):
        errors = cause.errors(include_url=False, include_input=False)
        if not errors:
            return "", ""
        loc = ".".join(str(p) for p in errors[0]["loc"] if not isinstance(p, int))
        return loc or "$", errors[0]["type"]
    if not isinstance(cause, msgspec.ValidationError):
        return "", ""
    text, path = str(cause), "$"
    if (m := _AT.match(text)) is not None:
        text, path = m["what"], field_path(m["path"])
    for pattern, reason in _NAMED:
        if (m := pattern.match(text)) is not None:
            name = m.groupdict().get("name")
            if name is not None:
                path = name if path == "$" else f"{path}.{name}"
            return path, reason or text
    return path, ""


def _error_type(exc: BaseException) -> str:
    """The qualified type of what failed: the library's, under a `CodecError`."""
    cause = exc.__cause__ if isinstance(exc, CodecError) and exc.__cause__ else exc
    return f"{type(cause).__module__}.{type(cause).__qualname__}"


def schema_paths(shape: MessageShape) -> frozenset[str]:
    """Every field path of `shape` (`items.price`), and `$` for the message itself."""
    out = {"$"}

    def walk(msg: MessageShape, prefix: str) -> None:
        for f in msg.fields:
            path = f"{prefix}.{f.name}" if prefix else f.name
            out.add(path)
            for inner in nested(f.type):
                walk(inner, path)

    walk(shape, "")
    return frozenset(out)


def field_path(path: str) -> str:
    """`diff`'s path without list indexes and map keys (`.items[2].price` ->
    `items.price`; `$` for the whole message): map keys are payload values."""
    return _INDEX.sub("", path).lstrip(".") or "$"


def shape_of(forms: SchemaForms) -> MessageShape:
    """A schema's shape: a user schema's own, else read from its msgspec Struct."""
    shape = getattr(forms, "shape", None)
    return shape if isinstance(shape, MessageShape) else read_struct(forms.struct)
