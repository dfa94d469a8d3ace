"""The defects the model generator (`test_model_generator.py`) and the inventory
fixture found, each as a fixed case: the generated model cut to the field at fault."""

from __future__ import annotations

import datetime
import enum
import uuid
from typing import Any

import pydantic
from pydantic.alias_generators import to_camel

from codec import codec_refusal, get_codec
from loadgen.carry import transcode
from schemas.compare import read_native
from schemas.user.loader import from_class


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


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


class TestIntKeysFromJson:
    """A dict keyed by ints or an IntEnum, replayed from JSON into a binary format,
    is carried: JSON's builtins hold the keys as text ("1"), which the conversion
    into the Struct reads as the key type (it used to count every such record as
    not carried: "Expected `int`, got `str` - at `key`")."""

    SENT = b'{"counts":{"1":2,"-9223372036854775808":3},"levels":[{"2":true}]}'

    def test_carried_by_every_format_that_runs_it(self) -> None:
        schema = _schema(
            "IntKeys",
            counts=(dict[int, int], ...),
            levels=(list[dict[Level, bool]], ...),
        )
        source = get_codec("json+pydantic", schema)
        expected = read_native(source.decode(self.SENT), schema.shape)
        ran = []
        for name in ("msgspec-msgpack", "protobuf", "flatbuffers", "capnp", "avro"):
            if codec_refusal(name, schema) is not None:
                continue
            target = get_codec(name, schema)
            value, why = transcode(source, target, self.SENT, schema.name, schema.shape)
            assert value is not None, (name, why)
            assert read_native(target.decode(value), schema.shape) == expected, name
            ran.append(name)
        assert {"msgspec-msgpack", "avro"} <= set(ran)


class TestNestedNaiveDatetime:
    """A naive datetime inside a list of models is counted as what it is, a datetime
    protobuf cannot hold, by its field (protobuf's error ends `at M.items[0].at..`,
    whose second dot hid the field: the reason was protobuf's whole parse error)."""

    def test_counted_by_field_and_reason(self) -> None:
        item = pydantic.create_model(
            "Item",
            __config__=pydantic.ConfigDict(alias_generator=to_camel),
            taken_at=(datetime.datetime, ...),
        )
        schema = _schema("Items", items=(list[item], ...))
        sent = b'{"items":[{"takenAt":"2000-01-01T00:00:00"}]}'
        source = get_codec("json+pydantic", schema)
        target = get_codec("protobuf", schema)
        value, why = transcode(source, target, sent, schema.name, schema.shape)
        assert value is None
        assert why == (
            "items.takenAt: a datetime without a timezone (protobuf's Timestamp "
            "holds instants)"
        )


class TestNaiveDatetimeUnderAMapKey:
    """A naive datetime in a map keyed by UUIDs (or datetimes) is counted as a naive
    datetime: the comparison's path holds the key's repr (`[UUID('...')]`), which
    the replay now follows (it fell back to "a value capnp reads back changed")."""

    def test_counted_by_field_and_reason(self) -> None:
        item = pydantic.create_model("Slot", at=(datetime.datetime, ...))
        schema = _schema("ByUuid", slots=(dict[uuid.UUID, item], ...))
        key = "8f5e6b3c-1d2e-4f00-9a7b-0123456789ab"
        sent = b'{"slots":{"%s":{"at":"2000-01-01T00:00:00"}}}' % key.encode()
        source = get_codec("json+pydantic", schema)
        target = get_codec("capnp", schema)
        value, why = transcode(source, target, sent, schema.name, schema.shape)
        assert value is None
        assert why == (
            "slots.at: a datetime without a timezone (capnp holds instants: it reads "
            "back as UTC)"
        )


class TestReasonsWithAKebabAliasAndDatetimeKeys:
    """Two reasons the replay now names: protobuf's error at a field whose alias
    holds a `-` (`taken-at`), and a naive datetime map key Cap'n Proto reads back
    in UTC (both fell back to a generic "record: ParseError" / "a value capnp reads
    back changed")."""

    def test_a_kebab_alias(self) -> None:
        schema = _schema(
            "Kebab",
            taken_at=(datetime.datetime, pydantic.Field(alias="taken-at")),
        )
        sent = b'{"taken-at":"2000-01-01T00:00:00"}'
        source = get_codec("json+pydantic", schema)
        target = get_codec("protobuf", schema)
        _, why = transcode(source, target, sent, schema.name, schema.shape)
        assert why == (
            "taken-at: a datetime without a timezone (protobuf's Timestamp holds "
            "instants)"
        )

    def test_a_naive_datetime_key(self) -> None:
        schema = _schema("Keys", slots=(dict[datetime.datetime, int], ...))
        source = get_codec("json+pydantic", schema)
        target = get_codec("capnp", schema)
        naive = b'{"slots":{"2000-01-01T00:00:00":1}}'
        _, why = transcode(source, target, naive, schema.name, schema.shape)
        assert why == (
            "slots: a datetime map key without a timezone (capnp holds instants: "
            "it reads back as UTC)"
        )
        aware = b'{"slots":{"2000-01-01T00:00:00+05:00":1}}'
        value, why = transcode(source, target, aware, schema.name, schema.shape)
        assert value is not None and why == ""
