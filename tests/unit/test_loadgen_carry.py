"""A transcoding replay carries a record only when the target reads back the same
values: what a format would change (a naive datetime, a wide int, a narrowed float)
is counted as not carried, by field and reason, for every codec, as a shadow decode
of the same record calls it."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest

from codec import AutoCodec, CodecName, get_codec, native_to_builtins
from loadgen.carry import changed, lost, wire_path
from loadgen.config import LoadgenSettings
from loadgen.recording import Record, RecordingInfo, RecordingWriter
from loadgen.replay import replay_source
from schemas.compare import read_native
from schemas.registry import resolve
from schemas.wire_shape import shape_of
from service.shadow.verdict import Comparer

METER = "tests.fixtures.usermodels.meter:MeterReading"
CHECKOUT = "tests.fixtures.usermodels.checkout:PaymentSettled"
BINARY = ["protobuf", "flatbuffers", "capnp", "avro"]
NAIVE = {
    "protobuf": "takenAt: a datetime without a timezone (protobuf's Timestamp "
    "holds instants)",
    **{
        c: f"takenAt: a datetime without a timezone ({c} holds instants: it reads "
        "back as UTC)"
        for c in ("flatbuffers", "capnp", "avro")
    },
}


def _reading(i: int, taken_at: str, seq: Any = None) -> bytes:
    body = {
        "meterId": f"m-{i}",
        "seq": i if seq is None else seq,
        "valueKwh": 1.25 + i,
        "takenAt": taken_at,
        "site": {"name": "north", "floor": i % 3},
        "tags": ["a", "b"][: i % 3],
    }
    return json.dumps(body).encode()


VALUES = [
    _reading(0, "2026-01-01T00:00:00Z"),
    _reading(1, "2026-01-01T00:00:01"),  # naive
    _reading(2, "2026-01-01T05:30:02+05:30"),  # aware at another offset
    _reading(3, "2026-01-01T00:00:03.250000", seq="3"),  # naive and lax
    _reading(4, "2026-01-01T00:00:04-07:00", seq="4"),  # lax
]
NAIVE_RECORDS = 2


def _write(path: Path, values: list[bytes]) -> Path:
    with RecordingWriter(path, RecordingInfo("meter", 1, 1)) as out:
        for i, v in enumerate(values):
            out.write(Record(0, i, 1, 1000 + i, b"k%d" % i, v, []))
    return path


def _settings(path: Path, target: str) -> LoadgenSettings:
    return LoadgenSettings.model_validate(
        {"replay": path, "topic": "t", "schema": METER, "transcode": target}
        | {"rate": 10}
    )


@pytest.mark.parametrize("target", BINARY)
def test_a_naive_datetime_is_not_carried_by_a_format_of_instants(
    tmp_path: Path, target: CodecName
) -> None:
    path = _write(tmp_path / "r.rec", VALUES)
    source = replay_source(_settings(path, target), 1)
    assert source.not_carried == {NAIVE[target]: NAIVE_RECORDS}
    assert source.keys == [b"k0", b"k2", b"k4"]
    # What is sent reads back as the team's own model reads the record.
    forms = _settings(path, target).forms
    codec = get_codec(target, forms)
    taken = [
        read_native(codec.decode(v or b""), shape_of(forms))["taken_at"]
        for v in source.values
    ]
    assert taken == [
        datetime.datetime(2026, 1, 1, h, 0, s, tzinfo=datetime.UTC)
        for h, s in ((0, 0), (0, 2), (7, 4))
    ]


@pytest.mark.parametrize("target", ["msgspec-msgpack", "msgspec-json"])
def test_msgspec_carries_naive_datetimes(tmp_path: Path, target: str) -> None:
    path = _write(tmp_path / "r.rec", VALUES)
    source = replay_source(_settings(path, target), 1)
    assert source.not_carried == {}
    assert len(source.values) == len(VALUES)


@pytest.mark.parametrize("target", [*BINARY, "msgspec-msgpack"])
def test_the_replay_counts_what_the_shadow_decode_sees(
    tmp_path: Path, target: CodecName
) -> None:
    """A record is left out exactly when json+pydantic live with `target` in its
    shadow would not call it agree."""
    path = _write(tmp_path / "r.rec", VALUES)
    settings = _settings(path, target)
    forms = settings.forms
    live = get_codec("auto", forms, auto_json="json+pydantic")
    assert isinstance(live, AutoCodec)
    comparer = Comparer(live, get_codec(target, forms), shape_of(forms))
    verdicts = [comparer.compare(v, None) for v in VALUES]
    source = replay_source(settings, 1)
    kept = set(source.keys)
    for i, verdict in enumerate(verdicts):
        assert verdict is not None
        assert (verdict.outcome == "agree") == (b"k%d" % i in kept), (i, verdict)


class _Narrowing:
    """A format that narrows a float to 32 bits and wraps an int past 64 bits,
    where it should refuse them: read back through the team's own model."""

    name = "narrowing"

    def __init__(self, codec: Any, change: dict[str, Any]) -> None:
        self._codec, self._change = codec, change

    def to_builtins(self, obj: Any) -> Any:
        return self._codec.to_builtins(obj)

    def decode(self, data: bytes) -> Any:
        back = self._codec.decode(data)
        for name, value in self._change.items():
            setattr(back, name, value)
        return back


def test_a_value_a_codec_changes_silently_is_caught() -> None:
    """`changed` compares what the target reads back, whatever it did on encode."""
    forms = resolve(METER)
    shape = shape_of(forms)
    codec = get_codec("json+pydantic", forms)
    native = codec.decode(VALUES[0].replace(b"1.25", b"1.1"))
    encoded = codec.encode(native)
    assert changed(native, encoded, codec, shape) == ""
    data = native_to_builtins(native)
    assert changed(native, encoded, codec, shape, data) == ""  # by the JSON text
    narrowing = _Narrowing(codec, {"value_kwh": 1.100000023841858})
    for given in (None, data):  # with the builtins too: other JSON text
        assert changed(native, encoded, narrowing, shape, given) == (  # type: ignore[arg-type]
            "valueKwh: a float narrowing narrows to 32 bits"
        )
    wide_forms = resolve("tests.fixtures.usermodels.lax:Model")
    wide = get_codec("json+pydantic", wide_forms)
    big = wide.decode(b'{"id": %d, "name": "n", "amount": 1}' % 2**70)
    wrapping = _Narrowing(wide, {"id": 2**70 % 2**64})
    assert changed(big, wide.encode(big), wrapping, shape_of(wide_forms)) == (  # type: ignore[arg-type]
        "id: an int wider than 64 bits (narrowing cannot hold it)"
    )


@pytest.mark.parametrize(
    ("before", "after", "reason"),
    [
        (2**70, 2**70 % 2**64, "an int wider than 64 bits (avro cannot hold it)"),
        (-(2**63) - 1, 2**63 - 1, "an int wider than 64 bits (avro cannot hold it)"),
        (7, 8, "an int avro reads back as another value"),
        (0.1, 0.10000000149011612, "a float avro narrows to 32 bits"),
        (0.1, 0.2, "a float avro reads back as another value"),
        (
            datetime.datetime(2026, 1, 1),
            datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
            "a datetime without a timezone (avro holds instants: it reads back as UTC)",
        ),
        (frozenset({"a", "b"}), frozenset({"a"}), "a set whose members avro changes"),
        ("x", "y", "a value avro reads back changed"),
    ],
)
def test_each_change_is_named_without_its_value(
    before: Any, after: Any, reason: str
) -> None:
    assert lost(before, after, "avro") == reason


def test_paths_are_counted_by_wire_key_without_indexes() -> None:
    shape = shape_of(resolve(METER))
    assert wire_path(".taken_at", shape) == "takenAt"
    assert wire_path(".site.floor", shape) == "site.floor"
    assert wire_path(".tags[1]", shape) == "tags"
    assert wire_path("", shape) == "record"


@pytest.mark.parametrize("target", BINARY)
def test_a_computed_field_is_not_sent_as_a_field(tmp_path: Path, target: str) -> None:
    """pydantic's dump holds the model's computed fields; protobuf's parser refused
    that key, so no record of a model with one could be sent as protobuf."""
    value = json.dumps(
        {
            "paymentId": "9b2f0d1e-6a4f-4a57-9a43-1f6ef2d7f001",
            "orderRef": 2**63 - 1,
            "channel": "web",
            "settledAt": "2026-03-01T10:00:00Z",
            "bookedAt": "2026-03-01T12:00:00+02:00",
            "amount": "12.50",
            "customerEmail": "a@example.com",
            "feeRate": 0.029,
            "riskScore": 12,
            "method": {"method": "card", "brand": "visa", "last4": "4242"},
            "merchantNet": "10.1.0.0/16",
            "signature": "c2ln",
        }
    ).encode()
    path = _write(tmp_path / "r.rec", [value])
    settings = LoadgenSettings.model_validate(
        {"replay": path, "topic": "t", "schema": CHECKOUT, "transcode": target}
        | {"rate": 10}
    )
    source = replay_source(settings, 1)
    assert source.not_carried == {}
    assert len(source.values) == 1
