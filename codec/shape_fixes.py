"""A per-shape rewrite of a builtins tree, built once per schema.

Some codecs must change a few values of a builtins tree before their encoder takes
it (protobuf wraps each union value in its member's name; Avro writes an unbounded
Decimal as its text). `ShapeFixes` walks the shape once and returns, for each type,
either None (nothing below it changes, so the common schema pays nothing) or a
function that rewrites a value of that type: messages field by field, lists item by
item, maps value by value. A subclass says what changes at the leaves (`leaf`) and
whether a message is rewritten in place or copied (`in_place`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from schemas.shape import ListOf, MapOf, MessageShape, TypeShape

Fix = Callable[[Any], Any]


class ShapeFixes:
    """What rewrites each value of a shape; None where nothing changes."""

    in_place = False
    """Rewrite a message's dict itself (the caller's tree is its own) or a copy."""

    def __init__(self) -> None:
        self._messages: dict[int, Fix | None] = {}

    def value(self, shape: TypeShape) -> Fix | None:
        """The rewrite of a value of `shape`, None when nothing in it changes."""
        if isinstance(shape, MessageShape):
            return self._message(shape)
        if isinstance(shape, ListOf):
            item = self.value(shape.item)
            return None if item is None else (lambda v: [item(x) for x in v])
        if isinstance(shape, MapOf):
            inner = self.value(shape.value)
            if inner is None:
                return None
            return lambda v: {k: inner(x) for k, x in v.items()}
        return self.leaf(shape)

    def leaf(self, shape: TypeShape) -> Fix | None:
        """The rewrite of any other type (a scalar, a union): none by default."""
        return None

    def _message(self, msg: MessageShape) -> Fix | None:
        if id(msg) in self._messages:  # a recursive type: decided when it is done
            return lambda v: (self._messages[id(msg)] or _same)(v)
        self._messages[id(msg)] = None
        fixes = [(f.wire, one) for f in msg.fields if (one := self.value(f.type))]
        if not fixes:
            return None
        in_place = self.in_place

        def fix(record: dict[str, Any]) -> dict[str, Any]:
            out = record if in_place else dict(record)
            for key, one in fixes:
                if out.get(key) is not None:
                    out[key] = one(out[key])
            return out

        self._messages[id(msg)] = fix
        return fix


def _same(value: Any) -> Any:
    return value
