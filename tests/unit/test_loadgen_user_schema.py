"""codec-loadgen on a user's schema: settings, synthetic payloads, transcoded replay."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec
import pytest

from codec import REAL_CODECS, CodecName, get_codec
from loadgen.cli import main
from loadgen.config import LoadgenSettings, load_settings
from loadgen.recording import Record, RecordingInfo, RecordingWriter
from loadgen.replay import replay_source
from loadgen.source import synthetic_source
from schemas.compare import read_native
from schemas.errors import ConfigError
from schemas.user.loader import UserSchema, load_schema
from schemas.user.synthetic import make_payloads
from service.kafka.headers import CONTENT_TYPE

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "usermodels"
SHOP = "shop:Order"
NO_ID = "strict_orders:Reading"
"""A schema without an id field: `sensor`, `value`, `taken_at`."""


@pytest.fixture(autouse=True)
def _user_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixtures are a user's own modules, importable from PYTHONPATH."""
    monkeypatch.syspath_prepend(str(FIXTURES))
    for name in list(os.environ):
        if name.startswith(("LOADGEN_", "KAFKA_")):
            monkeypatch.delenv(name)


def settings(**kw: Any) -> LoadgenSettings:
    return LoadgenSettings.model_validate({"topic": "t", "schema": SHOP} | kw)


def shop() -> UserSchema:
    return load_schema(SHOP)


class TestSettings:
    """`--schema` beside `--profile`, payload sizes and keys, checked before Kafka."""

    def test_schema_from_every_source(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        toml = tmp_path / "lg.toml"
        toml.write_text('[loadgen]\nschema = "events:Event"\nlist_len = [1, 2]\n')
        s = load_settings(config_file=toml)
        assert (s.schema_spec, s.list_len) == ("events:Event", (1, 2))
        monkeypatch.setenv("LOADGEN_SCHEMA", SHOP)
        monkeypatch.setenv("LOADGEN_LIST_LEN", "3")
        s = load_settings(config_file=toml)
        assert (s.schema_spec, s.list_len) == (SHOP, (3, 3))
        assert s.user_schema is not None and s.user_schema.name == SHOP
        s = load_settings({"str_len": "5,9"}, config_file=toml)
        assert s.synth_options.str_len == (5, 9)
        assert s.synth_options.list_len == (3, 3)

    def test_profile_still_names_the_built_ins(self) -> None:
        assert load_settings({"profile": "small"}).schema_spec == "small"
        assert load_settings({"schema": "large"}).forms.name == "large"
        assert (
            load_settings({"schema": "small", "profile": "small"}).user_schema is None
        )
        assert load_settings().schema_spec == "medium"

    @pytest.mark.parametrize(
        ("overrides", "expected"),
        [
            (
                {"schema": "refused:NotAModel"},
                "loadgen.schema = 'refused:NotAModel' (flag schema): schema error: "
                "refused:NotAModel: ",
            ),
            ({"schema": SHOP, "profile": "small"}, "and profile 'small' disagree"),
            ({"list_len": "2,4"}, "list_len: only a user's schema's payloads"),
            ({"schema": SHOP, "list_len": "4,2"}, "expected LO,HI with LO <= HI"),
            ({"schema": SHOP, "str_len": "x"}, "expected LO,HI (e.g. 2,4) or N"),
            ({"schema": SHOP, "none_ratio": 2}, "loadgen.none_ratio = 2"),
            ({"schema": SHOP, "large_bytes": 1000}, "large_bytes sizes the built-in"),
            ({"schema": NO_ID, "key": "entity"}, "has no top-level id field"),
        ],
    )
    def test_errors(self, overrides: dict[str, Any], expected: str) -> None:
        with pytest.raises(ConfigError) as info:
            load_settings(overrides)
        assert expected in str(info.value)

    def test_bad_schema_exits_2_in_one_line(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        argv = ["--schema", "refused:NotAModel", "--bootstrap-servers", "127.0.0.1:1"]
        assert main([*argv, "--count", "1"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is not a pydantic BaseModel" in err
        assert "cannot reach" not in err


class TestSynthesis:
    """The pool of a user's schema: seeded, sized as asked, keyed by its id field."""

    def test_sizes_are_the_ones_asked_for(self) -> None:
        s = settings(
            codec="msgspec-json",
            pool_size=40,
            list_len="3,3",
            str_len="7,7",
            none_ratio=0,
        )
        codec = get_codec("msgspec-json", shop())
        for value in synthetic_source(s).values:
            order = read_native(codec.decode(value or b""), shop().shape)
            assert len(order["items"]) == 3
            assert order["coupon"] is not None
            texts = [order["order_id"], order["coupon"], order["customer"]["email"]]
            texts += [item["sku"] for item in order["items"]]
            assert {len(t) for t in texts} == {7}

    def test_every_codec_sends_the_same_values(self) -> None:
        read = []
        for name in REAL_CODECS:
            codec = get_codec(name, shop())
            source = synthetic_source(settings(codec=name, pool_size=30, seed=4))
            assert source.content_type == codec.content_type.encode()
            read.append(
                [
                    read_native(codec.decode(v or b""), shop().shape)
                    for v in source.values
                ]
            )
        assert all(r == read[0] for r in read)
        other = synthetic_source(settings(pool_size=30, seed=5)).values
        assert other != synthetic_source(settings(pool_size=30, seed=4)).values

    def test_keys(self) -> None:
        source = synthetic_source(settings(pool_size=5))
        payloads = make_payloads(shop().shape, 5, seed=0)
        assert source.keys == [p["order_id"].encode() for p in payloads]
        assert synthetic_source(settings(pool_size=5, key="none")).keys == [None] * 5
        no_id = settings(schema=NO_ID, pool_size=5)
        assert no_id.key_kind == "seq"  # the default falls back; asked for, an error
        assert synthetic_source(no_id).keys == [None] * 5


def _record(offset: int, codec: CodecName, payload: dict[str, Any]) -> Record:
    c = get_codec(codec, shop())
    value = c.encode(c.from_builtins(payload))
    headers: list[tuple[str, bytes | None]] = [(CONTENT_TYPE, c.content_type.encode())]
    return Record(0, offset, 1, 1000 + offset, None, value, headers)


def _recording(path: Path, records: list[Record]) -> Path:
    with RecordingWriter(path, RecordingInfo("orders", 1, 1)) as out:
        for r in records:
            out.write(r)
    return path


class TestReplayTranscode:
    """Recorded bytes of a user's schema become any codec's, through that schema."""

    @pytest.mark.parametrize("target", REAL_CODECS)
    def test_every_record_keeps_its_values(
        self, tmp_path: Path, target: CodecName
    ) -> None:
        payloads = make_payloads(shop().shape, 9, seed=2)
        writers: list[CodecName] = ["json+pydantic", "msgspec-msgpack", "protobuf"]
        recs = [_record(i, writers[i % 3], p) for i, p in enumerate(payloads)]
        path = _recording(tmp_path / "shop.rec", recs)
        source = replay_source(settings(replay=path, transcode=target, rate=10), 1)
        codec = get_codec(target, shop())
        assert source.content_types == [codec.content_type.encode()] * 9
        got = [read_native(codec.decode(v or b""), shop().shape) for v in source.values]
        reference = get_codec("msgspec-msgpack", shop())
        assert got == [
            read_native(reference.from_builtins(p), shop().shape) for p in payloads
        ]

    def test_recorded_json_is_read_with_the_users_own_form(
        self, tmp_path: Path
    ) -> None:
        # A lax pydantic model takes "3" for an int: its service may well write it.
        payload = make_payloads(shop().shape, 1, seed=2)[0]
        payload["items"][0]["quantity"] = str(payload["items"][0]["quantity"])
        recs = [
            Record(
                0,
                0,
                1,
                1,
                None,
                msgspec.json.encode(payload),
                [(CONTENT_TYPE, b"application/json")],
            )
        ]
        path = _recording(tmp_path / "lax.rec", recs)
        s = settings(replay=path, transcode="protobuf", rate=10)
        assert s.transcode_json == "json+pydantic"
        value = replay_source(s, 1).values[0]
        decoded = get_codec("protobuf", shop()).decode(value or b"")
        assert decoded.items[0].quantity == int(payload["items"][0]["quantity"])

    def test_a_foreign_record_names_the_schema(self, tmp_path: Path) -> None:
        recs = [Record(0, 7, 1, 1, None, b'{"order_id": 1}', [])]
        path = _recording(tmp_path / "bad.rec", recs)
        with pytest.raises(
            ConfigError, match=r"offset 7: order_id: does not decode as 'shop:Order'"
        ):
            replay_source(settings(replay=path, transcode="protobuf", rate=10), 1)


class TestRefusedCodec:
    """A codec that cannot carry a field of the schema is a config error before
    Kafka; the other codecs load."""

    @pytest.mark.parametrize(
        "overrides",
        [
            {"codec": "protobuf"},
            {"codec": "msgspec-msgpack"},
            {"codec": "json+pydantic", "replay": "README.md", "transcode": "protobuf"},
        ],
    )
    def test_refused(self, overrides: dict[str, Any]) -> None:
        with pytest.raises(ConfigError, match="cannot carry a field of tallies:Tally"):
            load_settings({"schema": "tallies:Tally", **overrides})

    def test_msgspec_json_loads(self) -> None:
        s = load_settings({"schema": "tallies:Tally", "codec": "msgspec-json"})
        assert len(synthetic_source(s).values) > 0
