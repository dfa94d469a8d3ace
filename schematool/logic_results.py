"""A handler's results made comparable across codecs, and where two differ.

The normalisation (`normalise`), documented in docs/tutorials/your-logic.md ("What a switch breaks"):

- a pydantic model, a msgspec Struct and a protobuf message become a dict of their
  fields by field name (a protobuf field with presence that is not set is None);
- a dict (a protobuf map) stays a dict; a list, tuple or protobuf repeated field
  becomes a list; a set a list in sorted order;
- an enum member becomes its value;
- every other value is kept as it is and compared by kind and value: an int and a
  float of equal value are equal (JSON does not tell them apart), but a `Decimal` is
  not a str or a float, a `datetime` not a str or a protobuf `Timestamp`.

So a handler that returns `order.total` gets `differs` on protobuf when the model's
`Decimal` comes back as a string; one that returns the message itself differs at
every field a codec holds in another kind.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterator, Mapping
from typing import Any, Final

import msgspec
from google.protobuf.message import Message
from pydantic import BaseModel

_SHOWN: Final = 60
"""Characters of a value shown in a difference."""


def normalise(value: Any) -> Any:
    """`value` as plain dicts, lists and scalars (see the module docstring)."""
    if isinstance(value, BaseModel):
        return {n: normalise(getattr(value, n)) for n in type(value).model_fields}
    if isinstance(value, msgspec.Struct):
        return {n: normalise(getattr(value, n)) for n in value.__struct_fields__}
    if isinstance(value, Message):
        return _message(value)
    if isinstance(value, enum.Enum):
        return normalise(value.value)
    if isinstance(value, Mapping):
        return {_key(k): normalise(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return sorted((normalise(v) for v in value), key=repr)
    if isinstance(value, str | bytes | bytearray):
        return value
    if hasattr(value, "__len__") and hasattr(value, "__getitem__"):
        return [normalise(v) for v in value]  # a list, tuple or repeated field
    return value


def _message(msg: Message) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in msg.DESCRIPTOR.fields:
        if f.has_presence and not msg.HasField(f.name):
            out[f.name] = None
        else:
            out[f.name] = normalise(getattr(msg, f.name))
    return out


def _key(key: Any) -> Any:
    key = normalise(key)
    try:
        hash(key)
    except TypeError:
        return repr(key)
    return key


def differences(a: Any, b: Any, path: str) -> Iterator[tuple[str, str]]:
    """(path, what) for each place normalised `b` differs from normalised `a`.

    Paths name list items `[i]` and dict entries `[key]`."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in [*a, *(k for k in b if k not in a)]:  # in order: stable output
            where = (
                f"{path}.{k}"
                if isinstance(k, str) and k.isidentifier()
                else f"{path}[{k!r}]"
            )
            if k not in b:
                yield where, "missing"
            elif k not in a:
                yield where, "not in the reference's result"
            else:
                yield from differences(a[k], b[k], where)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            yield path, f"{len(a)} items vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            yield from differences(x, y, f"{path}[{i}]")
    elif not _same(a, b):
        yield path, f"{_shown(a)} vs {_shown(b)}"


def _same(a: Any, b: Any) -> bool:
    number = (int, float)
    if type(a) is not type(b):
        both_numbers = (
            isinstance(a, number)
            and isinstance(b, number)
            and not isinstance(a, bool)
            and not isinstance(b, bool)
        )
        if not both_numbers:
            return False
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    try:
        return bool(a == b)
    except Exception:  # an exotic result whose == raises: not the same
        return False


def _shown(value: Any) -> str:
    text = repr(value)
    if len(text) > _SHOWN:
        text = text[: _SHOWN - 3] + "..."
    kind = type(value).__name__
    plain = kind in ("NoneType", "dict", "list") or text.startswith(kind + "(")
    return text if plain else f"{kind} {text}"
