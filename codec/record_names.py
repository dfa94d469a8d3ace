"""Avro's branch of an untagged union of records, written and read by its name.

An untagged union of messages (`schemas.untagged`) is an Avro union of the member
records; its value carries no field that names the member, so the codec writes
fastavro's `(record name, record)` notation (the branch index on the wire is the
member the object is) and reads with `return_record_name`, which gives each union
of two or more records back as `(name, record)`: a tagged union's value becomes its
record again (the tag picks the Struct), an untagged one's stays a pair, which the
Struct's `dec_hook` turns into that member (`UntaggedUnion.make`).

Built only for a schema with an untagged union: every other schema reads and writes
as before and pays nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from schemas.derive.avro_schema import NAMESPACE
from schemas.shape import ListOf, MapOf, MessageShape, TypeShape, UnionOf
from schemas.untagged import is_untagged, member_index

Write = Callable[[Any, Any], Any]
"""(native value, its builtins) -> the builtins fastavro writes."""
Read = Callable[[Any], Any]
"""fastavro's value -> the builtins the Struct converts from."""


def has_untagged(shape: MessageShape) -> bool:
    """True when `shape` holds an untagged union of messages anywhere."""
    return _Branches().write(shape) is not None


def branch_writer(shape: MessageShape) -> Write | None:
    """The fix of a record's builtins before fastavro writes it (None: none needed)."""
    return _Branches().write(shape)


def branch_reader(shape: MessageShape) -> Read | None:
    """The fix of what fastavro reads with record names (None: none needed)."""
    return _Branches().read(shape) if has_untagged(shape) else None


class _Branches:
    def __init__(self) -> None:
        self._writes: dict[int, Write | None] = {}
        self._reads: dict[int, Read | None] = {}

    def write(self, shape: TypeShape) -> Write | None:
        if isinstance(shape, MessageShape):
            return self._write_message(shape)
        if isinstance(shape, ListOf):
            item = self.write(shape.item)
            if item is None:
                return None
            return lambda o, r: [item(x, y) for x, y in zip(o, r, strict=True)]
        if isinstance(shape, MapOf):
            value = self.write(shape.value)
            if value is None:
                return None
            return lambda o, r: {
                k: value(x, y) for x, (k, y) in zip(o.values(), r.items(), strict=True)
            }
        if isinstance(shape, UnionOf):
            return self._write_union(shape)
        return None

    def _write_union(self, shape: UnionOf) -> Write | None:
        fixes = [self.write(m) for m in shape.members]
        untagged = is_untagged(shape)
        if not untagged and not any(fixes):
            return None
        names = [f"{NAMESPACE}.{getattr(m, 'name', '')}" for m in shape.members]

        def fix(obj: Any, rec: Any) -> Any:
            if not isinstance(rec, dict):
                return rec  # a scalar member
            i = member_index(shape, obj)
            one = fixes[i]
            rec = rec if one is None else one(obj, rec)
            return (names[i], rec) if untagged else rec

        return fix

    def _write_message(self, msg: MessageShape) -> Write | None:
        if id(msg) in self._writes:  # a recursive type: decided when it is done
            return lambda o, r: (self._writes[id(msg)] or _keep)(o, r)
        self._writes[id(msg)] = None
        fixes = [
            (f.name, f.wire, one) for f in msg.fields if (one := self.write(f.type))
        ]
        if not fixes:
            return None

        def fix(obj: Any, rec: dict[str, Any]) -> dict[str, Any]:
            for name, key, one in fixes:
                if rec.get(key) is not None:
                    rec[key] = one(getattr(obj, name), rec[key])
            return rec

        self._writes[id(msg)] = fix
        return fix

    def read(self, shape: TypeShape) -> Read | None:
        if isinstance(shape, MessageShape):
            return self._read_message(shape)
        if isinstance(shape, ListOf):
            item = self.read(shape.item)
            return None if item is None else (lambda v: [item(x) for x in v])
        if isinstance(shape, MapOf):
            value = self.read(shape.value)
            if value is None:
                return None
            return lambda v: {k: value(x) for k, x in v.items()}
        if isinstance(shape, UnionOf):
            return self._read_union(shape)
        return None

    def _read_union(self, shape: UnionOf) -> Read | None:
        messages = [m for m in shape.members if isinstance(m, MessageShape)]
        fixes = {f"{NAMESPACE}.{m.name}": self.read(m) for m in messages}
        if len(messages) < 2:  # fastavro returns a single record plainly
            one = next(iter(fixes.values()), None)
            return None if one is None else (lambda v: v if v is None else one(v))
        untagged = is_untagged(shape)

        def fix(value: Any) -> Any:
            if not isinstance(value, tuple):
                return value  # None, or a scalar member
            name, rec = value
            one = fixes.get(name)
            rec = rec if one is None else one(rec)
            return (name, rec) if untagged else rec

        return fix

    def _read_message(self, msg: MessageShape) -> Read | None:
        if id(msg) in self._reads:
            return lambda r: (self._reads[id(msg)] or _same)(r)
        self._reads[id(msg)] = None
        fixes = [(f.wire, one) for f in msg.fields if (one := self.read(f.type))]
        if not fixes:
            return None

        def fix(rec: dict[str, Any]) -> dict[str, Any]:
            for key, one in fixes:
                if rec.get(key) is not None:
                    rec[key] = one(rec[key])
            return rec

        self._reads[id(msg)] = fix
        return fix


def _keep(obj: Any, rec: Any) -> Any:
    return rec


def _same(value: Any) -> Any:
    return value
