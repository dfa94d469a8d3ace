"""codec-worker on a user's schema: loaded with the settings, exit 2 before Kafka."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codec import get_codec
from schemas.errors import ConfigError
from schemas.registry import resolve
from schemas.user.loader import UserSchema
from schemas.user.synthetic import make_payloads
from service import __version__
from service.app import Worker
from service.cli import build_parser, main
from service.kafka.headers import CONTENT_TYPE
from service.settings.worker import Settings, load_settings
from tests.fakes import FakeConsumer, FakeMessage, FakeProducer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "usermodels"
SHOP = "shop:Order"
UNREACHABLE = "127.0.0.1:1"


@pytest.fixture(autouse=True)
def _user_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixtures are a user's own modules, importable from PYTHONPATH."""
    monkeypatch.syspath_prepend(str(FIXTURES))
    for name in list(os.environ):
        if name.startswith(("WORKER_", "KAFKA_")):
            monkeypatch.delenv(name)


class TestSettings:
    """`--schema MODULE:NAME` or `FILE.proto:Message` beside the built-in keys."""

    def test_from_flag_env_and_toml(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        toml = tmp_path / "w.toml"
        toml.write_text('[worker.codec]\nschema = "events:Event"\n')
        assert load_settings().codec.forms is resolve("medium")
        assert load_settings(config_file=toml).codec.schema_ == "events:Event"
        monkeypatch.setenv("WORKER_CODEC__SCHEMA", SHOP)
        assert load_settings(config_file=toml).codec.schema_ == SHOP
        proto = f"{FIXTURES / 'shipment.proto'}:Shipment"
        flags = {"codec": {"schema": proto}}
        settings = load_settings(flags, config_file=toml)
        forms = settings.codec.forms
        assert isinstance(forms, UserSchema) and forms.source == "proto"

    def test_loaded_once_per_process(self) -> None:
        first = load_settings({"codec": {"schema": SHOP}}).codec.forms
        second = load_settings({"codec": {"schema": f" {SHOP} "}}).codec.forms
        assert first is second is resolve(SHOP)

    def test_the_codec_is_bound_to_the_user_type(self) -> None:
        codec = Settings(codec={"name": "protobuf", "schema": SHOP}).codec.build()
        assert codec.native_type is resolve(SHOP).proto
        auto = load_settings({"codec": {"name": "auto", "schema": SHOP}}).codec.build()
        assert auto.native_type is resolve(SHOP).struct  # writes msgspec-json

    def test_help_names_every_form(self) -> None:
        text = " ".join(build_parser().format_help().split())
        assert "small|medium|large, MODULE:NAME or FILE.proto:Message" in text


class TestBadSpec:
    """A spec that names nothing usable is one line, exit status 2, Kafka untouched."""

    @pytest.mark.parametrize(
        ("spec", "reason"),
        [
            ("refused:NotAModel", "is not a pydantic BaseModel or msgspec Struct"),
            ("no_such_module_here:Order", "cannot import 'no_such_module_here'"),
            ("shop:Nope", "'shop' has no 'Nope'"),
            ("huge", "expected small|medium|large, MODULE:NAME or FILE.proto:Message"),
            ("missing.proto:Order", "cannot read 'missing.proto'"),
        ],
    )
    def test_one_line_exit_2(
        self, spec: str, reason: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        code = main(["--schema", spec, "--bootstrap-servers", UNREACHABLE])
        err = capsys.readouterr().err
        assert code == 2
        assert err.count("\n") == 1 and "Traceback" not in err
        assert err.startswith(f"config error: worker.codec.schema = {spec!r} (flag ")
        assert reason in err
        assert "cannot reach" not in err  # failed before any Kafka client existed

    @pytest.mark.parametrize(
        "argv",
        [
            ["--codec", "protobuf"],
            ["--codec", "msgspec-json", "--shadow-codec", "msgspec-msgpack"],
            ["--codec", "auto", "--auto-output", "protobuf"],
        ],
    )
    def test_a_codec_the_schema_refuses_is_a_config_error(
        self, argv: list[str], capsys: pytest.CaptureFixture[str]
    ) -> None:
        code = main(
            ["--schema", "tallies:Tally", *argv, "--bootstrap-servers", UNREACHABLE]
        )
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err
        assert "cannot carry a field of tallies:Tally:\n  Tally.total: " in err
        assert "cannot reach" not in err

    @pytest.mark.parametrize("codec", ["msgspec-json", "json+pydantic", "auto"])
    def test_other_codecs_are_not_refused_for_protobuf(self, codec: str) -> None:
        settings = load_settings({"codec": {"schema": "tallies:Tally", "name": codec}})
        built = settings.codec.build()
        assert built.name == codec

    def test_settings_raise_config_error(self) -> None:
        with pytest.raises(ConfigError, match=r"WithSet\.tags: protobuf has no set"):
            load_settings({"codec": {"schema": "refused:WithSet", "name": "protobuf"}})


class _Admin:
    """The start-up topic check: every topic exists (its own factory)."""

    bootstrap = "fake:9092"

    def __call__(self, _config: dict[str, Any]) -> _Admin:
        return self

    def partitions(self, _name: str, timeout: float = 5.0) -> int:
        return 1

    def max_message_bytes(self, _name: str) -> int | None:
        return None


@pytest.fixture
def unfreeze() -> Iterator[None]:
    """`run()` freezes the heap for its lifetime; give the test process it back."""
    yield
    gc.unfreeze()


@pytest.mark.usefixtures("unfreeze")
class TestWorkerRun:
    """A worker on a user's schema decodes every form and labels worker_info."""

    @pytest.mark.parametrize("codec", ["protobuf", "msgspec-json", "msgspec-msgpack"])
    def test_run_a_uint64_proto(self, codec: str, tmp_path: Path) -> None:
        proto = tmp_path / "ev.proto"
        proto.write_text(
            'syntax = "proto3";\nmessage Ev { uint64 id = 1; string name = 2; }\n'
        )
        spec = f"{proto}:Ev"
        writer = get_codec(codec, resolve(spec))  # type: ignore[arg-type]
        values = [{"id": 2**64 - 1 - i, "name": f"n{i}"} for i in range(5)]
        messages = [
            FakeMessage(writer.encode(writer.from_builtins(v)), 0, i)
            for i, v in enumerate(values)
        ]
        consumer = FakeConsumer(batches=[messages], to_assign=[0])
        settings = Settings(
            consumer={"topic": "in", "group_id": "g"},
            codec={"name": codec, "schema": spec},
            metrics={"port": 0},
            processing={"batch_timeout_ms": 1.0},
        )
        worker = Worker(
            settings,
            consumer_factory=consumer,
            producer_factory=FakeProducer(),
            admin_factory=_Admin(),  # type: ignore[arg-type]  # the calls it needs
        )
        consumer.on_drained = worker.stop
        assert worker.run() == 0
        sample = worker.registry.get_sample_value
        assert sample("worker_messages_total", {"codec": codec, "outcome": "ok"}) == 5

    @pytest.mark.parametrize("codec", ["protobuf", "json+pydantic", "auto"])
    def test_run(self, codec: str) -> None:
        schema = resolve(SHOP)
        assert isinstance(schema, UserSchema)
        payloads = make_payloads(schema.shape, 12, seed=5)
        writers = ["msgspec-msgpack", "protobuf", "orjson+pydantic"]
        messages = []
        for i, payload in enumerate(payloads):
            writer = get_codec(writers[i % 3] if codec == "auto" else codec, schema)  # type: ignore[arg-type]
            value = writer.encode(writer.from_builtins(payload))
            headers: list[tuple[str, bytes | None]] = [
                (CONTENT_TYPE, writer.content_type.encode())
            ]
            messages.append(FakeMessage(value, 0, i, _headers=headers))
        consumer = FakeConsumer(batches=[messages], to_assign=[0])
        settings = Settings(
            consumer={"topic": "in", "group_id": "g"},
            codec={"name": codec, "schema": SHOP},
            metrics={"port": 0},
            processing={"batch_timeout_ms": 1.0},
        )
        worker = Worker(
            settings,
            consumer_factory=consumer,
            producer_factory=FakeProducer(),
            admin_factory=_Admin(),  # type: ignore[arg-type]  # the calls it needs
        )
        consumer.on_drained = worker.stop
        assert worker.run() == 0
        sample = worker.registry.get_sample_value
        assert sample("worker_messages_total", {"codec": codec, "outcome": "ok"}) == 12
        info = {"codec": codec, "schema": SHOP, "version": __version__}
        assert sample("worker_info", info) == 1
