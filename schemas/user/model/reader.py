"""Read a pydantic v2 model into a shape, as pydantic itself reads and writes it.

The model is read from its core schema (`Model.__pydantic_core_schema__`), the one
pydantic builds its validator and serializer from (`schemas.user.model.core_types` reads
the type nodes): a generic model (`Envelope[Posted]`, or a subclass of it) with its
parameters substituted, a recursive model through its definition (the shape then
holds itself), `Json[X]`, secrets, `use_enum_values`, aliases and `extra` as
pydantic applies them. A field's wire key is the key `model_dump_json(by_alias=True)`
writes; the key it is read under, when another, is what synthetic input uses.

The user's model is always run by the pydantic codecs: nothing here refuses a model
pydantic validates as a whole. What a derived form cannot match refuses the codecs of
derived forms (`schemas.formats.DERIVED_CODECS`); validators and computed fields are
noted as code those codecs do not run (`schemas.user.validators`), not refused; a
serializer is recorded on its field or message (`FieldShape.serializer`), and what
the derived forms make of the wire it writes is decided where they are built
(`codec.serialized`).
"""

from __future__ import annotations

import datetime
import decimal
import enum
import re
import uuid
from typing import Any, Final

import pydantic
from pydantic import BaseModel, RootModel

from schemas.errors import ConfigError
from schemas.formats import DERIVED_CODECS, Refusals
from schemas.shape import (
    NO_DEFAULT,
    FieldShape,
    Foreign,
    MessageShape,
    TypeShape,
    unique_name,
)
from schemas.unions import tag_field_of
from schemas.user.model.core_nodes import EFFECTS, CoreSchema, validator_label
from schemas.user.model.core_types import CoreTypes
from schemas.user.struct_validators import why_not

_TRANSFORMS: Final = ("str_strip_whitespace", "str_to_lower", "str_to_upper")
_CONFIG_REFUSED: Final = ("str_min_length",)
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
        model: the user's model (a generic one parametrized: `Envelope[Posted]`).
        refusals: collects what some codecs cannot carry (`Refusals.by_codec`).

    Raises:
        ConfigError: for a model pydantic cannot validate (not fully defined, a
            RootModel): one line each.
    """
    refusals = refusals if refusals is not None else Refusals()
    refusals.everyone = DERIVED_CODECS
    _complete(model, model.__name__)
    reader = _ModelReader(refusals)
    root = identifier(model.__name__)
    shape = reader.types.value(dict(model.__pydantic_core_schema__), root)
    assert isinstance(shape, MessageShape)  # noqa: S101  (a model node is a message)
    reader.finish()
    refusals.raise_any()
    return shape


def needs_round_trip(model: type[BaseModel]) -> bool:
    """True when `model` reads its own JSON only as written with `round_trip=True`
    (a `Json[...]` field: pydantic writes its value, and reads a JSON string)."""
    reader = _ModelReader(Refusals())
    reader.types.value(dict(model.__pydantic_core_schema__), model.__name__)
    return reader.types.round_trip


def identifier(name: str) -> str:
    """A class name every format accepts: `Envelope[Posted]` -> `EnvelopePosted`."""
    parts = [p for p in re.split(r"[^0-9A-Za-z_]+", name) if p]
    text = "".join(p[0].upper() + p[1:] for p in parts[1:])
    out = (parts[0] if parts else "Model") + text
    return out if out[0].isalpha() or out[0] == "_" else f"M{out}"


class _ModelReader:
    """One pass over a model tree; each model class is read once."""

    def __init__(self, refusals: Refusals) -> None:
        self._refusals = refusals
        self._done: dict[type, MessageShape] = {}
        self._names: set[str] = set()
        self.types = CoreTypes(refusals, self._message, {})

    def finish(self) -> None:
        """Find the unions' tag fields again, now that every message is read."""
        for union in self.types.unions:
            found = tag_field_of(union.members)
            if found != union.tag_field:
                object.__setattr__(union, "tag_field", found)

    def _message(self, node: CoreSchema, path: str) -> TypeShape:
        cls = node["cls"]
        if cls in self._done:
            return self._done[cls]
        if node.get("root_model"):
            return Foreign(cls, cls.__name__)
        _complete(cls, path)
        config = dict(cls.model_config)
        shape = MessageShape(
            unique_name(identifier(cls.__name__), self._names),
            source=cls,
            forbid_unknown=config.get("extra") == "forbid",
            lax=not config.get("strict"),
            frozen=bool(config.get("frozen")),
        )
        self._done[cls] = shape  # before its fields: a field may hold the model
        outer, self.types.config = self.types.config, dict(node.get("config", {}))
        self.types.config.setdefault("strict", config.get("strict"))
        self._check_model(cls, config, path)
        if node.get("serialization") is not None:
            shape.serializer = _serializer_name(cls, "model_serializers")
            self._refusals.serialized.append((path, shape.serializer))
        fields = self.types.resolve(node["schema"])
        while fields["type"] != "model-fields":  # a model validator's layer
            fields = self.types.resolve(fields["schema"])
        shape.fields = tuple(
            self._field(name, spec, f"{path}.{name}")
            for name, spec in fields.get("fields", {}).items()
        )
        self.types.config = outer
        return shape

    def _check_model(
        self, model: type[BaseModel], config: dict[str, Any], path: str
    ) -> None:
        refuse = self._refusals.add
        for key in _CONFIG_REFUSED:
            if config.get(key):
                refuse(path, f"model_config {key} changes what is accepted")
        for key in _TRANSFORMS:
            if config.get(key):
                note = (path, f"model_config {key}", EFFECTS["transform"])
                self._refusals.notes.append(note)
        if config.get("json_encoders"):
            refuse(path, "model_config json_encoders changes the JSON wire")
        decorators = model.__pydantic_decorators__
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

    def _field(self, name: str, spec: CoreSchema, path: str) -> FieldShape:
        types = self.types
        wire, read_key = _keys(name, spec, types.config)
        if spec.get("serialization_exclude"):
            self._refusals.add(
                path, "exclude=True drops the field from pydantic's JSON only"
            )
        node = types.resolve(spec["schema"])
        default: Any = NO_DEFAULT
        factory: Any = None
        if node["type"] == "default":
            if node.get("default_factory_takes_data"):
                self._refusals.add(
                    path, "a default factory that reads the other fields is not mapped"
                )
            else:
                factory = node.get("default_factory")
            has_default = "default" in node
            value = node.get("default")
            node = node["schema"]
        else:
            has_default = False
        marks = (
            len(types.validators),
            len(types.transforms),
            len(types.discriminators),
        )
        serializers = len(types.serializers)
        shape, nullable = types.field_type(node, path, own=True)
        self._note_code(path, marks)
        found = types.serializers[serializers:]
        label = next((what for _, what in found), None)
        self._refusals.serialized.extend(found)
        # Consumed: an outer field does not note its nested messages' code again.
        del types.validators[marks[0] :], types.transforms[marks[1] :]
        del types.discriminators[marks[2] :], types.serializers[serializers:]
        if has_default:
            default, factory = _default(value, shape, nullable, path, self._refusals)
        alias = None if wire == name else wire
        return FieldShape(
            name, shape, nullable, default, factory, alias, read_key, label
        )

    def _note_code(self, path: str, marks: tuple[int, int, int]) -> None:
        """Note the validators, transforms and discriminators a field's type met."""
        notes = self._refusals.notes
        for where, node, own in self.types.validators[marks[0] :]:
            if _is_decorated(node, self.types):
                continue  # noted with its model's decorators
            label = validator_label(node)
            mode = node["type"].removeprefix("function-")
            notes.append((where, label, EFFECTS[mode]))
            if own:  # a field's own: a Struct may run it
                kind = label.split(" ", 1)[0]
                func = node["function"]["function"]
                self._refusals.on_struct[(where, label)] = why_not(kind, mode, func)
        for where, what in self.types.transforms[marks[1] :]:
            notes.append((where, what, EFFECTS["transform"]))
        for where, what in self.types.discriminators[marks[2] :]:
            notes.append((where, what, EFFECTS["discriminator"]))


def _keys(
    name: str, spec: CoreSchema, config: dict[str, Any]
) -> tuple[str, str | None]:
    """The key `by_alias=True` writes the field under, and the key it is read
    under when not that one (None: the written key)."""
    wire = spec.get("serialization_alias") or name
    read = spec.get("validation_alias")
    keys: list[str] = []
    if read is None:
        keys = [name]
    elif isinstance(read, str):
        keys = [read]
    else:
        keys = [p[0] for p in read if len(p) == 1 and isinstance(p[0], str)]
    if read is not None and (
        config.get("validate_by_name") or config.get("populate_by_name")
    ):
        keys.append(name)
    if wire in keys or not keys:
        return wire, None
    return wire, keys[0]


def _is_decorated(node: CoreSchema, types: CoreTypes) -> bool:
    """A validator pydantic made from a model's decorator (noted with the model):
    a method of the model class, or a model validator around the model."""
    function = node["function"]["function"]
    cls = getattr(function, "__self__", None)
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        return True
    inner = node.get("schema")
    return inner is not None and types.resolve(inner)["type"] == "model"


def _complete(model: type[BaseModel], path: str) -> None:
    if not model.__pydantic_complete__:
        try:  # a forward reference defined after the model: resolve it now
            model.model_rebuild()
        except pydantic.PydanticUserError as exc:
            raise ConfigError(
                f"schema error: {path}: the model is not fully defined: {exc.message}"
            ) from None
    if issubclass(model, RootModel):
        raise ConfigError(
            f"schema error: {path}: a RootModel is not a message with fields"
        )


def _serializer_name(model: type[BaseModel], attr: str) -> str:
    for name in getattr(model.__pydantic_decorators__, attr):
        return f"model_serializer {name!r}"
    return "a model serializer"


def _default(
    value: Any, shape: TypeShape, nullable: bool, path: str, refusals: Refusals
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
    refusals.add(path, f"the default {type(value).__name__} value is not carried over")
    return NO_DEFAULT, None


def _where(path: str, dec: Any) -> str:
    targets = getattr(dec.info, "fields", ("*",))
    return path if "*" in targets else f"{path}.{targets[0]}"


def _effect(attr: str, mode: str) -> str:
    if attr == "computed_fields":
        return _COMPUTED_EFFECT
    if attr in ("model_validators", "root_validators"):
        return _MODEL_EFFECT
    return EFFECTS.get(mode, EFFECTS["after"])
