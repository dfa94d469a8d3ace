"""The defects the model generator (`test_model_generator.py`) and the inventory
fixture found, each as a fixed case: the generated model cut to the field at fault."""

from __future__ import annotations

from typing import Any

import pydantic

from codec import codec_refusal, get_codec
from schemas.user.loader import from_class


def _schema(name: str, **fields: Any) -> Any:
    return from_class(pydantic.create_model(name, **fields), f"generated:{name}")


class TestEmptyDefaults:
    """An empty set default is carried like an empty list or dict: a fresh one per
    object (`zones: set[str] = set()` used to refuse every derived codec with "the
    default set value is not carried over")."""

    def test_an_empty_set_default_runs_on_msgspec(self) -> None:
        schema = _schema("Zones", zones=(set[str], set()), tags=(list[str], []))
        for name in ("msgspec-json", "msgspec-msgpack"):
            assert codec_refusal(name, schema) is None, name
            codec = get_codec(name, schema)
            first = codec.decode(codec.encode(codec.from_builtins({})))
            assert first.zones == set() and first.tags == []
            again = codec.decode(b"{}" if name == "msgspec-json" else b"\x80")
            assert again.zones == set() and again.zones is not first.zones
