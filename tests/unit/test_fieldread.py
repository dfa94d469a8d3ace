"""The `fields` logic reads only the named fields, the same count on every codec."""

from __future__ import annotations

import pytest

from codec import REAL_CODECS, get_codec
from loadgen.payloads import make_payloads
from schemas.errors import ConfigError
from schemas.registry import SCHEMAS
from schemas.wire_shape import shape_of
from service.logic.builtin import Handler
from service.logic.named_fields import field_paths, read_named_fields

MEDIUM = shape_of(SCHEMAS["medium"])


class TestPaths:
    def test_a_count_names_the_first_fields(self) -> None:
        assert field_paths(MEDIUM, "3") == ("event_id", "event_type", "occurred_at_ms")

    def test_all_names_every_field(self) -> None:
        assert field_paths(MEDIUM, "all") == tuple(f.name for f in MEDIUM.fields)

    def test_dotted_paths_are_checked(self) -> None:
        assert field_paths(MEDIUM, "customer.customer_id, items.quantity") == (
            "customer.customer_id",
            "items.quantity",
        )
        with pytest.raises(ConfigError, match="Customer has no field 'nope'"):
            field_paths(MEDIUM, "customer.nope")
        with pytest.raises(ConfigError, match="holds no message"):
            field_paths(MEDIUM, "event_id.x")
        with pytest.raises(ConfigError, match="expected 1 to 21"):
            field_paths(MEDIUM, "0")


class TestReads:
    @pytest.mark.parametrize(
        "spec", ["3", "customer.customer_id,items.quantity", "customer", "items", "all"]
    )
    def test_every_codec_reads_the_same_count(self, spec: str) -> None:
        read = read_named_fields(MEDIUM, field_paths(MEDIUM, spec))
        payloads = make_payloads("medium", 10, seed=5)
        counts = {}
        for name in REAL_CODECS:
            codec = get_codec(name, "medium")
            objs = [
                codec.decode(codec.encode(codec.from_builtins(p))) for p in payloads
            ]
            counts[name] = [read(o) for o in objs]
        assert len({tuple(c) for c in counts.values()}) == 1, counts
        items = [len(p["items"]) for p in payloads]
        if spec == "customer.customer_id,items.quantity":
            assert counts["protobuf"] == [1 + n for n in items]

    def test_the_handler_counts_what_it_read(self) -> None:
        handler = Handler("medium", "fields", read_fields="customer.customer_id")
        codec = get_codec("flatbuffers", "medium")
        step = handler.step
        assert step is not None
        for p in make_payloads("medium", 4):
            step(codec.decode(codec.encode(codec.from_builtins(p))))
        assert handler.totals == {0: 4.0}
