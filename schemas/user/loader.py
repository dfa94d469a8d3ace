"""`load_schema("MODULE:NAME" | "FILE.proto:Message")`: a user's type in all three forms.

The user's own form is used as is (a pydantic model keeps its strict or lax setting,
a msgspec Struct its options, a `.proto` its field types); only the missing forms are
derived, in process and deterministically, from the type's shape.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

import msgspec
from google.protobuf import descriptor_pb2
from google.protobuf.message import Message
from pydantic import BaseModel

from schemas.derive.msgspec_structs import build_structs
from schemas.derive.proto_file import build_file, message_class
from schemas.derive.pydantic_models import build_models
from schemas.errors import ConfigError
from schemas.formats import DERIVED_CODECS, Refusals, carriage
from schemas.prototext.parser import parse_proto
from schemas.shape import MessageShape, messages
from schemas.user.model.reader import read_model
from schemas.user.model.serialized import serializer_refusals
from schemas.user.msgspec_reader import read_struct
from schemas.user.proto_reader import full_message_name, read_proto
from schemas.user.struct_validators import RUN_BY, post_init

SourceKind = Literal["pydantic", "msgspec", "proto"]


@dataclass(frozen=True, slots=True)
class UserSchema:
    """A user's message type in the three forms the codecs take, like `Schema`.

    Attributes:
        name: the spec it was loaded from (`orders:Order`, `orders.proto:Order`).
        struct: the msgspec form (the user's Struct, or derived).
        model: the pydantic form (the user's model, or derived).
        proto: the protobuf form (from the user's `.proto`, or derived).
        shape: what the forms have in common; every derivation starts here.
        source: which form is the user's own.
        proto_file: the protobuf file the `proto` class comes from.
        refused: codecs that cannot carry some field, by codec name, with one
            "PATH: REASON" line per field; the other codecs run.
        notes: code of the user's form the derived forms do not run (validators,
            computed fields), as (path, what, effect) (`schemas.user.validators`).
    """

    name: str
    struct: type[msgspec.Struct]
    model: type[BaseModel]
    proto: type[Message]
    shape: MessageShape
    source: SourceKind
    proto_file: descriptor_pb2.FileDescriptorProto
    refused: dict[str, tuple[str, ...]] = field(default_factory=dict)
    notes: tuple[tuple[str, str, str], ...] = ()
    on_struct: tuple[tuple[str, str, str], ...] = ()
    validators_run_by: tuple[str, ...] = ()
    verdicts: dict[str, str | None] = field(default_factory=dict, compare=False)
    """codec -> its refusal (None: it carries the schema), once decided
    (`codec.codec_refusal`): every command asks, and the answer does not change."""

    def with_validators(self) -> UserSchema:
        """This schema with a Struct that runs the model's after validators
        (`--run-validators`: `schemas.user.struct_validators`); itself when the
        model has none a Struct can run."""
        runnable = any(not why for _, _, why in self.on_struct)
        if self.source != "pydantic" or not runnable:
            return self
        post_inits = {}
        for msg in messages(self.shape):
            post = None if msg.source is None else post_init(msg.source)
            if post is not None:
                post_inits[id(msg)] = post
        struct = build_structs(self.shape, post_inits)
        return replace(self, struct=struct, validators_run_by=RUN_BY)

    def refusal(self, codec: str, more: tuple[str, ...] = ()) -> str | None:
        """Why `codec` cannot run this schema (one line per field), or None.

        Args:
            codec: a registry key.
            more: further "PATH: REASON" lines (a derived schema's own rules).
        """
        lines = (*self.refused.get(codec, ()), *more)
        if not lines:
            return None
        where = "".join(f"\n  {line}" for line in lines)
        fields = "a field" if len(lines) == 1 else f"{len(lines)} fields"
        return f"schema error: {codec} cannot carry {fields} of {self.name}:{where}"


def load_schema(spec: str) -> UserSchema:
    """Load `MODULE:NAME` (a pydantic v2 model or msgspec Struct) or `FILE.proto:NAME`.

    MODULE is imported from `sys.path`, then from the current directory; NAME may be
    dotted (`Outer.Inner`). A `.proto` file is parsed without protoc; NAME is a
    message name, relative to the file's package or full.

    Raises:
        ConfigError: one line, "schema error: ...", for a bad spec, a failed import
            or a field that cannot be mapped (with its dotted path).
    """
    target, sep, name = spec.strip().rpartition(":")
    if not sep or not target or not name:
        raise ConfigError(
            f"schema error: {spec!r}: expected MODULE:NAME or FILE.proto:MESSAGE"
        )
    if target.endswith(".proto"):
        return _from_proto_file(spec, Path(target), name)
    return from_class(_import(spec, target, name), spec)


def from_class(cls: object, name: str) -> UserSchema:
    """The three forms of a pydantic model or msgspec Struct class, named `name`.

    Raises:
        ConfigError: for any other object, or a field that cannot be mapped.
    """
    refusals = Refusals()
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        shape = read_model(cls, refusals)
        file = _derived_file(cls, shape)
        struct = build_structs(shape)
        for line in serializer_refusals(shape, struct, refusals.serialized):
            path, _, reason = line.partition(": ")
            refusals.add(path, reason)
        refused = _by_codec(refusals, shape, "pydantic")
        return UserSchema(
            name,
            struct,
            cls,
            message_class(file, shape.proto_name),
            shape,
            "pydantic",
            file,
            _msgspec_decodes(struct, refused),
            tuple(refusals.notes),
            tuple((p, w, why) for (p, w), why in refusals.on_struct.items()),
        )
    if isinstance(cls, type) and issubclass(cls, msgspec.Struct):
        shape = read_struct(cls, refusals)
        file = _derived_file(cls, shape)
        model = build_models(shape)
        proto = message_class(file, shape.proto_name)
        refused = _by_codec(refusals, shape, "msgspec")
        return UserSchema(name, cls, model, proto, shape, "msgspec", file, refused)
    raise ConfigError(
        f"schema error: {name}: {cls!r} is not a pydantic BaseModel or msgspec "
        "Struct class"
    )


def _by_codec(
    refusals: Refusals, shape: MessageShape, source: str
) -> dict[str, tuple[str, ...]]:
    """The reader's refusals, then every part a format cannot carry, by codec."""
    out = {codec: list(lines) for codec, lines in refusals.by_codec.items()}
    for codec, lines in carriage(shape, source).items():
        out.setdefault(codec, []).extend(lines)
    order = {codec: i for i, codec in enumerate(DERIVED_CODECS)}
    return {
        codec: tuple(out[codec])
        for codec in sorted(out, key=lambda c: order.get(c, -1))
    }


def _msgspec_decodes(
    struct: type[msgspec.Struct], refused: dict[str, tuple[str, ...]]
) -> dict[str, tuple[str, ...]]:
    """`refused`, with the msgspec codecs refused when msgspec cannot decode the
    derived Struct for a reason not already listed.

    msgspec checks a type when a decoder is made; its rules for unions (one
    str-like member, one Struct unless tagged...) are its own, so its message
    is the reason.
    """
    out = dict(refused)
    for codec, make in (
        ("msgspec-json", msgspec.json.Decoder),
        ("msgspec-msgpack", msgspec.msgpack.Decoder),
    ):
        if codec in out:
            continue
        try:
            make(struct)
        except TypeError as exc:
            out[codec] = (f"{struct.__name__}: msgspec: {exc}",)
    return out


def _derived_file(cls: type, shape: MessageShape) -> descriptor_pb2.FileDescriptorProto:
    """The derived `.proto` file: package and path follow the class's module."""
    # "__main__" -> "main": protobuf package names are plain identifiers.
    module = ".".join(part.strip("_") or "user" for part in cls.__module__.split("."))
    return build_file(shape, module, module.replace(".", "/") + ".proto")


def _from_proto_file(spec: str, path: Path, name: str) -> UserSchema:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"schema error: {spec}: cannot read {str(path)!r}: {exc}"
        ) from None
    file = parse_proto(text, path.name)
    full = full_message_name(file, name)
    proto = message_class(file, full)
    shape = read_proto(file, full)
    return UserSchema(
        spec, build_structs(shape), build_models(shape), proto, shape, "proto", file
    )


def _import(spec: str, module: str, name: str) -> object:
    try:
        loaded = import_module(module)
    except ImportError as exc:
        raise ConfigError(
            f"schema error: {spec}: cannot import {module!r}: {exc}"
        ) from None
    except Exception as exc:  # a user's module may raise anything at import time
        raise ConfigError(
            f"schema error: {spec}: importing {module!r} raised "
            f"{type(exc).__name__}: {exc}"
        ) from None
    obj: object = loaded
    for part in name.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"schema error: {spec}: {module!r} has no {name!r}")
        obj = getattr(obj, part)
    return obj


def import_module(module: str) -> object:
    """Import `module`; on a miss, retry with the current directory on the path.

    `python -m` puts the current directory on `sys.path`; a console script does
    not, and a user running `codec-schema check mymodels:Order` expects both to work.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        cwd = os.getcwd()
        if cwd in sys.path or exc.name != module.split(".")[0]:
            raise
    sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module)
    finally:
        sys.path.remove(cwd)
