"""Lazy views: a zero-copy reader's message behind the schema's own attribute names.

FlatBuffers' generated accessors are methods (`obj.CustomerId()`, `obj.Items(j)`) and
Cap'n Proto field names are camelCase (`obj.customerId`), but the business logic
reads `obj.customer_id`, `obj.items` on every codec. A view class per message,
built once per schema from its shape, has one property per field that calls the
format's own accessor when read, and nothing else: no field is read at decode, each
read converts the value to the Python type the other codecs hold (`str`, `int`,
`datetime`, a list, a dict, a nested view). So a lazy format's `decode` is cheap,
and reading is where it pays, as for protobuf's upb.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from schemas.shape import FieldShape, MessageShape, messages

Getter = Callable[[Any], Any]
"""Reads one field of a view (its format's reader object is `view._r`)."""


class GetterFactory(Protocol):
    def __call__(
        self,
        msg: MessageShape,
        f: FieldShape,
        view_of: Callable[[MessageShape], type[LazyView]],
    ) -> Getter: ...


class LazyView:
    """The base of every view: `_r` is the format's reader object."""

    __slots__ = ("_r",)
    _shape: MessageShape

    def __init__(self, reader: Any) -> None:
        self._r = reader

    def __repr__(self) -> str:
        return f"<{type(self).__name__} view>"


def build_views(root: MessageShape, getter: GetterFactory) -> type[LazyView]:
    """The view class of `root` (and of every message it nests)."""
    classes: dict[int, type[LazyView]] = {}

    def view_of(msg: MessageShape) -> type[LazyView]:
        return classes[id(msg)]

    ordered = messages(root)
    for msg in ordered:
        classes[id(msg)] = type(msg.name, (LazyView,), {"__slots__": (), "_shape": msg})
    for msg in ordered:
        cls = classes[id(msg)]
        for f in msg.fields:
            setattr(cls, f.name, property(getter(msg, f, view_of)))
    return classes[id(root)]


def view_to_python(obj: Any) -> Any:
    """A view, fully read, as dicts, lists and Python values (slow, for tooling).

    Keyed by the wire keys (the aliases), as `msgspec.to_builtins` keys a Struct.
    """
    if isinstance(obj, LazyView):
        return {f.wire: view_to_python(getattr(obj, f.name)) for f in obj._shape.fields}
    if isinstance(obj, list):
        return [view_to_python(v) for v in obj]
    if isinstance(obj, dict):
        return {k: view_to_python(v) for k, v in obj.items()}
    return obj
