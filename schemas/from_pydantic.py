"""Read a pydantic v2 model into a shape, refusing what the other forms cannot match."""

from __future__ import annotations

import dataclasses
import datetime
import enum
from typing import Any, Final

import annotated_types
import pydantic
from pydantic import BaseModel, RootModel
from pydantic.fields import FieldInfo
from pydantic.functional_serializers import PlainSerializer, WrapSerializer
from pydantic.functional_validators import (
    AfterValidator,
    BeforeValidator,
    PlainValidator,
    WrapValidator,
)
from pydantic.types import (
    AllowInfNan,
    Base64Encoder,
    EncodedBytes,
    FailFast,
    StringConstraints,
)
from pydantic_core import PydanticUndefined

from schemas.annotations import AnnotationReader
from schemas.shape import (
    NO_DEFAULT,
    Constraints,
    FieldShape,
    MessageShape,
    Refusals,
    Scalar,
    TypeShape,
    unique_name,
)

_BOUNDS: Final = frozenset(Constraints.__dataclass_fields__) - {"tz"}
_IGNORED: Final = frozenset({"strict", "allow_inf_nan", "union_mode", "fail_fast"})
"""Metadata that changes what is accepted, never the decoded value."""

_TRANSFORMS: Final = ("str_strip_whitespace", "str_to_lower", "str_to_upper")
_CONFIG_REFUSED: Final = (*_TRANSFORMS, "coerce_numbers_to_str", "str_min_length")
_DECORATORS: Final = (
    ("validators", "validator"),
    ("field_validators", "custom validator"),
    ("root_validators", "root validator"),
    ("model_validators", "model validator"),
    ("field_serializers", "custom serializer"),
    ("model_serializers", "model serializer"),
    ("computed_fields", "computed field"),
)
_VALIDATORS: Final = (AfterValidator, BeforeValidator, PlainValidator, WrapValidator)
_WHY_CODE: Final = (
    "the derived msgspec and protobuf forms cannot run it, so they could decode "
    "to other values"
)


def read_model(model: type[BaseModel]) -> MessageShape:
    """The shape of `model` and the models it nests.

    Raises:
        ConfigError: naming every field that cannot be mapped, with its path.
    """
    refusals = Refusals()
    shape = _ModelReader(refusals).message(model, model.__name__)
    refusals.raise_any()
    return shape


class _ModelReader:
    """One pass over a model tree; each nested class is read once."""

    def __init__(self, refusals: Refusals) -> None:
        self._refusals = refusals
        self._done: dict[type, MessageShape] = {}
        self._open: set[type] = set()
        self._names: set[str] = set()
        self._config: dict[str, Any] = {}
        self._types = AnnotationReader(
            refusals,
            self._meta,
            self._nested,
            special=self._special,
            check_scalar=self._check_scalar,
        )

    def message(self, model: type[BaseModel], path: str) -> MessageShape:
        """Read `model`, reached at `path`."""
        if model in self._done:
            return self._done[model]
        if model in self._open:
            return _placeholder(self._refusals, path, model)
        self._open.add(model)
        outer, self._config = self._config, dict(model.model_config)
        self._check_model(model, path)
        fields = tuple(
            self._field(name, info, f"{path}.{name}")
            for name, info in model.model_fields.items()
        )
        self._config = outer
        self._open.discard(model)
        name = unique_name(model.__name__, self._names)
        shape = MessageShape(name, fields, source=model)
        self._done[model] = shape
        return shape

    def _nested(self, cls: type, path: str) -> MessageShape | None:
        if issubclass(cls, BaseModel):
            return self.message(cls, path)
        return None

    def _check_model(self, model: type[BaseModel], path: str) -> None:
        refuse = self._refusals.add
        if not model.__pydantic_complete__:
            try:  # a forward reference defined after the model: resolve it now
                model.model_rebuild()
            except pydantic.PydanticUserError as exc:
                refuse(path, f"the model is not fully defined: {exc.message}")
        if issubclass(model, RootModel):
            refuse(path, "a RootModel is not a message with fields")
        if self._config.get("extra") == "allow":
            refuse(path, "extra='allow' keeps unknown fields that the other forms drop")
        for key in _CONFIG_REFUSED:
            if self._config.get(key):
                refuse(path, f"model_config {key} changes values on the way in")
        if self._config.get("json_encoders"):
            refuse(path, "model_config json_encoders changes the JSON wire")
        decorators = model.__pydantic_decorators__
        for attr, what in _DECORATORS:
            for name, dec in getattr(decorators, attr).items():
                targets = getattr(dec.info, "fields", ("*",))
                where = path if "*" in targets else f"{path}.{targets[0]}"
                refuse(where, f"{what} {name!r}: {_WHY_CODE}")

    def _field(self, name: str, info: FieldInfo, path: str) -> FieldShape:
        refuse = self._refusals.add
        if info.alias or info.validation_alias or info.serialization_alias:
            refuse(path, "an alias renames the wire key; aliases are not mapped")
        if info.exclude:
            refuse(path, "exclude=True drops the field from pydantic's JSON only")
        shape, nullable = self._types.field_type(info.annotation, info.metadata, path)
        default: Any = NO_DEFAULT
        factory: Any = info.default_factory
        if factory is not None and factory not in (list, dict):
            refuse(path, "only list and dict default factories are carried over")
            factory = None
        if info.default is not PydanticUndefined:
            default, factory = _default(info.default, shape, nullable, path, refuse)
        return FieldShape(name, shape, nullable, default, factory)

    def _meta(self, items: list[Any], path: str) -> tuple[Constraints, set[str]]:
        bounds: dict[str, Any] = {}
        markers: set[str] = set()
        for item in _expand(items):
            self._meta_item(item, path, bounds, markers)
        return Constraints(**bounds), markers

    def _meta_item(
        self, item: Any, path: str, bounds: dict[str, Any], markers: set[str]
    ) -> None:
        refuse = self._refusals.add
        if isinstance(item, _VALIDATORS):
            refuse(path, f"custom validator {_func(item)}: {_WHY_CODE}")
        elif isinstance(item, PlainSerializer | WrapSerializer):
            refuse(path, f"custom serializer {_func(item)} changes the JSON wire")
        elif isinstance(item, EncodedBytes):
            if item.encoder is Base64Encoder:
                markers.add("base64")
            else:
                refuse(path, f"{item.encoder.__name__}: msgspec writes standard base64")
        elif isinstance(item, StringConstraints):
            self._string(item, path, bounds)
        elif isinstance(item, annotated_types.BaseMetadata | AllowInfNan | FailFast):
            for key, value in _attributes(item).items():
                if value is None or key in _IGNORED:
                    continue
                if key in _BOUNDS:
                    bounds[key] = value
                else:
                    refuse(path, f"{type(item).__name__}({key}=...) is not mapped")
        elif not isinstance(item, str):  # a bare string is documentation
            refuse(path, f"annotation metadata {type(item).__name__} is not mapped")

    def _string(
        self, item: StringConstraints, path: str, bounds: dict[str, Any]
    ) -> None:
        for key in ("strip_whitespace", "to_upper", "to_lower"):
            if getattr(item, key):
                self._refusals.add(
                    path, f"StringConstraints({key}=True) changes values"
                )
        for key in ("min_length", "max_length", "pattern"):
            if getattr(item, key) is not None:
                bounds[key] = getattr(item, key)

    def _special(
        self, annotation: Any, bounds: Constraints, path: str
    ) -> TypeShape | None:
        if annotation is pydantic.AwareDatetime:
            return Scalar("datetime", bounds.merged(tz=True))
        if annotation is pydantic.NaiveDatetime:
            return self._refusals.add(
                path,
                "a protobuf Timestamp is an instant: it never equals a naive datetime",
            )
        if annotation in (pydantic.PastDatetime, pydantic.FutureDatetime):
            return self._refusals.add(path, "a time-dependent check is not mapped")
        return None

    def _check_scalar(self, scalar: Scalar, markers: set[str], path: str) -> None:
        if scalar.kind != "bytes" or "base64" in markers:
            return
        ser = self._config.get("ser_json_bytes", "utf8")
        how = "URL-safe base64" if ser == "base64" else f"{ser} text"
        self._refusals.add(
            path,
            f"pydantic writes bytes to JSON as {how} (ser_json_bytes={ser!r}) and "
            "msgspec as standard base64, which msgspec alone reads back: declare "
            "it pydantic.Base64Bytes",
        )


def _expand(items: list[Any]) -> list[Any]:
    """Flatten nested `Field(...)` and grouped metadata into single items."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, FieldInfo):
            out.extend(_expand(item.metadata))
        elif isinstance(item, annotated_types.GroupedMetadata) and not isinstance(
            item, StringConstraints
        ):
            out.extend(_expand(list(item)))
        else:
            out.append(item)
    return out


def _attributes(item: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(item):
        return {f.name: getattr(item, f.name) for f in dataclasses.fields(item)}
    return dict(vars(item))


def _func(item: Any) -> str:
    return repr(getattr(item.func, "__name__", "function"))


def _default(
    value: Any, shape: TypeShape, nullable: bool, path: str, refuse: Any
) -> tuple[Any, Any]:
    """A field default as (value, factory), or a refusal for unmappable ones."""
    if value is None and nullable:
        return None, None
    if value == [] or value == {}:
        return NO_DEFAULT, type(value)
    immutable = (bool, int, float, str, bytes, datetime.datetime, enum.Enum)
    if isinstance(value, immutable) and not isinstance(shape, MessageShape):
        return value, None
    refuse(path, f"the default {type(value).__name__} value is not carried over")
    return NO_DEFAULT, None


def _placeholder(refusals: Refusals, path: str, model: type) -> MessageShape:
    refusals.add(
        path, f"{model.__name__} refers to itself: recursive models are not mapped"
    )
    return MessageShape(model.__name__)
