"""Read a msgspec Struct into a shape, refusing what the other forms cannot match."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from schemas.formats import Refusals
from schemas.shape import (
    NO_DEFAULT,
    Constraints,
    FieldShape,
    MessageShape,
    unique_name,
)
from schemas.user.type_hints import AnnotationReader

_BOUNDS: Final = (
    "gt",
    "ge",
    "lt",
    "le",
    "multiple_of",
    "min_length",
    "max_length",
    "pattern",
)


def read_struct(
    struct: type[msgspec.Struct], refusals: Refusals | None = None
) -> MessageShape:
    """The shape of `struct` and the Structs it nests.

    Args:
        struct: the user's Struct.
        refusals: collects what some codecs cannot carry (`Refusals.by_codec`).

    Raises:
        ConfigError: naming every field no form can hold, one line each.
    """
    refusals = refusals if refusals is not None else Refusals()
    shape = _StructReader(refusals).message(struct, struct.__name__)
    refusals.raise_any()
    return shape


def forbids_unknown_fields(struct: type[msgspec.Struct]) -> bool:
    """Whether `struct` rejects unknown fields (the derived pydantic form follows)."""
    return bool(struct.__struct_config__.forbid_unknown_fields)


class _StructReader:
    """One pass over a Struct tree; each nested class is read once."""

    def __init__(self, refusals: Refusals) -> None:
        self._refusals = refusals
        self._done: dict[type, MessageShape] = {}
        self._names: set[str] = set()
        self._types = AnnotationReader(refusals, self._meta, self._nested)

    def message(self, struct: type[msgspec.Struct], path: str) -> MessageShape:
        """Read `struct`, reached at `path`."""
        if struct in self._done:
            return self._done[struct]
        self._check_struct(struct, path)
        shape = MessageShape(
            unique_name(struct.__name__, self._names),
            source=struct,
            forbid_unknown=forbids_unknown_fields(struct),
            frozen=struct.__struct_config__.frozen,
        )
        self._done[struct] = shape  # before its fields: a field may hold the Struct
        shape.fields = tuple(
            self._field(info, f"{path}.{info.name}")
            for info in msgspec.structs.fields(struct)
        )
        return shape

    def _nested(self, cls: type, path: str) -> MessageShape | None:
        if issubclass(cls, msgspec.Struct):
            return self.message(cls, path)
        return None

    def _check_struct(self, struct: type[msgspec.Struct], path: str) -> None:
        config = struct.__struct_config__
        if config.array_like:
            self._refusals.add(
                path, "array_like=True writes arrays that pydantic cannot read"
            )
        if config.tag is not None:
            self._refusals.add(path, "a tagged Struct adds a tag key to the wire")

    def _field(self, info: msgspec.structs.FieldInfo, path: str) -> FieldShape:
        alias = info.encode_name if info.encode_name != info.name else None
        shape, nullable = self._types.field_type(info.type, [], path)
        default: Any = NO_DEFAULT
        factory: Any = None
        if info.default_factory is not msgspec.NODEFAULT:
            factory = info.default_factory
        elif info.default is not msgspec.NODEFAULT:
            if isinstance(info.default, msgspec.Struct | list | dict):
                self._refusals.add(path, "a container default is not carried over")
            else:
                default = info.default
        return FieldShape(info.name, shape, nullable, default, factory, alias)

    def _meta(self, items: list[Any], path: str) -> tuple[Constraints, set[str]]:
        bounds: dict[str, Any] = {}
        for item in items:
            if isinstance(item, msgspec.Meta):
                bounds |= {
                    key: getattr(item, key)
                    for key in _BOUNDS
                    if getattr(item, key) is not None
                }
                if item.tz is not None:
                    bounds["tz"] = item.tz
            elif not isinstance(item, str):
                self._refusals.add(
                    path, f"annotation metadata {type(item).__name__} is not mapped"
                )
        return Constraints(**bounds), set()
