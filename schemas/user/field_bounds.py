"""Read a pydantic field's metadata (`Field(...)` keywords, `Annotated` items) into bounds.

What changes only what is accepted (`strict`, `allow_inf_nan`...) is ignored; what
bounds a value (`ge`, `max_length`, `pattern`, `max_digits`...) becomes `Constraints`;
validators are noted as code the derived forms do not run (`Refusals.notes`);
serializers and unknown metadata refuse the derived forms' codecs, in plain words.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

import annotated_types
import pydantic
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

from schemas.formats import Refusals
from schemas.shape import Constraints, Foreign, Scalar, TypeShape

BOUNDS: Final = frozenset(Constraints.__dataclass_fields__) - {"tz"}
_IGNORED: Final = frozenset(
    {"strict", "allow_inf_nan", "union_mode", "fail_fast", "coerce_numbers_to_str"}
)
"""Metadata that changes what is accepted, never the decoded value."""

VALIDATORS: Final = (AfterValidator, BeforeValidator, PlainValidator, WrapValidator)
EFFECTS: Final = {
    "after": "values arrive as sent: what it changes is not changed, what it "
    "rejects is accepted",
    "before": "input is not converted first: what it would convert is rejected "
    "or read as sent",
    "wrap": "pydantic's parsing of it is replaced by yours there: the derived "
    "form checks the declared type only",
    "plain": "pydantic's parsing of it is replaced by yours there: the derived "
    "form checks the declared type only",
    "transform": "strings are not changed on the way in",
    "discriminator": "the member is picked by its Literal tag field alone: a "
    "message your function maps otherwise (by another key, or with no tag) is "
    "rejected, or decoded as the member its tag names",
}
"""What a validator that a codec does not run means for the values it decodes."""
MODES: Final = {
    AfterValidator: "after",
    BeforeValidator: "before",
    PlainValidator: "plain",
    WrapValidator: "wrap",
}


class MetaReader:
    """Reads one model tree's field metadata, recording refusals with their path."""

    def __init__(self, refusals: Refusals) -> None:
        self._refusals = refusals

    def read(self, items: list[Any], path: str) -> tuple[Constraints, set[str]]:
        """The bounds and markers (`base64`) of a field's metadata items."""
        bounds: dict[str, Any] = {}
        markers: set[str] = set()
        for item in _expand(items):
            self._item(item, path, bounds, markers)
        return Constraints(**bounds), markers

    def _item(
        self, item: Any, path: str, bounds: dict[str, Any], markers: set[str]
    ) -> None:
        refuse = self._refusals.add
        if isinstance(item, VALIDATORS):
            mode = MODES[type(item)]
            self._refusals.notes.append((path, note_label(item), EFFECTS[mode]))
        elif isinstance(item, PlainSerializer | WrapSerializer):
            refuse(path, f"custom serializer {_func(item)} changes the JSON wire")
        elif isinstance(item, EncodedBytes):
            if item.encoder is Base64Encoder:
                markers.add("base64")
            else:
                refuse(path, f"{item.encoder.__name__}: msgspec writes standard base64")
        elif isinstance(item, StringConstraints):
            self._string(item, path, bounds)
        elif _is_metadata(item):
            for key, value in _attributes(item).items():
                if value is None or key in _IGNORED:
                    continue
                if key in BOUNDS:
                    bounds[key] = value
                else:
                    refuse(path, f"{_spelling(item, key)} is not mapped")
        elif isinstance(item, pydantic.Discriminator) and callable(
            item.discriminator
        ):  # the team's code picks the member; the derived forms read the tag
            what = f"Discriminator {_name(item.discriminator)}"
            self._refusals.notes.append((path, what, EFFECTS["discriminator"]))
        elif isinstance(item, pydantic.Discriminator | pydantic.Tag):
            pass  # picks a union member: the tag field the shape finds does the same
        elif item is None:
            pass  # conint/confloat put None where a keyword was not given
        elif not isinstance(item, str):  # a bare string is documentation
            refuse(path, f"the annotation {_public_name(item)} is not mapped")

    def _string(
        self, item: StringConstraints, path: str, bounds: dict[str, Any]
    ) -> None:
        for key in ("strip_whitespace", "to_upper", "to_lower"):
            if getattr(item, key):
                what = f"StringConstraints({key}=True)"
                self._refusals.notes.append((path, what, EFFECTS["transform"]))
        for key in ("min_length", "max_length", "pattern"):
            if getattr(item, key) is not None:
                bounds[key] = getattr(item, key)

    def special(
        self, annotation: Any, bounds: Constraints, path: str
    ) -> TypeShape | None:
        """pydantic's own datetime and URL types; None for any other annotation."""
        if annotation is pydantic.AwareDatetime:
            return Scalar("datetime", bounds.merged(tz=True))
        if annotation is pydantic.NaiveDatetime:
            return Scalar("datetime", _naive(bounds))
        if annotation in (pydantic.PastDatetime, pydantic.FutureDatetime):
            self._refusals.add(path, "a time-dependent check is not mapped")
            return Scalar("datetime", bounds)
        if isinstance(annotation, type) and issubclass(annotation, _URLS):
            reader = pydantic.TypeAdapter(annotation).validate_python
            return Foreign(annotation, annotation.__name__, _sample_url, reader)
        return None


_URLS: Final = (pydantic.AnyUrl, pydantic.networks._BaseUrl)


def _sample_url(rng: Any) -> str:
    return f"https://example.com/track/{rng.randrange(10**6)}"


def _naive(bounds: Constraints) -> Constraints:
    return Constraints(**(bounds.items() | {"tz": False}))


def _is_metadata(item: Any) -> bool:
    """annotated_types bounds, or pydantic's own `Field(...)` keyword holders."""
    if isinstance(item, annotated_types.BaseMetadata | AllowInfNan | FailFast):
        return True
    # Field(max_digits=..., pattern=...) holds them in a private pydantic class.
    return type(item).__module__.startswith("pydantic") and type(
        item
    ).__name__.startswith("_Pydantic")


def _spelling(item: Any, key: str) -> str:
    """How the user wrote it: `Field(key=...)` for pydantic's private holders."""
    name = type(item).__name__
    return f"Field({key}=...)" if name.startswith("_") else f"{name}({key}=...)"


def _public_name(item: Any) -> str:
    name = type(item).__name__
    return "Field(...) metadata" if name.startswith("_") else name


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


def note_label(item: Any) -> str:
    """How a validator annotation is named in the notes: `AfterValidator 'f'`."""
    return f"{type(item).__name__} {_func(item)}"


def _func(item: Any) -> str:
    return _name(item.func)


def _name(func: Any) -> str:
    return repr(getattr(func, "__name__", "function"))
