"""codec-ab on a user's schema: the plan, the report's words, the children's imports."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import msgspec
import pytest

from abrunner.cli import _FLAGS, build_parser, main, plan_from_settings
from abrunner.config import TOOL, AbSettings
from abrunner.lab import inprocess_bench, runner
from abrunner.lab.processes import child_env
from abrunner.plan import Case, Plan, Profile
from abrunner.report import answer, tables as abreport
from abrunner.report.terminal import print_tables
from abrunner.results import CaseResult, Report
from codec import get_codec
from loadgen.recording import Record, RecordingInfo, RecordingWriter
from schemas.errors import ConfigError
from schemas.registry import resolve
from schemas.user.synthetic import make_payloads
from service.kafka.headers import CONTENT_TYPE
from service.settings.cli_flags import load_from_args

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "usermodels"
ROOT = FIXTURES.parents[2]
SHOP = "shop:Order"


@pytest.fixture(autouse=True)
def _user_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixtures are a user's own modules, importable from PYTHONPATH."""
    monkeypatch.syspath_prepend(str(FIXTURES))
    for name in list(os.environ):
        if name.startswith(("AB_", "KAFKA_", "LOADGEN_")):
            monkeypatch.delenv(name)


def plan(*argv: str) -> Plan:
    args = build_parser().parse_args(list(argv))
    return plan_from_settings(load_from_args(AbSettings, TOOL, args, _FLAGS, {}))


class TestPlan:
    """`--schema` makes one profile of the user's spec; `--replay` rides along."""

    def test_schema_and_replay(self, tmp_path: Path) -> None:
        recording = _recording(tmp_path / "orders.rec", _shop_orders())
        p = plan("--schema", SHOP, "--replay", str(recording))
        assert p.profiles == (Profile(SHOP),) and p.profiles[0].user
        assert p.replay == str(recording)
        assert len(p.cases()) == 6  # every wire codec by default
        for case in p.cases():
            assert re.fullmatch(r"[A-Za-z0-9._-]+", case.tag), case.tag
        assert plan("--schema", "small").profiles == (Profile("small"),)

    def test_loadgen_args_are_split_like_worker_args(self) -> None:
        p = plan("--schema", SHOP, "--loadgen-arg=--list-len=1,8")
        assert p.loadgen_args == ("--list-len", "1,8")

    def test_a_long_proto_path_makes_a_legal_topic(self) -> None:
        spec = f"{FIXTURES / ('x' * 300)}.proto:Shipment"
        tag = Case("protobuf", Profile(spec), 0).tag
        assert re.fullmatch(r"[A-Za-z0-9._-]{1,100}", tag), tag
        assert tag.endswith("x.proto-Shipment")

    @pytest.mark.parametrize(
        ("argv", "needle"),
        [
            (["--schema", SHOP, "--profile", "small"], "schema replaces --profile"),
            (
                ["--schema", SHOP, "--large-bytes", "1000"],
                "schema replaces --large-bytes",
            ),
            (
                ["--schema", "refused:NotAModel"],
                "ab.schema = 'refused:NotAModel' (flag --schema): schema error: "
                "refused:NotAModel: ",
            ),
            (["--schema", SHOP, "--replay", "no-such.rec"], "replay: no such file"),
            (["--profiles", "small,medium", "--replay", "README.md"], "not a sweep"),
        ],
    )
    def test_exit_2_in_one_line(
        self,
        argv: list[str],
        needle: str,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        assert main([*argv, "--out", str(tmp_path / "ab"), "--no-bench"]) == 2
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1
        assert not (tmp_path / "ab").exists()  # nothing ran

    def test_a_profile_is_a_builtin_or_a_spec(self) -> None:
        with pytest.raises(ConfigError, match="huge"):
            Profile("huge")
        with pytest.raises(ConfigError):
            Profile(SHOP, 1000)


def _report(replay: str | None) -> Report:
    plan = Plan(
        codecs=("json+pydantic", "protobuf"),
        profiles=(Profile(SHOP),),
        rate=2000,
        duration=3,
        warmup=1,
        repeat=1,
        max_mode=False,
        max_messages=1000,
        partitions=4,
        baseline="json+pydantic",
        out="ab",
        replay=replay,
    )
    results = [
        CaseResult(codec=c, profile=SHOP, repeat=0, cpu_us_per_msg=u, lost=0)
        for c, u in (("json+pydantic", 30.0), ("protobuf", 10.0))
    ]
    return Report(
        plan=plan,
        environment=abreport.environment("4.1.2"),
        results=results,
        summary=abreport.aggregate(results, []),
    )


class TestReport:
    """report.md names the user's schema and, for a replay, the recording."""

    def test_synthetic(self) -> None:
        md = abreport.markdown(_report(None))
        assert f"## Schema `{SHOP}`" in md and "## Profile" not in md
        assert f"your schema `{SHOP}`, synthesized from its types" in md

    def test_replay(self) -> None:
        md = abreport.markdown(_report("orders.rec"))
        assert f"your schema `{SHOP}` messages replayed from `orders.rec`" in md

    def test_replay_of_a_builtin_schema(self) -> None:
        built_in = _report("orders.rec")
        plan = msgspec.structs.replace(built_in.plan, profiles=(Profile("medium"),))
        assert plan.payloads == (
            "Payloads: `medium` messages replayed from `orders.rec`: as recorded, "
            "byte for byte, in a case of the recording's wire format; transcoded "
            "into the case's codec in the others."
        )
        assert msgspec.structs.replace(plan, replay=None).payloads is None

    def test_report_json_reads_back_without_the_users_module(self) -> None:
        encoded = msgspec.json.encode(_report("orders.rec"))
        decoded = msgspec.json.decode(encoded.replace(b"shop:", b"gone:"), type=Report)
        assert decoded.plan.profiles == (Profile("gone:Order"),)

    def test_no_in_process_figures_for_a_users_schema(self) -> None:
        said: list[str] = []
        assert inprocess_bench.measure(_report(None).plan, said.append) == []
        assert said == [f"{SHOP}: no in-process figures (built-in payloads only)"]


class TestChildEnv:
    """A case's worker and load generator can import the user's module."""

    def test_the_modules_directory_comes_first(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("PYTHONPATH", "/elsewhere")
        monkeypatch.setenv("LOADGEN_PROFILE", "small")
        env = child_env(SHOP)
        assert env["PYTHONPATH"].split(os.pathsep) == [str(FIXTURES), "/elsewhere"]
        assert "LOADGEN_PROFILE" not in env  # --schema must not meet a contradiction

    def test_a_dotted_module_roots_at_its_top_package(self) -> None:
        env = child_env("tests.fixtures.usermodels.shop:Order")
        assert env["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)

    def test_builtins_and_proto_files_change_nothing(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("LOADGEN_PROFILE", "small")
        assert child_env("medium") == dict(os.environ)
        proto = child_env(f"{FIXTURES / 'shipment.proto'}:Shipment")
        assert proto.get("PYTHONPATH") == os.environ.get("PYTHONPATH")


class TestSchemaLimits:
    """A codec the schema refuses is left out, and the report says which and why;
    the checks a measured codec skips are listed."""

    def test_left_out_with_the_reason(self) -> None:
        p = plan("--schema", "tallies:Tally")
        assert "protobuf" not in p.codecs and "msgspec-msgpack" not in p.codecs
        assert "msgspec-json" in p.codecs and p.baseline == "json-stdlib+pydantic"
        assert "orjson+pydantic" not in p.codecs  # orjson reads one as a float
        assert [codec for codec, _ in p.left_out] == [
            "orjson+pydantic",
            "msgspec-msgpack",
            "protobuf",
        ]
        report = _report(None)
        md = abreport.markdown(
            msgspec.structs.replace(
                report, plan=msgspec.structs.replace(report.plan, left_out=p.left_out)
            )
        )
        assert (
            "**Left out: `protobuf`**: protobuf cannot carry a field of tallies:Tally:"
            "\n\n- Tally.total: its bounds allow ints past 64 bits" in md
        )

    def test_left_out_a_line_per_field_and_said_on_the_terminal(self) -> None:
        """report.md ran every field's reason into one line; the terminal said
        nothing of a codec the default set left out."""
        p = plan("--schema", "checkout:OrderPlaced", "--out", "ab-orders")
        assert [codec for codec, _ in p.left_out] == ["protobuf"]
        report = msgspec.structs.replace(_report(None), plan=p)
        md = abreport.markdown(report)
        assert (
            "**Left out: `protobuf`**: protobuf cannot carry 8 fields of "
            "checkout:OrderPlaced:\n\n"
            "- OrderPlaced.pickup_slot: no protobuf type decodes to a time of day\n"
            "- OrderPlaced.hold_for: google.protobuf.Duration is not mapped"
        ) in md
        out = io.StringIO()
        print_tables(report, out)
        assert (
            "Left out: `protobuf` (protobuf cannot carry 8 fields of "
            "checkout:OrderPlaced; each is listed in ab-orders/report.md)."
        ) in out.getvalue()

    def test_an_explicit_baseline_left_out_is_an_error(self) -> None:
        with pytest.raises(ConfigError, match="--baseline 'protobuf' is not among"):
            plan("--schema", "tallies:Tally", "--baseline", "protobuf")

    def test_skipped_checks_are_in_the_report(self) -> None:
        p = plan("--schema", SHOP, "--codecs", "json+pydantic,protobuf")
        assert "Order.items[].quantity: protobuf skips ge=1, le=100" in p.skipped
        report = _report(None)
        md = abreport.markdown(msgspec.structs.replace(report, plan=p))
        assert "- Order.items[].quantity: protobuf skips ge=1, le=100" in md
        assert "that a measured codec skips (its CPU figure does not include them" in md

    def test_the_report_says_which_codecs_ran_the_validators(self) -> None:
        """`--run-validators`: the msgspec workers run the after validators, the
        protobuf ones do not; without it, no derived codec does (issue 29, item 3)."""
        codecs = ("--codecs", "json+pydantic,msgspec-json,protobuf")
        on = plan("--schema", "parcels:Parcel", *codecs, "--run-validators")
        assert "--run-validators" in on.worker_args
        upper = "Parcel.tracking: field_validator(mode='after') 'upper'"
        assert f"{upper} run by msgspec-json (--run-validators)" in on.validators
        assert any(
            line.startswith(f"{upper} not run by protobuf:") for line in on.not_run
        )
        md = abreport.markdown(msgspec.structs.replace(_report(None), plan=on))
        assert f"- {upper} run by msgspec-json (--run-validators)" in md
        off = plan("--schema", "parcels:Parcel", *codecs)
        assert "--run-validators" not in off.worker_args
        assert any(
            line.startswith(f"{upper} not run by msgspec-json, protobuf:")
            for line in off.not_run
        )
        assert off.validators == ()

    def test_the_code_a_measured_codec_does_not_run_is_in_the_report(self) -> None:
        """Validators and computed fields the derived codecs skip: `check` lists
        them; the A/B report, whose CPU figures they change, did not."""
        spec = "checkout:PaymentSettled"
        p = plan("--schema", spec, "--codecs", "json+pydantic,msgspec-json,avro")
        wrap = (
            "PaymentSettled: model_validator(mode='wrap') 'default_currency' not run "
            "by msgspec-json, avro: "
        )
        assert any(line.startswith(wrap) for line in p.not_run), p.not_run
        md = abreport.markdown(msgspec.structs.replace(_report(None), plan=p))
        assert f"- {wrap}" in md
        assert "Code of your model a measured codec does not run" in md
        with_plan = msgspec.structs.replace(_report(None), plan=p)
        assert answer.not_run_by(with_plan, "avro")[:2] == [
            "PaymentSettled (model_validator(mode='wrap') 'default_currency')",
            "PaymentSettled (computed_field 'is_card')",
        ]
        assert len(answer.not_run_by(with_plan, "avro")) == 5
        assert answer.not_run_by(with_plan, "json+pydantic") == []
        only = plan("--schema", spec, "--codecs", "json+pydantic,orjson+pydantic")
        assert only.not_run == ()

    def test_a_pattern_no_payload_can_match_fails_before_any_case(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        (tmp_path / "lookaround_models.py").write_text(
            "import pydantic\n\n\nclass L(pydantic.BaseModel):\n"
            "    model_config = pydantic.ConfigDict(regex_engine='python-re')\n"
            "    a: str = pydantic.Field(pattern='(?=x)x')\n"
            "    b: str = pydantic.Field(pattern='(a)\\\\1')\n"
        )
        monkeypatch.syspath_prepend(str(tmp_path))
        with pytest.raises(ConfigError) as info:
            plan("--schema", "lookaround_models:L")
        lines = str(info.value).splitlines()
        assert lines[0] == "schema error: 2 fields cannot be synthesized:"
        assert "L.a: cannot synthesize" in lines[1]
        assert "L.b: cannot synthesize" in lines[2]


def _recording(path: Path, values: list[bytes]) -> Path:
    """A recording of JSON `values` (one partition, as `codec-loadgen record` writes)."""
    headers: list[tuple[str, bytes | None]] = [(CONTENT_TYPE, b"application/json")]
    with RecordingWriter(path, RecordingInfo("orders", 1, 1)) as out:
        for i, value in enumerate(values):
            out.write(Record(0, i, 1, 1000 + i, None, value, headers))
    return path


def _shop_orders() -> list[bytes]:
    """`shop:Order` messages as the team's service writes them."""
    codec = get_codec("json+pydantic", resolve(SHOP))
    payloads = make_payloads(resolve(SHOP).shape, 3, seed=2)  # type: ignore[union-attr]
    return [codec.encode(codec.from_builtins(p)) for p in payloads]


LAX = "tests.fixtures.usermodels.lax:Model"
LAX_VALUES = [
    b"not JSON at all",  # a bad message: the dead-letter topic's, not the plan's
    b'{"id": "123", "name": "b", "amount": 2.0, "extra": true}',  # lax: pydantic
    b'{"id":3,"name":"c","amount":1e3}',
]


class TestReplayProbe:
    """A recording that does not decode as the schema is refused before the run."""

    def test_another_schemas_recording_exits_2_in_one_line(
        self,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        def ran(*args: object) -> None:
            raise AssertionError("the run started")  # it would dead-letter all

        monkeypatch.setattr(runner, "run", ran)
        monkeypatch.setattr("abrunner.config.recorded_local_broker", lambda: None)
        rec = _recording(tmp_path / "lax.rec", LAX_VALUES)
        out = tmp_path / "ab"
        # No --schema: the default profile, `medium`, is not what was recorded.
        assert main(["--replay", str(rec), "--out", str(out), "--no-bench"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert err.startswith(
            f"replay: '{rec}' does not decode as schema 'medium': none of its "
            "first 3 records does (the first, partition 0 offset 0: "
        )
        assert err.rstrip().endswith("give --schema the schema it was recorded with")
        assert not out.exists()  # nothing ran

    def test_one_record_of_the_schema_is_enough(self, tmp_path: Path) -> None:
        # The lax model reads its own lax JSON; the bad first record is a dead letter.
        rec = _recording(tmp_path / "lax.rec", LAX_VALUES)
        assert plan("--schema", LAX, "--replay", str(rec)).replay == str(rec)
        with pytest.raises(ConfigError, match="schema 'small'"):
            plan("--profile", "small", "--replay", str(rec))

    def test_not_a_recording(self, tmp_path: Path) -> None:
        empty = tmp_path / "empty.rec"
        empty.write_bytes(b"")
        with pytest.raises(ConfigError, match=r"empty\.rec': not a codec-loadgen"):
            plan("--schema", SHOP, "--replay", str(empty))
