"""A transcoding replay: the recorded bytes when the wire format matches, and records
the target cannot carry counted with their field path, never a crash."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codec import get_codec
from loadgen.config import LoadgenSettings
from loadgen.recording import Record, RecordingInfo, RecordingWriter
from loadgen.replay import replay_source
from schemas.errors import ConfigError
from service.kafka.headers import CONTENT_TYPE

LAX = "tests.fixtures.usermodels.lax:Model"
READING = "tests.fixtures.usermodels.lax:Reading"
Headers = list[tuple[str, bytes | None]]


def _write(path: Path, values: list[bytes], headers: list[Headers]) -> Path:
    with RecordingWriter(path, RecordingInfo("payments", 1, 1)) as out:
        for i, (v, h) in enumerate(zip(values, headers, strict=True)):
            out.write(Record(0, i, 1, 1000 + i, b"k%d" % i, v, h))
    return path


def _settings(path: Path, schema: str, target: str, **kw: Any) -> LoadgenSettings:
    return LoadgenSettings.model_validate(
        {"replay": path, "topic": "t", "schema": schema, "transcode": target}
        | {"rate": 10}
        | kw
    )


# What a lax pydantic service writes and reads: key order, a numeric string, a
# float spelled 2.0, an unknown field; none survives a re-encoding.
JSON_VALUES = [
    b'{"name": "a", "id": 1, "amount": 2.50, "tags": []}',
    b'{"id": "123", "name": "b", "amount": 2.0, "extra": true}',
    b'{"id":3,"name":"c","amount":1e3}',
]
JSON_HEADERS: list[Headers] = [
    [(CONTENT_TYPE, b"application/json"), ("traceparent", b"00-ab-01")],
    [],  # a JSON producer that sets no content-type
    [("x-seq", b"77"), (CONTENT_TYPE, b"application/json; charset=utf-8")],
]


@pytest.mark.parametrize(
    "target",
    ["json+pydantic", "msgspec-json", "orjson+pydantic", "json-stdlib+pydantic"],
)
def test_same_wire_format_sends_the_recorded_bytes(tmp_path: Path, target: str) -> None:
    path = _write(tmp_path / "r.rec", JSON_VALUES, JSON_HEADERS)
    source = replay_source(_settings(path, LAX, target), 1)
    assert source.values == JSON_VALUES
    assert source.content_types == [
        b"application/json",
        None,
        b"application/json; charset=utf-8",
    ]
    # Recorded headers kept; the load generator's own stamps are made anew.
    assert source.extra_headers == [(("traceparent", b"00-ab-01"),), (), ()]
    assert source.as_recorded == 3
    assert source.not_carried == {}


def test_another_wire_format_is_transcoded(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.rec", JSON_VALUES, JSON_HEADERS)
    source = replay_source(_settings(path, LAX, "msgspec-msgpack"), 1)
    codec = get_codec("msgspec-msgpack", source_forms(LAX))
    assert source.content_types == [b"application/vnd.msgpack"] * 3
    assert [codec.decode(v or b"").id for v in source.values] == [1, 123, 3]
    assert source.as_recorded == 0


def source_forms(spec: str) -> Any:
    return _settings(Path("x"), spec, "protobuf").forms


def test_a_naive_datetime_is_not_carried_by_protobuf(tmp_path: Path) -> None:
    values = [
        b'{"sensor": "a", "taken_at": "2026-01-01T00:00:00Z"}',
        b'{"sensor": "b", "taken_at": "2026-01-01T00:00:00"}',
        b'{"sensor": "c", "taken_at": "2026-01-02T00:00:00"}',
    ]
    path = _write(tmp_path / "r.rec", values, [[], [], []])
    source = replay_source(_settings(path, READING, "protobuf"), 1)
    assert len(source.values) == 1
    assert source.keys == [b"k0"]
    assert source.not_carried == {
        "taken_at: a datetime without a timezone (protobuf's Timestamp holds instants)": 2
    }
    # The JSON cases still send all three, as recorded.
    assert replay_source(_settings(path, READING, "msgspec-json"), 1).values == values


def test_an_int_wider_than_64_bits_is_not_carried_by_msgpack(tmp_path: Path) -> None:
    values = [
        b'{"id": 1, "name": "a", "amount": 1}',
        b'{"id": %d, "name": "b", "amount": 1}' % 2**70,
    ]
    path = _write(tmp_path / "r.rec", values, [[], []])
    for target in ("msgspec-msgpack", "protobuf"):
        source = replay_source(_settings(path, LAX, target), 1)
        assert len(source.values) == 1
        assert source.not_carried == {
            f"id: an int wider than 64 bits ({target} cannot hold it)": 1
        }


def test_nothing_carried_is_one_config_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.rec", [b"not json"], [[]])
    with pytest.raises(ConfigError, match="partition 0 offset 0: record: does not"):
        replay_source(_settings(path, LAX, "protobuf"), 1)


@pytest.mark.parametrize(("mode", "shown"), [("always", True), ("never", False)])
def test_transcoding_shows_its_progress_on_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str, shown: bool
) -> None:
    path = _write(tmp_path / "r.rec", JSON_VALUES, JSON_HEADERS)
    replay_source(_settings(path, LAX, "protobuf", progress=mode), 1)
    err = capsys.readouterr().err
    assert ("transcoding to protobuf" in err) is shown


def test_a_record_the_model_refuses_names_its_field(tmp_path: Path) -> None:
    values = [
        b'{"sensor": "a", "taken_at": "2026-01-01T00:00:00Z"}',
        b'{"sensor": "b", "taken_at": "yesterday"}',
    ]
    path = _write(tmp_path / "r.rec", values, [[], []])
    source = replay_source(_settings(path, READING, "protobuf"), 1)
    assert source.not_carried == {
        f"taken_at: does not decode as {READING!r} (datetime_from_date_parsing)": 1
    }
