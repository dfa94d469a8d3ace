"""JSON codecs that validate with pydantic v2: the paths teams migrate away from.

- `json+pydantic`: `Model.model_validate_json(data)`, one pass through jiter.
- `json-stdlib+pydantic`: `Model.model_validate(json.loads(data))`, the legacy
  two-pass path of the seed story (a dict tree first, then validation).
- `orjson+pydantic`: `Model.model_validate(orjson.loads(data))`, the usual
  "faster JSON" drop-in, still two passes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import msgspec
import orjson
from pydantic import BaseModel

from codec.base import JSON, as_encode_error, safe_decode

M = TypeVar("M", bound=BaseModel)


class _PydanticCodec(Generic[M]):
    """Shared conversions and error wrapping; subclasses choose the JSON library."""

    name: str
    content_type = JSON
    decode_unchecked: Callable[[bytes], M]

    def __init__(self, model: type[M]) -> None:
        self._model = model
        self.native_type = model

    def to_builtins(self, obj: M, /) -> dict[str, Any]:
        return obj.model_dump(mode="json", by_alias=True, round_trip=True)

    def from_builtins(self, data: dict[str, Any], /) -> M:
        # Through JSON: builtins carry datetimes, bytes and enum values as JSON
        # does, and a strict model accepts those as strings in JSON mode only.
        return self._model.model_validate_json(msgspec.json.encode(data))

    def decode(self, data: bytes, /) -> M:
        return safe_decode(self.name, self.decode_unchecked, data)

    def encode(self, obj: M, /) -> bytes:
        try:
            return self._encode(obj)
        except Exception as exc:
            raise as_encode_error(self.name, exc) from exc

    def _encode(self, obj: M) -> bytes:
        raise NotImplementedError


class PydanticJsonCodec(_PydanticCodec[M]):
    """`Model.model_validate_json`: pydantic's own one-pass JSON path."""

    name = "json+pydantic"

    def __init__(self, model: type[M]) -> None:
        super().__init__(model)
        self.decode_unchecked = model.model_validate_json

    def _encode(self, obj: M) -> bytes:
        # by_alias: the keys a service writes (`model_dump_json(by_alias=True)`);
        # round_trip: a `Json[...]` field as the JSON text the model reads back
        # (without it pydantic writes the value, which the model then rejects).
        return obj.model_dump_json(by_alias=True, round_trip=True).encode()


class StdlibJsonPydanticCodec(_PydanticCodec[M]):
    """`Model.model_validate(json.loads(data))`: the legacy two-pass path."""

    name = "json-stdlib+pydantic"

    def __init__(self, model: type[M]) -> None:
        super().__init__(model)
        validate, loads = model.model_validate, json.loads
        # UTF-8, strictly: `json.loads(bytes)` would also read UTF-16 and UTF-32, a
        # BOM, and surrogates encoded in UTF-8 (it decodes with "surrogatepass").
        self.decode_unchecked = lambda data: validate(loads(str(data, "utf-8")))

    def _encode(self, obj: M) -> bytes:
        # mode="json": json.dumps cannot write bytes or datetimes.
        data = obj.model_dump(mode="json", by_alias=True, round_trip=True)
        return json.dumps(data, separators=(",", ":")).encode()


class OrjsonPydanticCodec(_PydanticCodec[M]):
    """`Model.model_validate(orjson.loads(data))`: a faster parser, same validation."""

    name = "orjson+pydantic"

    def __init__(self, model: type[M]) -> None:
        super().__init__(model)
        validate, loads = model.model_validate, orjson.loads
        self.decode_unchecked = lambda data: validate(loads(data))

    def _encode(self, obj: M) -> bytes:
        # mode="json": orjson cannot write bytes; the model's own JSON forms apply.
        return orjson.dumps(obj.model_dump(mode="json", by_alias=True, round_trip=True))
