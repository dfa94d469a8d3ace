"""The `fields` logic: read only some named fields of each message, as a consumer that
needs 2-3 fields of a wide message does (where lazy formats claim their win).

`--read-fields a,b.c` names dotted paths; a path through a list of messages reads
the rest of the path on every item (`items.quantity`). `--read-fields 3` (a number
k) reads the first k top-level fields in declaration order; `all` reads every field
(with `--logic noop` for decode alone, the Kafka path's three figures). The last field of a
path is read whole, as `aggregate` reads a field: a nested message every field of
it, a list every item, a protobuf `Timestamp` converted to a datetime.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from schemas.errors import ConfigError
from schemas.shape import FieldShape, ListOf, MessageShape
from service.logic.field_reader import Read, _Compiler


def field_paths(shape: MessageShape, spec: str) -> tuple[str, ...]:
    """The dotted paths `spec` names (`a,b.c`; a count k: the first k fields; `all`).

    Raises:
        ConfigError: an empty spec, a bad count or a path the schema does not have.
    """
    spec = spec.strip()
    if spec == "all":  # every field, each read whole: decode + read everything
        return tuple(f.name for f in shape.fields)
    if spec.isdigit():
        k = int(spec)
        if not 1 <= k <= len(shape.fields):
            raise ConfigError(
                f"read_fields: {spec!r}: expected 1 to {len(shape.fields)} "
                f"(the fields of {shape.name})"
            )
        return tuple(f.name for f in shape.fields[:k])
    paths = tuple(p.strip() for p in spec.split(",") if p.strip())
    if not paths:
        raise ConfigError("read_fields: expected a count or dotted field paths")
    for path in paths:
        _walk(shape, path)
    return paths


def _field(msg: MessageShape, name: str, path: str) -> FieldShape:
    for f in msg.fields:
        if f.name == name:
            return f
    names = ", ".join(f.name for f in msg.fields)
    raise ConfigError(
        f"read_fields: {path!r}: {msg.name} has no field {name!r} ({names})"
    )


def _walk(msg: MessageShape, path: str) -> list[tuple[FieldShape, bool]]:
    """The fields along `path`, each with whether the path goes through its list."""
    parts = path.split(".")
    out = []
    for i, name in enumerate(parts):
        f = _field(msg, name, path)
        last = i == len(parts) - 1
        through = isinstance(f.type, ListOf)
        inner = f.type.item if isinstance(f.type, ListOf) else f.type
        if not last:
            if not isinstance(inner, MessageShape):
                raise ConfigError(
                    f"read_fields: {path!r}: {msg.name}.{name} holds no message"
                )
            msg = inner
        out.append((f, through and not last))
    return out


def read_named_fields(shape: MessageShape, paths: tuple[str, ...]) -> Read:
    """The step that reads `paths` of a decoded message of any form.

    Returns the number of values read, like `service.logic.field_reader.read_every_field`.
    """
    python, proto = _Compiler(proto=False), _Compiler(proto=True)
    readers = {
        form: [_path_reader(_walk(shape, p), comp, form) for p in paths]
        for form, comp in ((False, python), (True, proto))
    }
    read_python, read_proto = readers[False], readers[True]

    def read(obj: Any) -> int:
        chosen = read_proto if isinstance(obj, Message) else read_python
        return sum(one(obj) for one in chosen)

    return read


def _path_reader(
    steps: list[tuple[FieldShape, bool]], comp: _Compiler, proto: bool
) -> Read:
    (f, through), rest = steps[0], steps[1:]
    name = f.name
    presence = proto and f.nullable
    if not rest:
        leaf = comp.value(f.type)

        def read_leaf(obj: Any) -> int:
            if presence and not obj.HasField(name):
                return 1
            value = getattr(obj, name)
            return 1 if value is None else leaf(value)

        return read_leaf
    inner = _path_reader(rest, comp, proto)
    if through:
        return lambda obj: sum(inner(item) for item in getattr(obj, name))

    def read_nested(obj: Any) -> int:
        if presence and not obj.HasField(name):
            return 1
        value = getattr(obj, name)
        return 1 if value is None else inner(value)

    return read_nested
