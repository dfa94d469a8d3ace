"""Python type annotations to shapes: what pydantic models and msgspec share.

Both sources annotate fields with the same vocabulary (`X | None`, `list[X]`,
`dict[K, V]`, `Literal`, Enum classes, `Annotated` bounds); this module maps the
parts they share and leaves the library-specific metadata to a callback. Nothing is
refused here for a format's sake: the shape holds what the source holds, and
`schemas.formats` says which codec cannot carry which part. What has no shape kind
(`IPv4Address`, `Any`, a class no reader knows) is `Foreign`, run by the user's own
form only.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import types
import uuid
from collections.abc import Callable
from typing import Annotated, Any, Final, Literal, Union, get_args, get_origin

from schemas.formats import Refusals
from schemas.shape import (
    Choice,
    Constraints,
    Container,
    Foreign,
    ListOf,
    MapOf,
    Scalar,
    ScalarKind,
    TupleOf,
    TypeShape,
    UnionOf,
)
from schemas.unions import tag_field_of
from schemas.user.foreign_types import FOREIGN

_SCALARS: Final[dict[type, ScalarKind]] = {
    str: "str",
    bool: "bool",
    int: "int",
    float: "float",
    datetime.datetime: "datetime",
    uuid.UUID: "uuid",
    decimal.Decimal: "decimal",
    datetime.date: "date",
    datetime.time: "time",
    datetime.timedelta: "timedelta",
}

_COLLECTIONS: Final[dict[Any, Container]] = {
    list: "list",
    set: "set",
    frozenset: "frozenset",
}


MetaReader = Callable[[list[Any], str], tuple[Constraints, set[str]]]
"""Reads `Annotated` metadata: (items, path) -> (bounds, markers such as `base64`)."""

MessageReader = Callable[[type, str], TypeShape | None]
"""Reads a nested class into a shape (a message); None when no reader knows it."""

SpecialReader = Callable[[Any, Constraints, str], TypeShape | None]
"""Maps a source's own types (e.g. pydantic's `AwareDatetime`); None: not special."""


class AnnotationReader:
    """Maps one source's annotations to shapes, recording refusals with their path.

    Args:
        refusals: where unmappable fields are recorded.
        read_meta: the source's reader of `Annotated` metadata.
        read_message: the source's reader of nested message classes.
        special: the source's mapping of its own types, tried first.
        check_scalar: a last check of each scalar (e.g. pydantic's bytes rules).
    """

    def __init__(
        self,
        refusals: Refusals,
        read_meta: MetaReader,
        read_message: MessageReader,
        special: SpecialReader | None = None,
        check_scalar: Callable[[Scalar, set[str], str], None] | None = None,
    ) -> None:
        self._refusals = refusals
        self._read_meta = read_meta
        self._read_message = read_message
        self._special = special
        self._check_scalar = check_scalar

    def field_type(
        self, annotation: Any, metadata: list[Any], path: str
    ) -> tuple[TypeShape, bool]:
        """The shape of a field's annotation, and whether it is nullable.

        Args:
            annotation: the field's annotation.
            metadata: field-level metadata that applies to the non-None type.
            path: the field's dotted path, for refusals.
        """
        annotation, metadata = _unwrap(annotation, metadata)
        if _is_union(annotation):
            args = get_args(annotation)
            rest = tuple(a for a in args if a is not type(None))
            if len(rest) < len(args):
                if len(rest) == 1:
                    return self.value_type(rest[0], metadata, path), True
                return self._union(rest, False, path, metadata), True
        return self.value_type(annotation, metadata, path), False

    def value_type(self, annotation: Any, metadata: list[Any], path: str) -> TypeShape:
        """The shape of a non-nullable value (an item, a map value or a field)."""
        annotation, metadata = _unwrap(annotation, metadata)
        if _is_union(annotation):
            args = get_args(annotation)
            rest = tuple(a for a in args if a is not type(None))
            return self._union(rest, len(rest) < len(args), path, metadata)
        bounds, markers = self._read_meta(metadata, path)
        if self._special is not None:
            shape = self._special(annotation, bounds, path)
            if shape is not None:
                return shape
        origin = get_origin(annotation)
        if origin in _COLLECTIONS:
            return self._list(annotation, bounds, path, _COLLECTIONS[origin])
        if origin is tuple:
            return self._tuple(get_args(annotation), bounds, path)
        if origin is dict:
            return self._map(annotation, bounds, path)
        if origin is Literal:
            return self._literal(annotation, path)
        if annotation in FOREIGN:
            return Foreign(annotation, *FOREIGN[annotation])
        if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
            return self._enum(annotation, path)
        if annotation is bytes or annotation in _SCALARS:
            return self._scalar(annotation, bounds, markers, path)
        if annotation in (list, dict, set, frozenset, tuple):
            return Foreign(annotation, f"a bare {annotation.__name__}")
        if isinstance(annotation, type):
            message = self._read_message(annotation, path)
            if message is not None:
                return message
        return Foreign(annotation, _name(annotation))

    def _union(
        self, members: tuple[Any, ...], nullable: bool, path: str, metadata: list[Any]
    ) -> TypeShape:
        self._read_meta(metadata, path)  # a callable Discriminator is noted there
        shapes = tuple(self.value_type(a, [], f"{path}<{_name(a)}>") for a in members)
        return UnionOf(shapes, nullable, tag_field_of(shapes))

    def _scalar(
        self, annotation: Any, bounds: Constraints, markers: set[str], path: str
    ) -> TypeShape:
        kind = "bytes" if annotation is bytes else _SCALARS[annotation]
        scalar = Scalar(kind, bounds)
        if self._check_scalar is not None:
            self._check_scalar(scalar, markers, path)
        return scalar

    def _list(
        self, annotation: Any, bounds: Constraints, path: str, container: Container
    ) -> TypeShape:
        (item_type,) = get_args(annotation) or (Any,)
        return ListOf(self.value_type(item_type, [], f"{path}[]"), bounds, container)

    def _tuple(
        self, args: tuple[Any, ...], bounds: Constraints, path: str
    ) -> TypeShape:
        if len(args) == 2 and args[1] is Ellipsis:
            item = self.value_type(args[0], [], f"{path}[]")
            return ListOf(item, bounds, "tuple")
        if not args or args == ((),):
            return Foreign(tuple[()], "tuple[()]", lambda rng: [])
        return TupleOf(
            tuple(self.value_type(a, [], f"{path}[{i}]") for i, a in enumerate(args))
        )

    def _map(self, annotation: Any, bounds: Constraints, path: str) -> TypeShape:
        key_type, value_type = get_args(annotation) or (Any, Any)
        key = self.value_type(key_type, [], f"{path}{{key}}")
        if not isinstance(key, Scalar | Choice):
            self._refusals.add(
                f"{path}{{key}}", f"a {_name(key_type)} map key is not mapped"
            )
            key = Scalar("str")
        value = self.value_type(value_type, [], f"{path}{{}}")
        return MapOf(key, value, bounds)

    def _literal(self, annotation: Any, path: str) -> TypeShape:
        values = get_args(annotation)
        if all(isinstance(v, str) for v in values):
            return Choice(tuple(values))
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return Choice(tuple(values))
        self._refusals.add(path, "a Literal of mixed value kinds is not mapped")
        return Foreign(annotation, "Literal", _pick(list(values)))

    def _enum(self, cls: type[enum.Enum], path: str) -> TypeShape:
        values = tuple(m.value for m in cls)
        same_kind = all(isinstance(v, str) for v in values) or all(
            isinstance(v, int) and not isinstance(v, bool) for v in values
        )
        if values and same_kind and not issubclass(cls, enum.Flag):
            return Choice(values, cls)
        why = "a Flag enum" if issubclass(cls, enum.Flag) else "of mixed value kinds"
        self._refusals.add(path, f"{cls.__name__} is {why}: not mapped")
        return Foreign(cls, cls.__name__, _pick(list(values)) if values else None)


def _pick(values: list[Any]) -> Callable[[Any], Any]:
    return lambda rng: rng.choice(values)


def _unwrap(annotation: Any, metadata: list[Any]) -> tuple[Any, list[Any]]:
    """Strip `Annotated` layers, collecting their metadata (outermost last)."""
    collected = list(metadata)
    while get_origin(annotation) is Annotated:
        base, *extra = get_args(annotation)
        collected = [*extra, *collected]
        annotation = base
    return annotation, collected


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def _name(annotation: Any) -> str:
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", None) or repr(annotation)
