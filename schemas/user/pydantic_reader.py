"""Read a pydantic v2 model into a shape, refusing the derived forms what they cannot match.

The user's model is always run by the pydantic codecs: nothing here refuses a model
pydantic validates as a whole. What a derived form cannot match (a serializer, an
alias read under another key) refuses the codecs of derived forms
(`schemas.formats.DERIVED_CODECS`); validators and computed fields are noted as code
those codecs do not run (`schemas.user.validators`), not refused. Aliases are the wire keys (what `model_dump(by_alias=True)` writes); `extra` and
lax mode are recorded on each message shape, so the derived forms can follow them
or the check can say which codec differs. Field metadata: `schemas.user.field_bounds`.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import uuid
from typing import Any, Final

import pydantic
from pydantic import BaseModel, RootModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from schemas.errors import ConfigError
from schemas.formats import DERIVED_CODECS, Refusals
from schemas.shape import (
    NO_DEFAULT,
    FieldShape,
    Foreign,
    MessageShape,
    Scalar,
    TypeShape,
    unique_name,
)
from schemas.user.field_bounds import EFFECTS, MODES, VALIDATORS, MetaReader, note_label
from schemas.user.struct_validators import why_not
from schemas.user.type_hints import AnnotationReader

_TRANSFORMS: Final = ("str_strip_whitespace", "str_to_lower", "str_to_upper")
_CONFIG_REFUSED: Final = ("str_min_length",)
_REFUSED_CODE: Final = (
    ("field_serializers", "custom serializer"),
    ("model_serializers", "model serializer"),
)
_NOTED_CODE: Final = (
    ("validators", "validator"),
    ("field_validators", "field_validator"),
    ("root_validators", "root_validator"),
    ("model_validators", "model_validator"),
    ("computed_fields", "computed_field"),
)
_MODEL_EFFECT: Final = (
    "the messages it rejects are accepted and the values it sets arrive as sent"
)
_COMPUTED_EFFECT: Final = (
    "the decoded object has no such attribute, and pydantic writes it to JSON "
    "where the derived forms do not"
)


def read_model(
    model: type[BaseModel], refusals: Refusals | None = None
) -> MessageShape:
    """The shape of `model` and the models it nests.

    Args:
        model: the user's model.
        refusals: collects what some codecs cannot carry (`Refusals.by_codec`).

    Raises:
        ConfigError: for a model pydantic cannot validate (not fully defined, a
            RootModel): one line each.
    """
    refusals = refusals if refusals is not None else Refusals()
    refusals.everyone = DERIVED_CODECS
    shape = _ModelReader(refusals).message(model, model.__name__)
    assert isinstance(shape, MessageShape)  # noqa: S101  (the root is never open)
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
        meta = MetaReader(refusals)
        self._types = AnnotationReader(
            refusals,
            meta.read,
            self._nested,
            special=meta.special,
            check_scalar=self._check_scalar,
        )

    def message(self, model: type[BaseModel], path: str) -> MessageShape | Foreign:
        """Read `model`, reached at `path` (a `Foreign` when inside itself)."""
        if model in self._done:
            return self._done[model]
        if model in self._open:
            return _recursive(model)
        self._open.add(model)
        outer, self._config = self._config, dict(model.model_config)
        self._check_model(model, path)
        fields = tuple(
            self._field(name, info, f"{path}.{name}")
            for name, info in model.model_fields.items()
        )
        config, self._config = self._config, outer
        self._open.discard(model)
        name = unique_name(model.__name__, self._names)
        shape = MessageShape(
            name,
            fields,
            source=model,
            forbid_unknown=config.get("extra") == "forbid",
            lax=not config.get("strict"),
        )
        self._done[model] = shape
        return shape

    def _nested(self, cls: type, path: str) -> TypeShape | None:
        if issubclass(cls, RootModel):
            return Foreign(cls, cls.__name__)
        if issubclass(cls, BaseModel):
            return self.message(cls, path)
        return None

    def _check_model(self, model: type[BaseModel], path: str) -> None:
        refuse = self._refusals.add
        if not model.__pydantic_complete__:
            try:  # a forward reference defined after the model: resolve it now
                model.model_rebuild()
            except pydantic.PydanticUserError as exc:
                raise ConfigError(
                    f"schema error: {path}: the model is not fully defined: "
                    f"{exc.message}"
                ) from None
        if issubclass(model, RootModel):
            raise ConfigError(
                f"schema error: {path}: a RootModel is not a message with fields"
            )
        for key in _CONFIG_REFUSED:
            if self._config.get(key):
                refuse(path, f"model_config {key} changes what is accepted")
        for key in _TRANSFORMS:
            if self._config.get(key):
                note = (path, f"model_config {key}", EFFECTS["transform"])
                self._refusals.notes.append(note)
        if self._config.get("json_encoders"):
            refuse(path, "model_config json_encoders changes the JSON wire")
        decorators = model.__pydantic_decorators__
        for attr, what in _REFUSED_CODE:
            for name, dec in getattr(decorators, attr).items():
                refuse(_where(path, dec), f"{what} {name!r} changes the JSON wire")
        for attr, what in _NOTED_CODE:
            for name, dec in getattr(decorators, attr).items():
                mode = getattr(dec.info, "mode", "")
                label = f"{what}{f'(mode={mode!r})' if mode else ''} {name!r}"
                self._refusals.notes.append(
                    (_where(path, dec), label, _effect(attr, mode))
                )
                self._refusals.on_struct[(_where(path, dec), label)] = why_not(
                    what, mode, dec.func
                )

    def _field(self, name: str, info: FieldInfo, path: str) -> FieldShape:
        refuse = self._refusals.add
        alias = self._alias(info, path)
        if info.exclude:
            refuse(path, "exclude=True drops the field from pydantic's JSON only")
        shape, nullable = self._types.field_type(info.annotation, info.metadata, path)
        for item in info.metadata:  # a field's own validators (not nested ones)
            if isinstance(item, VALIDATORS):
                mode = MODES[type(item)]
                self._refusals.on_struct[(path, note_label(item))] = why_not(
                    type(item).__name__, mode, item.func
                )
        default: Any = NO_DEFAULT
        factory: Any = info.default_factory
        if factory is not None and getattr(info, "default_factory_takes_data", False):
            refuse(path, "a default factory that reads the other fields is not mapped")
            factory = None
        if info.default is not PydanticUndefined:
            default, factory = _default(info.default, shape, nullable, path, refuse)
        wire = None if alias in (None, name) else alias
        return FieldShape(name, shape, nullable, default, factory, wire)

    def _alias(self, info: FieldInfo, path: str) -> str | None:
        """The wire key: the alias pydantic writes with `by_alias=True`."""
        written = info.serialization_alias or info.alias
        read = info.validation_alias if info.validation_alias is not None else written
        if read is not None and not isinstance(read, str):
            self._refusals.add(
                path,
                "validation_alias with several or nested keys reads keys the field "
                "is not written under: the other forms read and write one key",
            )
        elif read != written:
            self._refusals.add(
                path,
                f"it is read under {read!r} but written under {written!r}: the "
                "other forms read and write one key",
            )
        return written

    def _check_scalar(self, scalar: Scalar, markers: set[str], path: str) -> None:
        if scalar.kind != "bytes":
            return
        ser = self._config.get("ser_json_bytes", "utf8")
        val = self._config.get("val_json_bytes", "utf8")
        configured = [
            f"{key}={value!r}"
            for key, value in (("ser_json_bytes", ser), ("val_json_bytes", val))
            if value != "utf8"
        ]
        if "base64" in markers:
            if configured:  # pydantic then codes the field's base64 twice
                self._refusals.add(path, _twice(configured))
            return
        self._refusals.add(path, _bytes_hint(ser, configured))


def _bytes_hint(ser: str, configured: list[str]) -> str:
    """Why msgspec cannot read pydantic's bytes, and what declaring them
    `Base64Bytes` breaks (a hint must say what it does to existing messages)."""
    how = "URL-safe base64" if ser == "base64" else f"{ser} text"
    drop = f" and removing {', '.join(configured)}" if configured else ""
    return (
        f"pydantic writes bytes to JSON as {how} (ser_json_bytes={ser!r}) and msgspec "
        f"as standard base64: declaring it pydantic.Base64Bytes{drop} makes standard "
        f"base64 the JSON wire of every codec, and the messages already written as "
        f"{how} then fail to decode or decode to other bytes"
    )


def _twice(configured: list[str]) -> str:
    return (
        f"Base64Bytes with model_config {', '.join(configured)}: pydantic codes the "
        "field's base64 twice (its own and the model's), msgspec once; remove "
        f"{'it' if len(configured) == 1 else 'them'} and the messages already "
        "written (base64 of base64) no longer decode"
    )


def _default(
    value: Any, shape: TypeShape, nullable: bool, path: str, refuse: Any
) -> tuple[Any, Any]:
    """A field default as (value, factory), or a refusal for unmappable ones."""
    if value is None and nullable:
        return None, None
    if isinstance(value, list | dict | set) and not value:  # a copy for each object
        return NO_DEFAULT, type(value)
    immutable = (
        bool,
        int,
        float,
        str,
        bytes,
        datetime.date,  # datetime.datetime too
        datetime.time,
        datetime.timedelta,
        enum.Enum,
        uuid.UUID,
        decimal.Decimal,
        tuple,
        frozenset,
    )
    if isinstance(value, immutable) and not isinstance(shape, MessageShape):
        return value, None
    refuse(path, f"the default {type(value).__name__} value is not carried over")
    return NO_DEFAULT, None


def _recursive(model: type) -> Foreign:
    """A model reached inside itself: only the user's own form holds the cycle."""
    return Foreign(model, f"{model.__name__} (recursive)")


def _where(path: str, dec: Any) -> str:
    targets = getattr(dec.info, "fields", ("*",))
    return path if "*" in targets else f"{path}.{targets[0]}"


def _effect(attr: str, mode: str) -> str:
    if attr == "computed_fields":
        return _COMPUTED_EFFECT
    if attr in ("model_validators", "root_validators"):
        return _MODEL_EFFECT
    return EFFECTS.get(mode, EFFECTS["after"])
