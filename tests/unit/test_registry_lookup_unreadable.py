"""A lookup whose answer cannot be read (a schema with a reference loop, a body that
is not a schema) is a dead letter naming the id (reason `schema_mismatch`), asked
again only after the unknown-id pause, never on every message; a registry that
refuses the client (HTTP 401) is its failure, not the message's (reason
`registry_unavailable`: the worker waits, `tests/unit/test_registry_wait.py`)."""

from __future__ import annotations

from typing import Any

import pytest

from codec import AutoCodec, get_codec
from codec.registry import frame_auto, frame_codec
from codec.registry.client import RegisteredSchema, RegistryRefused
from codec.registry.frame import id_header
from schemas.errors import DecodeError


class UnreadableRegistry:
    """Answers every lookup with what the client cannot read, or refuses it."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.lookups = 0

    def schema_by_id(self, ref: int | str) -> RegisteredSchema:
        self.lookups += 1
        raise self.error

    def lookup(self, subject: str, schema_type: str, text: str) -> int | None:
        return None

    def register(self, subject: str, schema_type: str, text: str) -> int:
        return 1


def _framed(registry: UnreadableRegistry) -> Any:
    return frame_codec(get_codec("avro", "small"), registry)


def _auto(registry: UnreadableRegistry) -> Any:
    auto = get_codec("auto", "small")
    assert isinstance(auto, AutoCodec)
    return frame_auto(auto, {"AVRO": get_codec("avro", "small")}, registry).codec_for(
        None
    )


@pytest.mark.parametrize("build", [_framed, _auto])
def test_an_unreadable_answer_names_the_id_once(build: Any) -> None:
    registry = UnreadableRegistry(ValueError("more than 64 schema references"))
    codec = build(registry)
    for _ in range(3):
        with pytest.raises(DecodeError, match=r"schema id 5: .*64 schema") as info:
            codec.decode(id_header(5) + b"\x02")
        assert info.value.reason == "schema_mismatch"
    assert registry.lookups == 1


@pytest.mark.parametrize("build", [_framed, _auto])
def test_a_refused_client_is_the_registrys_failure(build: Any) -> None:
    registry = UnreadableRegistry(RegistryRefused("registry refused: HTTP 401", 401))
    codec = build(registry)
    with pytest.raises(DecodeError, match="HTTP 401") as info:
        codec.decode(id_header(5) + b"\x02")
    assert info.value.reason == "registry_unavailable"
