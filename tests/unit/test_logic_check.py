"""`codec-schema check --logic`: a handler's verdict per codec, without Kafka."""

from __future__ import annotations

import enum
from decimal import Decimal
from pathlib import Path

import msgspec
import pytest

from abrunner.plan import Plan, Profile
from abrunner.report import tables
from abrunner.report.logic_verdicts import judge
from abrunner.results import CaseResult, Report
from loadgen.recording import Record, RecordingInfo, RecordingWriter
from schemas.user.loader import load_schema
from schemas.user.synthetic import make_payloads
from schematool import cli
from schematool.codecs import user_codec
from schematool.logic_check import CodecVerdict, check_logic
from schematool.logic_results import differences, normalise
from schematool.recorded import recorded_payloads
from service.logic.user_handler import load_handler

PAYMENTS = "tests.fixtures.usermodels.payments:PaymentEvent"
SETTLE = "tests.fixtures.handlers.settlement:settle"
CURRENCIES = "tests.fixtures.handlers.settlement:currencies"
CODECS = ("json-stdlib+pydantic", "msgspec-json", "protobuf")
DUMPED = "tests.fixtures.handlers.basics:dumped"
ASYNC_DUMPED = "tests.fixtures.handlers.async_orders:dumped"
ASYNC_TOUCH = "tests.fixtures.handlers.async_orders:touch"


def verdicts(spec: str) -> dict[str, CodecVerdict]:
    schema = load_schema(PAYMENTS)
    payloads = make_payloads(schema.shape, 30, seed=3)
    report = check_logic(schema, spec, load_handler(spec), payloads, codecs=CODECS)
    return dict(report.verdicts)


class TestVerdicts:
    """Works, differs (which field), fails (what it touched): per codec."""

    def test_the_team_handler_breaks_where_it_should(self) -> None:
        v = verdicts(SETTLE)
        assert v["json+pydantic"].verdict == "reference"
        assert v["json-stdlib+pydantic"].verdict == "works"
        struct = v["msgspec-json"]
        assert struct.verdict == "fails"
        assert "touched `model_dump` on msgspec Struct PaymentEvent" in struct.failure
        assert "settlement.py" in struct.failure
        assert struct.differed == 0
        proto = v["protobuf"]
        assert proto.verdict == "fails"
        assert "protobuf message PaymentEvent" in proto.failure
        assert proto.difference.startswith("result.gross: Decimal('")
        assert "vs str '" in proto.difference
        assert "result.lines[][]" in proto.paths
        assert proto.failed + proto.differed == proto.carried == 30

    def test_a_handler_reading_plain_fields_works_everywhere(self) -> None:
        assert {k: x.verdict for k, x in verdicts(CURRENCIES).items()} == {
            "json+pydantic": "reference",
            "json-stdlib+pydantic": "works",
            "msgspec-json": "works",
            "protobuf": "works",
        }


class TestNormalise:
    """Objects become their fields; kinds count, int and float of a value do not."""

    def test_objects_and_containers(self) -> None:
        class Colour(enum.Enum):
            RED = "red"

        class Point(msgspec.Struct):
            x: int
            tags: frozenset[str]

        got = normalise({"p": Point(1, frozenset({"b", "a"})), "c": Colour.RED})
        assert got == {"p": {"x": 1, "tags": ["a", "b"]}, "c": "red"}

    def test_kinds(self) -> None:
        assert list(differences(1, 1.0, "r")) == []
        assert list(differences(Decimal("1.5"), "1.5", "r")) == [
            ("r", "Decimal('1.5') vs str '1.5'")
        ]
        assert list(differences(True, 1, "r")) == [("r", "bool True vs int 1")]
        assert list(differences({"a": [1, 2]}, {"a": [1]}, "r")) == [
            ("r.a", "2 items vs 1")
        ]


class TestCommand:
    """Exit 0 when it works on every codec, 1 when not, 2 for a bad handler."""

    @pytest.mark.parametrize(("spec", "status"), [(CURRENCIES, 0), (SETTLE, 1)])
    def test_status(
        self, spec: str, status: int, capsys: pytest.CaptureFixture[str]
    ) -> None:
        argv = ["check", PAYMENTS, "--logic", spec, "--count", "10"]
        assert cli.main([*argv, "--codecs", ",".join(CODECS)]) == status
        out = capsys.readouterr().out
        assert ("PASS" if status == 0 else "FAIL") in out

    def test_a_bad_handler_is_2(self, capsys: pytest.CaptureFixture[str]) -> None:
        argv = ["check", PAYMENTS, "--logic", "tests.fixtures.handlers.basics:nope"]
        assert cli.main(argv) == 2
        assert "has no 'nope'" in capsys.readouterr().err


class TestAbReport:
    """codec-ab judges the handler as `check --logic` does and reports it beside
    each codec's CPU split."""

    def test_the_same_verdicts_as_the_command(self) -> None:
        judged = dict(judge(SETTLE, PAYMENTS, CODECS))
        schema = load_schema(PAYMENTS)
        payloads = make_payloads(schema.shape, 50, seed=0)
        report = check_logic(schema, SETTLE, load_handler(SETTLE), payloads)
        assert judged == {c: report.verdicts[c].line() for c in CODECS}
        assert judged["msgspec-json"].startswith("fails: AttributeError")
        assert judge("aggregate", PAYMENTS, CODECS) == ()

    def test_a_built_in_schema_is_judged_too_the_baseline_included(self) -> None:
        judged = dict(judge(DUMPED, "medium", CODECS))
        assert judged["json-stdlib+pydantic"] == "works (50 messages)"
        assert judged["msgspec-json"].startswith(
            "fails: AttributeError: 'OrderEvent' object has no attribute 'model_dump'"
        )
        assert judged["protobuf"].startswith("fails: AttributeError")

    @pytest.mark.parametrize("schema", ["medium", PAYMENTS])
    def test_an_async_handler_is_awaited_and_judged(self, schema: str) -> None:
        judged = dict(judge(ASYNC_DUMPED, schema, CODECS))
        assert judged["json-stdlib+pydantic"] == "works (50 messages)"
        assert judged["msgspec-json"].startswith("fails: AttributeError")
        assert "coroutine" not in " ".join(judged.values())
        works = dict(judge(ASYNC_TOUCH, "medium", CODECS))
        assert set(works.values()) == {"works (50 messages)"}

    def test_the_section_sets_them_beside_the_cost(self) -> None:
        results = [
            CaseResult(
                codec=c,
                profile=PAYMENTS,
                repeat=0,
                cpu_us_per_msg=cpu,
                decode_p50_us=cpu / 4,
                handle_us=cpu / 2,
            )
            for c, cpu in (("json-stdlib+pydantic", 40.0), ("msgspec-json", 12.0))
        ]
        plan = Plan(
            codecs=("json-stdlib+pydantic", "msgspec-json"),
            profiles=(Profile(PAYMENTS),),
            rate=1000,
            duration=5,
            warmup=1,
            repeat=1,
            max_mode=False,
            max_messages=10,
            partitions=1,
            out="x",
            baseline="json-stdlib+pydantic",
            logic=SETTLE,
            logic_verdicts=(
                ("json-stdlib+pydantic", "works (50 messages)"),
                ("msgspec-json", "fails: AttributeError: x | y"),
            ),
        )
        report = Report(
            plan=plan,
            environment=tables.environment("4.1.2"),
            results=results,
            summary=tables.aggregate(results, []),
        )
        text = tables.markdown(report)
        assert "## Your logic on each codec" in text
        assert (
            "| json-stdlib+pydantic | 40.00 | 10.00 | 20.00 | 10.00 | - | works" in text
        )
        assert "| msgspec-json | 12.00 | 3.00 | 6.00 | 3.00 | - | fails: " in text
        assert "x \\| y" in text  # a verdict's pipe does not break the table
        awaited = [
            msgspec.structs.replace(r, handle_us=r.handle_us, handle_cpu_us=2.0)
            for r in results
        ]
        split = tables.markdown(
            Report(
                plan=plan,
                environment=report.environment,
                results=awaited,
                summary=tables.aggregate(awaited, []),
            )
        )
        # An async handler: its CPU is the split's, the rest of its wall time waited.
        assert "| msgspec-json | 12.00 | 3.00 | 2.00 | 7.00 | 4.00 | fails: " in split
        assert "50 synthetic messages" in text
        replayed = Report(
            plan=msgspec.structs.replace(plan, replay="traffic.rec"),
            environment=report.environment,
            results=results,
            summary=report.summary,
        )
        assert "the first 50 messages of the replayed recording" in tables.markdown(
            replayed
        )


class TestRecording:
    """`check --logic --recording FILE`: the handler judged on recorded traffic
    (the format `codec-loadgen record` writes), each record decoded by the codec
    its content-type names; records not of the schema are left out and said."""

    @staticmethod
    def record(tmp_path: Path, values: list[tuple[bytes, bytes | None]]) -> Path:
        path = tmp_path / "payments.rec"
        info = RecordingInfo("payments", 1, 1_767_225_600_000_000_000)
        with RecordingWriter(path, info) as out:
            for i, (value, ctype) in enumerate(values):
                headers: list[tuple[str, bytes | None]] = (
                    [] if ctype is None else [("content-type", ctype)]
                )
                out.write(Record(0, i, 1, 1_000 + i, None, value, headers))
        return path

    def traffic(self, tmp_path: Path) -> Path:
        schema = load_schema(PAYMENTS)
        values: list[tuple[bytes, bytes | None]] = []
        for i, payload in enumerate(make_payloads(schema.shape, 12, seed=4)):
            name = "protobuf" if i % 3 == 0 else "json+pydantic"
            codec = user_codec(name, schema)
            ctype = codec.content_type.encode() if i % 2 else None  # JSON: no header
            if name == "protobuf":
                ctype = codec.content_type.encode()
            values.append((codec.encode(codec.from_builtins(payload)), ctype))
        values.append((b"not a payment", b"application/json"))
        return self.record(tmp_path, values)

    def test_the_verdicts_on_a_recording(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = self.traffic(tmp_path)
        argv = ["check", PAYMENTS, "--logic", SETTLE, "--recording", str(path)]
        assert cli.main([*argv, "--codecs", ",".join(CODECS)]) == 1
        out = capsys.readouterr().out
        assert f"12 recorded ('{path}'; 1 more not decodable" in out
        assert "touched `model_dump` on msgspec Struct PaymentEvent" in out
        assert "FAIL" in out

    def test_the_payloads_are_the_recorded_messages(self, tmp_path: Path) -> None:
        path = self.traffic(tmp_path)
        payloads, source = recorded_payloads(path, PAYMENTS, 50)
        assert (
            source
            == f"recorded ('{path}'; 1 more not decodable as the schema, left out)"
        )
        sent = make_payloads(load_schema(PAYMENTS).shape, 12, seed=4)
        assert [p["paymentId"] for p in payloads] == [p["paymentId"] for p in sent]

    def test_codec_ab_judges_a_replay_on_the_recording(self, tmp_path: Path) -> None:
        path = self.traffic(tmp_path)
        judged = dict(judge(SETTLE, PAYMENTS, CODECS, path))
        payloads, source = recorded_payloads(path, PAYMENTS, 50)
        schema = load_schema(PAYMENTS)
        handler = load_handler(SETTLE)
        report = check_logic(schema, SETTLE, handler, payloads, source=source)
        assert judged == {c: report.verdicts[c].line() for c in CODECS}
        assert "(12 messages)" in judged["json-stdlib+pydantic"]  # not 50 synthetic

    def test_a_recording_of_something_else_is_2(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = self.record(tmp_path, [(b"\x00\x01", None), (b"[]", None)])
        argv = ["check", PAYMENTS, "--logic", SETTLE, "--recording", str(path)]
        assert cli.main(argv) == 2
        assert "none of its first 2 records decodes" in capsys.readouterr().err

    def test_only_with_logic(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        path = self.traffic(tmp_path)
        assert cli.main(["check", PAYMENTS, "--recording", str(path)]) == 2
        assert "--recording: only with --logic" in capsys.readouterr().err


class TestBlame:
    """A failure names what the handler touched, or what the message was, and the
    changed field its line reads: another team's handler (isinstance,
    model_fields_set, model_copy, model_dump, a Decimal in a nested list)."""

    REFUNDS = "tests.fixtures.usermodels.refunds:Refund"
    HANDLERS = "tests.fixtures.handlers.refunds"

    def verdicts(self, name: str) -> dict[str, CodecVerdict]:
        schema = load_schema(self.REFUNDS)
        payloads = make_payloads(schema.shape, 20, seed=1)
        spec = f"{self.HANDLERS}:{name}"
        codecs = ("json-stdlib+pydantic", "msgspec-msgpack", "protobuf")
        report = check_logic(schema, spec, load_handler(spec), payloads, codecs=codecs)
        return dict(report.verdicts)

    def test_an_isinstance_guard_names_the_message_type(self) -> None:
        v = self.verdicts("approve")
        assert v["json-stdlib+pydantic"].verdict == "works"
        struct = v["msgspec-msgpack"]
        assert struct.verdict == "fails"
        assert "(the message was a msgspec Struct Refund)" in struct.failure
        assert "(the message was a protobuf message Refund)" in v["protobuf"].failure

    def test_the_pydantic_api_is_what_a_struct_lacks(self) -> None:
        v = self.verdicts("settle")
        assert "touched `model_fields_set` on msgspec Struct Refund" in (
            v["msgspec-msgpack"].failure
        )

    def test_a_decimal_read_as_a_string_is_named(self) -> None:
        v = self.verdicts("total")
        assert v["msgspec-msgpack"].verdict == "works"
        proto = v["protobuf"]
        assert proto.verdict == "fails"
        assert "TypeError" in proto.failure
        assert (
            "that line reads `Refund.lines[].price.amount`, carried as string on "
            "this codec" in proto.failure
        )
