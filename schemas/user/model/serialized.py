"""What the derived forms make of a value a serializer of the team's writes.

A field serializer (`@field_serializer`, `PlainSerializer`, `WrapSerializer`) or a
model serializer writes what the producer sends; the model reads it back through its
own validators (cents written as an int, read back into a Decimal by a `before`
validator). The derived forms hold the value as the model types it and read the
wire with no code of the team's, so whether they give the model's value back is a
fact of that serializer, tried here on the model's own synthetic messages: each is
written by the producer, read by the model and by the derived Struct (every derived
codec reads through it or its types), and compared field by field.

A serializer whose wire the derived forms read to the model's value (a datetime
written as ISO text with milliseconds) is carried; one they read as another value
(cents read as a Decimal of cents), or cannot read, refuses the derived codecs for
that field, naming the serializer and a value it wrote. The verdict is made once,
when the schema is loaded, so every command gives the same one.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

import msgspec
import pydantic

from schemas.compare import diff, read_native
from schemas.derive.msgspec_structs import hooks
from schemas.shape import (
    ListOf,
    MapOf,
    MessageShape,
    Scalar,
    TupleOf,
    TypeShape,
    UnionOf,
)

TRIED: Final = 12
"""Messages tried: every serializer here writes its field in each (a field that is
None or left out in one is written in most of the others)."""
_WIRE_PATH: Final = re.compile(r" - at `\$(?P<path>[^`]*)`")


def serializer_refusals(
    shape: MessageShape,
    struct: type[msgspec.Struct],
    sites: list[tuple[str, str]],
) -> list[str]:
    """ "PATH: REASON" for each serialized field the derived forms do not read
    back to the model's value (`sites`: (path, serializer) from the reader).
    """
    if not sites:
        return []
    from schemas.user.synthetic import make_payloads  # it writes with the model

    model: Any = shape.source
    general = {_general(path): (path, what) for path, what in sites}
    found: dict[str, str] = {}
    dec_hook = hooks(struct).dec_hook
    for payload in make_payloads(shape, TRIED, seed=0, stable=False):
        try:
            expected = read_native(
                model.model_validate_json(json.dumps(payload)), shape
            )
        except pydantic.ValidationError:
            continue  # the model does not read what it writes: check says so
        try:
            obj = msgspec.convert(payload, struct, dec_hook=dec_hook, str_keys=True)
        except msgspec.ValidationError as exc:
            at = _WIRE_PATH.search(str(exc))
            where = _named(shape, at.group("path") if at else "", shape.name)
            _blame(general, found, where, f"the derived forms cannot read: {exc}")
            continue
        for where, what in diff(expected, read_native(obj, shape), shape, shape.name):
            _blame(
                general,
                found,
                where,
                f"read as another value ({what}: the model's first)",
            )
    return [
        f"{path}: {what} writes a form of the value {why}; your model reads it back "
        "with its own validators, which the derived forms do not run"
        for general_path, (path, what) in general.items()
        if (why := found.get(general_path)) is not None
    ]


def _blame(
    general: dict[str, tuple[str, str]], found: dict[str, str], where: str, why: str
) -> None:
    """Record `why` against the serialized field `where` lies in (if any)."""
    where = _general(where)
    for path in general:
        if (where == path or where.startswith((f"{path}.", f"{path}["))) and (
            path not in found
        ):
            found[path] = _secret_free(why, general[path][1])
            return


def _secret_free(why: str, what: str) -> str:
    return (
        why if "secret" not in what.lower() else "the derived forms read another value"
    )


def _general(path: str) -> str:
    """`M.items[2].price`, `M.items[]<Item>.price` -> `M.items[].price`."""
    path = re.sub(r"<[^>]*>", "", path)
    path = re.sub(r"\{[^}]*\}", "[]", path)
    return re.sub(r"\[[^\]]*\]", "[]", path)


def _named(shape: TypeShape, wire: str, path: str) -> str:
    """msgspec's error path (wire keys: `.eventId.lines[0]`) by field names."""
    key = re.match(r"\.([^.\[]+)|\[([^\]]*)\]", wire)
    if key is None:
        return path
    rest = wire[key.end() :]
    if isinstance(shape, MessageShape) and key.group(1) is not None:
        for f in shape.fields:
            if f.wire == key.group(1):
                return _named(f.type, rest, f"{path}.{f.name}")
        return path
    if isinstance(shape, ListOf | TupleOf | MapOf) and key.group(2) is not None:
        inner = shape.value if isinstance(shape, MapOf) else _item(shape)
        return _named(inner, rest, f"{path}[]")
    if isinstance(shape, UnionOf):
        for member in shape.members:
            named = _named(member, wire, path)
            if named != path:
                return named
    return path


def _item(shape: ListOf | TupleOf) -> TypeShape:
    return (
        shape.item
        if isinstance(shape, ListOf)
        else (shape.items or (Scalar("str"),))[0]
    )
