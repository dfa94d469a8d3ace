"""pydantic's core schema of a value read into a shape: what pydantic applies, node by node.

pydantic compiles every model into a core schema (`Model.__pydantic_core_schema__`):
the validator and the serializer it runs are built from it, so it holds what pydantic
does with each value, whatever annotation spelled it: a generic parameter already
substituted, `Json[X]` as a `json` node, a recursive model as a reference to its
definition, `use_enum_values` as the enum's value taken after validation, a
serializer as the `serialization` of the node it writes. `CoreTypes` reads one
node (a field's type) into a shape; `schemas.user.pydantic_reader` reads the models.

Types pydantic makes with a function of its own (an address, a URL, `SecretStr`,
`Base64Bytes`) are known by the class that function belongs to. A function of the
team's (a validator) is noted as code the derived forms do not run; one that
writes the value (a serializer) is recorded on the field, and the producer's wire
is what it returns (`schemas.user.producer`).
"""

from __future__ import annotations

import enum
import functools
import operator
from collections.abc import Callable
from typing import Any, Final

import pydantic
from pydantic.types import Base64Encoder, EncodedBytes

from schemas.formats import Refusals
from schemas.shape import (
    Choice,
    Constraints,
    Foreign,
    Holds,
    ListOf,
    MapOf,
    Scalar,
    TupleOf,
    TypeShape,
    UnionOf,
)
from schemas.unions import tag_field_of
from schemas.user.foreign_types import FOREIGN, foreign_of, sample_url
from schemas.user.model.core_nodes import (
    BOUNDS,
    CONTAINERS,
    IGNORED,
    MODES,
    SCALARS,
    TRANSFORMS,
    CoreSchema,
    bytes_hint,
    class_name,
    encoded_bytes,
    function_name,
    is_pydantic_own,
    node_function,
    owner,
    serializer_label,
    strict_or_lax,
    twice,
    union_choice,
)

MessageReader = Callable[[CoreSchema, str], TypeShape]
"""Reads a `model` node into a message shape (or a `Foreign` for a RootModel)."""

SECRETS: Final[dict[type, Holds]] = {
    pydantic.SecretStr: "secret",
    pydantic.SecretBytes: "secret-bytes",
}


class CoreTypes:
    """Reads the type nodes of one model tree into shapes.

    Args:
        refusals: where what a derived form cannot carry is recorded.
        read_message: reads a `model` node (the models' reader).
        definitions: every `ref` of the tree -> its node (`definition-ref`).
    """

    def __init__(
        self,
        refusals: Refusals,
        read_message: MessageReader,
        definitions: dict[str, CoreSchema],
    ) -> None:
        self._refusals = refusals
        self._read_message = read_message
        self.definitions = definitions
        self.config: dict[str, Any] = {}
        """The core config of the model being read (`extra_fields_behavior`...)."""
        self.serializers: list[tuple[str, str]] = []
        """(path, label) of every serializer of the team's met since last cleared."""
        self.round_trip = False
        """A `Json[...]` node was met: the model reads its own output only when it
        is written with `round_trip=True` (a JSON string, not the value)."""
        self.validators: list[tuple[str, CoreSchema, bool]] = []
        """(path, node, own) of every validator of the team's met (function
        nodes); `own`: a field's own, outside any None, container or union."""
        self._own = False
        self.transforms: list[tuple[str, str]] = []
        """(path, what) of every string transform met (`StringConstraints`)."""
        self.discriminators: list[tuple[str, str]] = []
        """(path, what) of every callable discriminator met."""
        self._extra: dict[str, Any] = {}
        self.unions: list[UnionOf] = []
        """Every union read: their tag fields are found again once every message
        is read (a member may be a message still being read, through recursion)."""

    def resolve(self, node: CoreSchema) -> CoreSchema:
        """`node`, through `definitions` and `definition-ref` nodes."""
        while True:
            if "ref" in node and node["type"] != "definition-ref":
                self.definitions.setdefault(node["ref"], node)
            if node["type"] == "definitions":
                for inner in node["definitions"]:
                    self.definitions.setdefault(inner["ref"], inner)
                node = node["schema"]
            elif node["type"] == "definition-ref":
                node = self.definitions[node["schema_ref"]]
            else:
                return node

    def field_type(
        self, node: CoreSchema, path: str, own: bool = False
    ) -> tuple[TypeShape, bool]:
        """The shape of a field's (or item's) node, and whether it takes None
        (`own`: a field's node, whose outer validators are the field's own)."""
        self._own = own
        node = self._peel(node, path)
        self._own = False
        if node["type"] == "nullable":
            return self.value(node["schema"], path), True
        if node["type"] == "union":
            members = [self.resolve(union_choice(c)) for c in node["choices"]]
            rest = [c for c in members if c["type"] != "none"]
            if len(rest) < len(members):
                if len(rest) == 1:
                    return self.value(rest[0], path), True
                return self._union(rest, False, path), True
        return self.value(node, path), False

    def value(self, node: CoreSchema, path: str) -> TypeShape:
        """The shape of a non-None value (an item, a map value, a field)."""
        node = self._peel(node, path)
        kind = node["type"]
        if kind == "nullable":
            inner = self.resolve(node["schema"])
            return UnionOf((self.value(inner, f"{path}<{self._label(inner)}>"),), True)
        if kind in SCALARS:
            return self._scalar(node, path)
        if kind in ("model", "dataclass", "typed-dict"):
            if kind == "model":
                return self._read_message(node, path)
            return Foreign(node.get("cls", dict), class_name(node.get("cls", kind)))
        if kind in CONTAINERS:
            item = self.value(node.get("items_schema", {"type": "any"}), f"{path}[]")
            return ListOf(item, self._bounds(node, path), CONTAINERS[kind])
        if kind == "tuple":
            return self._tuple(node, path)
        if kind == "dict":
            return self._map(node, path)
        if kind == "literal":
            return self._literal(node["expected"], path)
        if kind == "enum":
            return self._enum(node, path)
        if kind in ("union", "tagged-union"):
            return self._union_node(node, path)
        if kind == "json":
            self.round_trip = True
            held = self.value(node.get("schema", {"type": "any"}), f"{path}<json>")
            return Scalar("str", holds="json", inner=held)
        if kind == "any":
            return Foreign(Any, *FOREIGN[Any])
        if kind == "is-instance":
            return foreign_of(node["cls"]) or Foreign(
                node["cls"], class_name(node["cls"])
            )
        if kind in ("url", "multi-host-url"):
            return Foreign(pydantic.AnyUrl, "AnyUrl", sample_url, _url_text)
        if kind in MODES:  # a type pydantic makes with a function of its own
            return self._made(node, path)
        return Foreign(node, kind)

    def _peel(self, node: CoreSchema, path: str) -> CoreSchema:
        """Through the layers that do not change the value's type: references,
        JSON-or-Python and lax-or-strict pairs, custom errors, validators (noted)
        and the types pydantic makes with its own functions (returned as a
        `_known` node)."""
        while True:
            node = self.resolve(node)
            ser = node.get("serialization")
            if ser is not None and node["type"] != "model":  # a model's: its own
                label = serializer_label(ser)
                if label is not None:
                    self.serializers.append((path, label))
            kind = node["type"]
            if kind == "lax-or-strict":
                strict = self.config.get("strict") or node.get("strict")
                node = node["strict_schema"] if strict else strict_or_lax(node)
            elif kind == "json-or-python":
                node = node["json_schema"]
            elif kind == "custom-error":
                node = node["schema"]
            elif kind == "chain" and node["steps"]:
                node = node["steps"][0]
            elif kind in MODES and self._known(node) is None:
                function = node_function(node)
                if not is_pydantic_own(function):
                    self.validators.append((path, node, self._own))
                elif isinstance(function, functools.partial):  # a bound pydantic
                    self._extra.update(function.keywords)  # applies after a validator
                if "schema" not in node:
                    return node
                node = node["schema"]
            else:
                return node

    def _known(self, node: CoreSchema) -> TypeShape | None:
        """The type a function node of pydantic's makes, when it is one the
        shapes know (an address, a URL, a secret, base64 bytes, an enum's value)."""
        function = node_function(node)
        written = node.get("serialization", {}).get("function")
        if written is not None and isinstance(owner(written), type):
            found = foreign_of(owner(written))  # a URL: its class writes it
            if found is not None:
                return found
        if isinstance(function, operator.attrgetter) and repr(function) == (
            "operator.attrgetter('value')"
        ):
            return _ENUM_VALUE
        cls = owner(function)
        if cls in SECRETS:
            return Scalar("str", holds=SECRETS[cls])
        if isinstance(cls, EncodedBytes):
            return _ENCODED
        if isinstance(cls, type) and (found := foreign_of(cls)) is not None:
            return found
        return None

    def _made(self, node: CoreSchema, path: str) -> TypeShape:
        found = self._known(node)
        if found is _ENUM_VALUE:  # use_enum_values: the model holds the value
            inner = self.value(node["schema"], path)
            return Choice(inner.values) if isinstance(inner, Choice) else inner
        if found is _ENCODED:
            return self._bytes(path, encoded_bytes(node))
        if found is not None:
            return found
        function = node_function(node)
        return Foreign(function, f"the value of {function_name(function)}")

    def _bytes(self, path: str, encoded: EncodedBytes | None) -> TypeShape:
        """bytes as pydantic writes them to JSON: refused where msgspec's
        standard base64 is not pydantic's (`bytes_hint`)."""
        ser = self.config.get("ser_json_bytes", "utf8")
        val = self.config.get("val_json_bytes", "utf8")
        configured = [
            f"{key}={value!r}"
            for key, value in (("ser_json_bytes", ser), ("val_json_bytes", val))
            if value != "utf8"
        ]
        if encoded is not None and encoded.encoder is not Base64Encoder:
            name = encoded.encoder.__name__
            self._refusals.add(path, f"{name}: msgspec writes standard base64")
        elif encoded is not None:
            if configured:  # pydantic then codes the field's base64 twice
                self._refusals.add(path, twice(configured))
        else:
            self._refusals.add(path, bytes_hint(ser, configured))
        return Scalar("bytes")

    def _scalar(self, node: CoreSchema, path: str) -> TypeShape:
        kind = SCALARS[node["type"]]
        bounds = self._bounds(node, path)
        if kind == "bytes":
            self._bytes(path, None)
            return Scalar("bytes", bounds)
        if kind == "datetime":
            if node.get("now_op") is not None:
                self._refusals.add(path, "a time-dependent check is not mapped")
            tz = node.get("tz_constraint")
            if tz is not None:  # "aware", "naive" or a fixed offset (aware)
                bounds = Constraints(**(bounds.items() | {"tz": tz != "naive"}))
        for key in TRANSFORMS:
            if node.get(key):
                self.transforms.append((path, f"StringConstraints({key}=True)"))
        return Scalar(kind, bounds)

    def _bounds(self, node: CoreSchema, path: str) -> Constraints:
        bounds: dict[str, Any] = {}
        extra, self._extra = self._extra, {}
        for key, value in (node | extra).items():
            if key in BOUNDS and value is not None:
                bounds[key] = getattr(value, "pattern", value)  # a compiled pattern
            elif key not in IGNORED and key not in TRANSFORMS and value is not None:
                self._refusals.add(path, f"pydantic's {key}={value!r} is not mapped")
        return Constraints(**bounds)

    def _tuple(self, node: CoreSchema, path: str) -> TypeShape:
        items = node.get("items_schema", [])
        variadic = node.get("variadic_item_index")
        if variadic == 0 and len(items) == 1:
            item = self.value(items[0], f"{path}[]")
            return ListOf(item, self._bounds(node, path), "tuple")
        if variadic is not None:
            return Foreign(tuple, "a tuple of a fixed head and a variable tail")
        if not items:
            return Foreign(tuple[()], "tuple[()]", lambda rng: [])
        return TupleOf(
            tuple(self.value(s, f"{path}[{i}]") for i, s in enumerate(items))
        )

    def _map(self, node: CoreSchema, path: str) -> TypeShape:
        key = self.value(node.get("keys_schema", {"type": "any"}), f"{path}{{key}}")
        if not isinstance(key, Scalar | Choice) or (
            isinstance(key, Scalar) and key.holds is not None
        ):
            what = key.name if isinstance(key, Foreign) else type(key).__name__
            self._refusals.add(f"{path}{{key}}", f"a {what} map key is not mapped")
            key = Scalar("str")
        value = self.value(node.get("values_schema", {"type": "any"}), f"{path}{{}}")
        return MapOf(key, value, self._bounds(node, path))

    def _literal(self, values: list[Any], path: str) -> TypeShape:
        if all(isinstance(v, str) for v in values) or all(
            isinstance(v, int) and not isinstance(v, bool) for v in values
        ):
            return Choice(tuple(values))
        enums = [v for v in values if isinstance(v, enum.Enum)]
        if enums and len(enums) == len(values):
            return self._members(type(enums[0]), [v.value for v in enums], path)
        self._refusals.add(path, "a Literal of mixed value kinds is not mapped")
        return Foreign(values, "Literal", lambda rng: rng.choice(values))

    def _enum(self, node: CoreSchema, path: str) -> TypeShape:
        cls = node["cls"]
        return self._members(cls, [m.value for m in node["members"]], path)

    def _members(self, cls: type[enum.Enum], values: list[Any], path: str) -> TypeShape:
        same_kind = all(isinstance(v, str) for v in values) or all(
            isinstance(v, int) and not isinstance(v, bool) for v in values
        )
        if values and same_kind and not issubclass(cls, enum.Flag):
            return Choice(tuple(values), cls)
        why = "a Flag enum" if issubclass(cls, enum.Flag) else "of mixed value kinds"
        self._refusals.add(path, f"{cls.__name__} is {why}: not mapped")
        return Foreign(
            cls, cls.__name__, (lambda rng: rng.choice(values)) if values else None
        )

    def _union_node(self, node: CoreSchema, path: str) -> TypeShape:
        if node["type"] == "tagged-union":
            if callable(node["discriminator"]):  # the team's code picks the member
                what = f"Discriminator {function_name(node['discriminator'])}"
                self.discriminators.append((path, what))
            members: list[CoreSchema] = []
            for choice in node["choices"].values():
                resolved = self.resolve(choice)
                if not any(resolved is m for m in members):
                    members.append(resolved)
        else:
            members = [self.resolve(union_choice(c)) for c in node["choices"]]
        rest = [m for m in members if m["type"] != "none"]
        return self._union(rest, len(rest) < len(members), path)

    def _label(self, node: CoreSchema) -> str:
        """A union member's name in a path: its class, else its core type."""
        while node["type"] in MODES and "schema" in node:  # a model validator
            node = self.resolve(node["schema"])
        cls = node.get("cls")
        if node["type"] == "model" and cls is not None:
            return str(cls.__name__)
        return str(node["type"])

    def _union(self, members: list[CoreSchema], nullable: bool, path: str) -> TypeShape:
        shapes = tuple(self.value(m, f"{path}<{self._label(m)}>") for m in members)
        union = UnionOf(shapes, nullable, tag_field_of(shapes))
        self.unions.append(union)
        return union


_ENUM_VALUE: Final = Foreign(None, "an enum's value")
_ENCODED: Final = Foreign(None, "encoded bytes")


def _url_text(text: str) -> Any:
    return pydantic.TypeAdapter(pydantic.AnyUrl).validate_python(text)
