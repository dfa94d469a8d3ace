"""Python type annotations to shapes: what pydantic models and msgspec share.

Both sources annotate fields with the same vocabulary (`X | None`, `list[X]`,
`dict[K, V]`, `Literal`, Enum classes, `Annotated` bounds); this module maps the
parts they share and leaves the library-specific metadata to a callback.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import types
import uuid
from collections.abc import Callable
from typing import Annotated, Any, Final, Literal, Union, get_args, get_origin

from schemas.shape import (
    Choice,
    Constraints,
    ListOf,
    MapOf,
    MessageShape,
    Refusals,
    Scalar,
    ScalarKind,
    TypeShape,
    fits_64_bits,
)

_SCALARS: Final[dict[type, ScalarKind]] = {
    str: "str",
    bool: "bool",
    int: "int",
    float: "float",
    datetime.datetime: "datetime",
    uuid.UUID: "uuid",
    decimal.Decimal: "decimal",
}

WIDE_INT_CODECS: Final = ("msgspec-msgpack", "protobuf")
"""The codecs whose wire holds no int past 64 bits (MessagePack, protobuf varints)."""

_REFUSED: Final[dict[Any, str]] = {
    set: "a set has no order or duplicates; protobuf's repeated keeps both: use list[X]",
    frozenset: "a frozenset has no order or duplicates; protobuf's repeated keeps "
    "both: use list[X]",
    tuple: "a tuple decodes to a tuple in pydantic and msgspec but to a list in "
    "protobuf: use list[X]",
    datetime.date: "no protobuf type decodes to a date: use datetime",
    datetime.time: "no protobuf type decodes to a time of day",
    datetime.timedelta: "timedelta is not mapped (google.protobuf.Duration's JSON "
    "form differs from pydantic's and msgspec's)",
    Any: "Any has no protobuf type",
    object: "object has no protobuf type",
}

MetaReader = Callable[[list[Any], str], tuple[Constraints, set[str]]]
"""Reads `Annotated` metadata: (items, path) -> (bounds, markers such as `base64`)."""

MessageReader = Callable[[type, str], MessageShape | None]
"""Reads a nested class into a message shape; None when it is not a message class."""

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
            rest = [a for a in args if a is not type(None)]
            if len(rest) == len(args) - 1 and len(rest) == 1:
                shape = self.value_type(rest[0], metadata, path)
                if isinstance(shape, ListOf | MapOf):
                    return self._refusals.add(
                        path,
                        "a protobuf repeated or map field cannot be None (it has no "
                        "presence): drop the | None and default to empty",
                    ), False
                return shape, True
        return self.value_type(annotation, metadata, path), False

    def value_type(self, annotation: Any, metadata: list[Any], path: str) -> TypeShape:
        """The shape of a non-nullable value (an item, a map value or a field)."""
        annotation, metadata = _unwrap(annotation, metadata)
        refuse = self._refusals.add
        if _is_union(annotation):
            return refuse(path, _union_reason(annotation))
        bounds, markers = self._read_meta(metadata, path)
        if self._special is not None:
            shape = self._special(annotation, bounds, path)
            if shape is not None:
                return shape
        origin = get_origin(annotation)
        if origin is list:
            return self._list(annotation, bounds, path)
        if origin is dict:
            return self._map(annotation, bounds, path)
        if origin is Literal:
            return self._literal(get_args(annotation), path)
        if origin is not None and origin in _REFUSED:
            return refuse(path, _REFUSED[origin])
        if annotation in _REFUSED:
            return refuse(path, _REFUSED[annotation])
        if annotation in (list, dict):
            return refuse(path, f"a bare {annotation.__name__} has no item type")
        if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
            return self._enum(annotation, path)
        if annotation is bytes or annotation in _SCALARS:
            return self._scalar(annotation, bounds, markers, path)
        if isinstance(annotation, type):
            message = self._read_message(annotation, path)
            if message is not None:
                return message
        return refuse(path, f"{_name(annotation)} has no protobuf type")

    def _scalar(
        self, annotation: Any, bounds: Constraints, markers: set[str], path: str
    ) -> TypeShape:
        kind = "bytes" if annotation is bytes else _SCALARS[annotation]
        if kind == "int" and not fits_64_bits(bounds):
            self._refusals.add(
                path,
                "its bounds allow ints past 64 bits, which MessagePack and protobuf "
                "cannot carry",
                WIDE_INT_CODECS,
            )
        scalar = Scalar(kind, bounds)
        if self._check_scalar is not None:
            self._check_scalar(scalar, markers, path)
        return scalar

    def _list(self, annotation: Any, bounds: Constraints, path: str) -> TypeShape:
        (item_type,) = get_args(annotation) or (Any,)
        item = self._item(item_type, f"{path}[]", "a list")
        return ListOf(item, bounds)

    def _map(self, annotation: Any, bounds: Constraints, path: str) -> TypeShape:
        key_type, value_type = get_args(annotation) or (Any, Any)
        shape = self.value_type(key_type, [], f"{path}{{key}}")
        key = (
            shape
            if isinstance(shape, Scalar) and shape.kind in ("str", "int")
            else self._refusals.add(
                f"{path}{{key}}", "map keys must be str or int (protobuf and JSON)"
            )
        )
        value = self._item(value_type, f"{path}{{}}", "a map")
        return MapOf(key, value, bounds)

    def _item(self, annotation: Any, path: str, where: str) -> TypeShape:
        inner, _ = _unwrap(annotation, [])
        if _is_union(inner) and type(None) in get_args(inner):
            return self._refusals.add(
                path, f"protobuf cannot hold None inside {where} (drop the | None)"
            )
        shape = self.value_type(annotation, [], path)
        if isinstance(shape, ListOf | MapOf):
            return self._refusals.add(
                path,
                f"a list or map inside {where} needs a wrapper message in "
                "protobuf: declare a model holding it",
            )
        return shape

    def _literal(self, values: tuple[Any, ...], path: str) -> TypeShape:
        if all(isinstance(v, str) for v in values):
            return Choice(tuple(values))
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return Choice(tuple(values))
        return self._refusals.add(
            path, "a Literal must hold only str or only int values"
        )

    def _enum(self, cls: type[enum.Enum], path: str) -> TypeShape:
        values = tuple(m.value for m in cls)
        if issubclass(cls, enum.Flag):
            return self._refusals.add(path, f"{cls.__name__} is a Flag enum")
        if values and all(isinstance(v, str) for v in values):
            if issubclass(cls, str):
                return Choice(values, cls)
            return self._refusals.add(path, _plain_enum_reason(cls, "str"))
        if values and all(
            isinstance(v, int) and not isinstance(v, bool) for v in values
        ):
            if issubclass(cls, int):
                return Choice(values, cls)
            return self._refusals.add(path, _plain_enum_reason(cls, "int"))
        return self._refusals.add(
            path, f"{cls.__name__} must have only str or only int values"
        )


def _plain_enum_reason(cls: type, kind: str) -> str:
    mixin = "StrEnum" if kind == "str" else "IntEnum"
    return (
        f"{cls.__name__} is a plain Enum: protobuf decodes its values as {kind}, "
        f"which never equal a plain Enum member; derive it from {mixin}"
    )


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


def _union_reason(annotation: Any) -> str:
    names = [_name(a) for a in get_args(annotation)]
    return (
        f"a union of {' and '.join(names)} has no single protobuf type "
        "(only X | None is mapped)"
    )


def _name(annotation: Any) -> str:
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", None) or repr(annotation)
