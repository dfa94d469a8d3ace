"""A team's handler (`--logic MODULE:CALLABLE`): loaded, checked, called as the step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from prometheus_client import CollectorRegistry

from codec import CodecName, get_codec
from loadgen.payloads import make_payloads
from schemas.errors import ConfigError
from service import cli
from service.delivery.dead_letters import PoisonHandler
from service.delivery.gated_writes import ConfirmedProducer
from service.logic.builtin import Handler
from service.logic.user_handler import load_handler
from service.loop.batch_loop import BatchLoop
from service.settings.worker import Settings
from service.telemetry.metrics import Metrics
from tests.fakes import FakeConsumer, FakeMessage, FakeProducer

BASICS = "tests.fixtures.handlers.basics"
PAYLOADS = make_payloads("medium", 40, seed=5)
GIFTS = [i for i, p in enumerate(PAYLOADS) if p["gift"]]
CODECS: tuple[CodecName, ...] = ("json+pydantic", "msgspec-msgpack", "protobuf")


class TestLoadHandler:
    """A spec imports a callable of one argument, or says in one line why not."""

    def test_a_function_loads_as_itself(self) -> None:
        from tests.fixtures.handlers import basics

        assert load_handler(f"{BASICS}:same_message") is basics.same_message

    @pytest.mark.parametrize(
        ("spec", "says"),
        [
            ("no_colon", "expected aggregate|noop|flaky|fields or MODULE:CALLABLE"),
            ("tests.fixtures.handlers.nope:f", "cannot import"),
            (f"{BASICS}:missing", "has no 'missing'"),
            (f"{BASICS}:NOT_CALLABLE", "int object is not callable"),
            (f"{BASICS}:two_arguments", "must take one decoded message"),
            (f"{BASICS}:no_arguments", "must take one decoded message"),
        ],
    )
    def test_a_bad_spec_is_one_config_line(self, spec: str, says: str) -> None:
        with pytest.raises(ConfigError) as info:
            load_handler(spec)
        assert says in str(info.value)
        assert "\n" not in str(info.value)
        assert str(info.value).startswith("logic error: ")

    def test_the_worker_exits_2_before_kafka(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        argv = ["--bootstrap-servers", "127.0.0.1:1", "--topic", "t"]
        assert cli.main([*argv, "--logic", f"{BASICS}:two_arguments"]) == 2
        err = capsys.readouterr().err
        assert "processing.logic" in err and "must take one decoded message" in err

    def test_builtins_and_specs_are_settings(self) -> None:
        assert Settings(processing={"logic": "flaky"}).processing.logic == "flaky"
        spec = f"{BASICS}:nothing"
        assert Settings(processing={"logic": spec}).processing.logic == spec


class Rig:
    """A loop with a team's handler, writing results to `out`, on fakes."""

    def __init__(self, codec_name: CodecName, logic: str, decode_every: int) -> None:
        self.codec = get_codec(codec_name, "medium")
        self.consumer = FakeConsumer()
        self.producer = FakeProducer()
        confirmed = ConfirmedProducer(self.producer, timeout_s=1.0)
        self.registry = CollectorRegistry()
        metrics = Metrics(self.registry, codec=codec_name, schema="medium")
        handler = Handler("medium", logic)
        self.loop = BatchLoop(
            self.consumer,
            codec=self.codec,
            step=handler.step,
            results=handler.results,
            metrics=metrics,
            poison=PoisonHandler(
                metrics, codec=codec_name, group="g", dead_letters=(confirmed, "dlq")
            ),
            output=(confirmed, "out"),
            max_payload_bytes=1 << 20,
            batch_size=100,
            batch_timeout_s=0.01,
            decode_sample_every=decode_every,
            max_attempts=2,
        )
        self.loop.assign([TopicPartition("in", 0)])

    def run(self, n: int) -> None:
        batch = [
            FakeMessage(
                self.codec.encode(self.codec.from_builtins(PAYLOADS[i])),
                0,
                i,
                _key=str(i).encode(),
            )
            for i in range(n)
        ]
        self.consumer.batches.append(batch)
        self.loop.process(self.consumer.consume(n))

    def written(self, topic: str) -> list[dict[str, Any]]:
        return [r for r in self.producer.acked if r["topic"] == topic]


@pytest.fixture(params=[1, 3, 10_000], ids=["timed", "alternate", "run"])
def every(request: pytest.FixtureRequest) -> int:
    """Every message through the timed path, some, or none."""
    return int(request.param)


@pytest.mark.parametrize("codec_name", CODECS)
class TestResults:
    """The handler's return value is the result; None writes nothing; a raise is
    retried, then dead-lettered with its type and masked message."""

    def test_the_returned_message_is_written(
        self, codec_name: CodecName, every: int
    ) -> None:
        rig = Rig(codec_name, f"{BASICS}:same_message", every)
        rig.run(10)
        out = rig.written("out")
        assert [r["key"] for r in out] == [str(i).encode() for i in range(10)]
        decoded = [rig.codec.to_builtins(rig.codec.decode(r["value"])) for r in out]
        assert decoded == [
            rig.codec.to_builtins(rig.codec.from_builtins(p)) for p in PAYLOADS[:10]
        ]

    def test_none_writes_nothing(self, codec_name: CodecName, every: int) -> None:
        rig = Rig(codec_name, f"{BASICS}:nothing", every)
        rig.run(10)
        assert rig.producer.acked == []
        assert rig.consumer.stored == [[("in", 0, 10)]]

    def test_a_raise_is_retried_then_dead_lettered(
        self, codec_name: CodecName, every: int
    ) -> None:
        assert GIFTS, "the seed gives no gift order"
        rig = Rig(codec_name, f"{BASICS}:refuse_gifts", every)
        rig.run(len(PAYLOADS))
        dead = rig.written("dlq")
        assert [int(r["key"]) for r in dead] == GIFTS
        headers = dict(dead[0]["headers"])
        assert headers["x-dlq-reason"] == b"logic"
        assert headers["x-dlq-exception-type"] == b"builtins.ValueError"
        assert headers["x-dlq-exception-message"] == (
            b"ValueError: gift order '...' not supported"
        )
        assert headers["x-dlq-attempts"] == b"2"
        assert len(rig.written("out")) == len(PAYLOADS) - len(GIFTS)

    def test_an_attribute_error_names_what_was_missing(
        self, codec_name: CodecName, every: int
    ) -> None:
        rig = Rig(codec_name, f"{BASICS}:dumped", every)
        rig.run(2)
        if codec_name == "json+pydantic":
            assert rig.written("dlq") == []
            return
        headers = dict(rig.written("dlq")[0]["headers"])
        kind = type(
            rig.codec.decode(rig.codec.encode(rig.codec.from_builtins(PAYLOADS[0])))
        ).__name__
        assert headers["x-dlq-exception-message"] == (
            f"AttributeError: '{kind}' object has no attribute 'model_dump'".encode()
        )

    def test_a_result_outside_the_schema_is_unencodable(
        self, codec_name: CodecName, every: int
    ) -> None:
        rig = Rig(codec_name, f"{BASICS}:order_total", every)
        rig.run(3)
        dead = rig.written("dlq")
        assert len(dead) == 3 and rig.written("out") == []
        assert dict(dead[0]["headers"])["x-dlq-stage"] == b"encode"


class TestAbLogic:
    """`codec-ab --logic` checks the handler before any broker and passes it on."""

    def test_a_bad_handler_exits_2(self, capsys: pytest.CaptureFixture[str]) -> None:
        from abrunner import cli as ab_cli

        assert ab_cli.main(["--logic", f"{BASICS}:no_arguments", "--out", "x"]) == 2
        assert "must take one decoded message" in capsys.readouterr().err

    def test_the_workers_get_it_and_find_its_module(self) -> None:
        from abrunner import cli as ab_cli
        from abrunner.config import AbSettings
        from abrunner.lab.processes import child_env

        spec = f"{BASICS}:nothing"
        plan = ab_cli.plan_from_settings(
            AbSettings(codecs=["protobuf"], logic=spec, worker_args=["--work-us=1"])
        )
        # One attempt: a handler failing on a codec's objects fails every retry.
        assert plan.worker_args == (
            *("--logic", spec, "--max-attempts", "1", "--work-us", "1"),
        )
        assert plan.logic == spec
        given = ab_cli.plan_from_settings(
            AbSettings(
                codecs=["protobuf"], logic=spec, worker_args=["--max-attempts=3"]
            )
        )
        assert given.worker_args == ("--logic", spec, "--max-attempts", "3")
        builtin = ab_cli.plan_from_settings(
            AbSettings(codecs=["protobuf"], logic="noop")
        )
        assert builtin.worker_args == ("--logic", "noop")
        root = child_env("medium", spec)["PYTHONPATH"].split(":")[0]
        assert (Path(root) / "tests" / "fixtures" / "handlers").is_dir()


class TestForms:
    """The TOML key and the environment variable take the same spec as the flag."""

    def test_environment(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        monkeypatch.setenv("WORKER_PROCESSING__LOGIC", f"{BASICS}:nothing")
        assert cli.main(["--print-config"]) == 0
        assert f"{BASICS}:nothing" in capsys.readouterr().out
        monkeypatch.setenv("WORKER_PROCESSING__LOGIC", f"{BASICS}:two_arguments")
        assert cli.main(["--print-config"]) == 2

    def test_toml(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        config = tmp_path / "c.toml"
        config.write_text(f'[worker.processing]\nlogic = "{BASICS}:missing"\n')
        assert cli.main(["--config", str(config), "--print-config"]) == 2
        assert "has no 'missing'" in capsys.readouterr().err
