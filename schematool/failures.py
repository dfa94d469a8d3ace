"""Where a codec failed on a `codec-schema check` payload, and why, in the check's terms.

The check names every field by its attribute path (`Order.booked_at`,
`Order.items[0].sku`); protobuf's parser names the field it refused by its JSON name
(the alias: `at Order.bookedAt.`), so that path is read back through the shape. A
naive datetime protobuf refuses is said as the replay says it (`loadgen.carry`), not
as the parser's message about a format string.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator
from typing import Any, Final

from schemas.shape import ListOf, MapOf, MessageShape, TupleOf, TypeShape, UnionOf
from schemas.unions import member_names

_PB_PATH: Final = re.compile(r" at [A-Za-z_]\w*\.([\w.\[\]-]+?)\.*$")
"""protobuf's json_format ends a ParseError with `at Message.field.sub.` (two dots
after a field inside a repeated message: `at M.items[0].at..`)."""
_STEP: Final = re.compile(r"(?P<name>[A-Za-z_]\w*)(?P<index>(?:\[[^\]]*\])*)")
NAIVE: Final = "a datetime without a timezone (protobuf's Timestamp holds instants)"


def failed_at(
    exc: BaseException, payload: Any, shape: MessageShape, codec: str
) -> tuple[str, str]:
    """(the field's path, why) for `codec`'s failure `exc` on `payload`.

    The path is the field the error names (protobuf's), else the first field
    holding an int past 64 bits (orjson writes none), else the message.
    """
    for error in (exc, exc.__cause__):
        found = _PB_PATH.search(str(error)) if error is not None else None
        if found is not None:
            wire = found.group(1)
            path = f"{shape.name}.{by_attribute(wire, shape)}"
            if codec == "protobuf" and _naive(_leaf(payload, wire)):
                return path, NAIVE
            return path, error_text(exc)
    return next(_wide_ints(payload, shape, shape.name), shape.name), error_text(exc)


def naive_read_back(expected: Any, actual: Any, path: str, codec: str) -> str:
    """How `codec` changed a naive datetime at `path` (a `diff` path below the
    root), in the replay's words; "" when that is not the change."""
    before, after = _read_at(expected, path), _read_at(actual, path)
    if not (
        isinstance(before, datetime.datetime) and isinstance(after, datetime.datetime)
    ):
        return ""
    if before.tzinfo is None and after.tzinfo is not None:
        return f"a datetime without a timezone ({codec} holds instants: it reads back as UTC)"
    return ""


def _read_at(value: Any, path: str) -> Any:
    """The part of a `read_native` value at `.field[2]['key']` (None: not there)."""
    for step in re.findall(r"\.(\w+)|\[(-?\d+)\]", path):
        name, index = step
        if name and isinstance(value, dict):
            value = value.get(name)
        elif index and isinstance(value, list | tuple) and int(index) < len(value):
            value = value[int(index)]
        else:
            return None
    return value


def by_attribute(wire: str, shape: MessageShape) -> str:
    """A path of JSON names (`method.card.lastFour`, `items[0].unitPrice`) as the
    check writes paths: attribute names, a union's member as `<Member>`; a step it
    cannot place is kept as it is."""
    out: list[str] = []
    here: TypeShape | None = shape
    for step in _STEP.finditer(wire):
        name, index = step["name"], step["index"]
        if isinstance(here, UnionOf) and name in member_names(here):
            member = here.members[member_names(here).index(name)]
            if out and isinstance(member, MessageShape):
                out[-1] += f"<{member.name}>"
            here = member
            continue
        messages = [here] if isinstance(here, MessageShape) else []
        f = next(
            (f for m in messages for f in m.fields if name in (f.wire, f.name)), None
        )
        out.append((name if f is None else f.name) + index)
        here = None if f is None else _inside(f.type, index)
    return ".".join(out)


def _inside(kind: TypeShape, index: str) -> TypeShape:
    """A list's item or a map's value after `[i]`; the type itself without one."""
    for _ in range(index.count("[")):
        if isinstance(kind, ListOf):
            kind = kind.item
        elif isinstance(kind, MapOf):
            kind = kind.value
    return kind


def _leaf(payload: Any, wire: str) -> Any:
    """The payload's value at a JSON-name path (None: not there as written)."""
    value = payload
    for part in re.findall(r"[A-Za-z_]\w*|\[\d+\]", wire):
        if part.startswith("[") and isinstance(value, list):
            i = int(part[1:-1])
            value = value[i] if i < len(value) else None
        elif isinstance(value, dict):
            value = value.get(part)
        else:
            return None
    return value


def _naive(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return datetime.datetime.fromisoformat(value).tzinfo is None
    except ValueError:
        return False


def _wide_ints(value: Any, shape: TypeShape, path: str) -> Iterator[str]:
    if isinstance(value, int) and not -(2**63) <= value < 2**64:
        yield path
    elif isinstance(shape, UnionOf) and isinstance(value, dict):
        for m in shape.members:
            if isinstance(m, MessageShape) and set(value) <= {f.wire for f in m.fields}:
                yield from _wide_ints(value, m, path)
                return
    elif isinstance(shape, MessageShape) and isinstance(value, dict):
        for f in shape.fields:
            yield from _wide_ints(value.get(f.wire), f.type, f"{path}.{f.name}")
    elif isinstance(shape, ListOf) and isinstance(value, list):
        for i, item in enumerate(value):
            yield from _wide_ints(item, shape.item, f"{path}[{i}]")
    elif isinstance(shape, TupleOf) and isinstance(value, list):
        for i, (item, part) in enumerate(zip(value, shape.items, strict=False)):
            yield from _wide_ints(item, part, f"{path}[{i}]")
    elif isinstance(shape, MapOf) and isinstance(value, dict):
        for k, item in value.items():
            yield from _wide_ints(item, shape.value, f"{path}[{k!r}]")


def error_text(exc: BaseException) -> str:
    """`Type: message` on one line, at most 160 characters of the message."""
    text = " ".join(str(exc).split())
    cause = exc.__cause__
    if cause is not None and text == type(cause).__name__:  # its words, not its name
        text = f"{text}: {' '.join(str(cause).split())}"
    return f"{type(exc).__name__}: {text[:160]}"
