"""A registry that refuses a lookup (HTTP 401, 403, 422...: wrong credentials, a
registry that cannot serve that id) is a dead letter naming the id and the answer,
asked again only after the unknown-id pause, never on every message."""

from __future__ import annotations

from typing import Any

import pytest

from codec import AutoCodec, get_codec
from codec.registry import frame_auto, frame_codec
from codec.registry.client import RegisteredSchema
from codec.registry.frame import id_header
from schemas.errors import DecodeError


class RefusingRegistry:
    """Answers every lookup as a registry refusing it does (`RegistryClient`)."""

    def __init__(self) -> None:
        self.lookups = 0

    def schema_by_id(self, ref: int | str) -> RegisteredSchema:
        self.lookups += 1
        raise ValueError(f"registry refused GET /schemas/ids/{ref}: HTTP 401")

    def register(self, subject: str, schema_type: str, text: str) -> int:
        return 1


def _framed(registry: RefusingRegistry) -> Any:
    return frame_codec(get_codec("avro", "small"), registry)


def _auto(registry: RefusingRegistry) -> Any:
    auto = get_codec("auto", "small")
    assert isinstance(auto, AutoCodec)
    return frame_auto(auto, {"AVRO": get_codec("avro", "small")}, registry).codec_for(
        None
    )


@pytest.mark.parametrize("build", [_framed, _auto])
def test_a_refused_lookup_names_the_id_once(build: Any) -> None:
    registry = RefusingRegistry()
    codec = build(registry)
    for _ in range(3):
        with pytest.raises(DecodeError, match=r"schema id 5: .*HTTP 401") as info:
            codec.decode(id_header(5) + b"\x02")
        assert info.value.reason == "registry_unavailable"
    assert registry.lookups == 1
