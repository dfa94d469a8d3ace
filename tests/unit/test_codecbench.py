"""codec-bench: every codec and profile measured, the report's shape, the CLI's edges.

Timings depend on the machine and on whoever else shares it, so no test compares
two timings; they check units, structure and invariants that cannot flake.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest

import codecbench
from codec import REAL_CODECS
from codecbench import BenchReport, CaseResult, OpResult, Spread
from codecbench.cli import main
from codecbench.render import HEADERS, print_table, to_markdown
from codecbench.sampling import calibrate, spread
from schemas.errors import ConfigError
from schemas.registry import SCHEMA_NAMES
from service import __version__
from tests.support import in_fresh_interpreter

POOL = 3
FAST_FLAGS = ["--pool-size", "3", "--repeats", "1", "--warmups", "0"]
FAST_FLAGS += ["--min-time", "0.0002", "--large-bytes", "2000"]


def fast_run(codecs: Sequence[str], profiles: Sequence[str]) -> BenchReport:
    """A run small enough for a unit test: 3 payloads, 2 samples of ~0.2-0.4 ms."""
    return codecbench.run(
        codecs,
        profiles,
        pool_size=POOL,
        repeats=2,
        warmups=0,
        min_time_s=2e-4,
        large_bytes=2000,
        alloc_calls=POOL,
    )


@pytest.fixture(scope="module")
def report() -> BenchReport:
    """Every case, measured in a fresh interpreter (`in_fresh_interpreter`)."""
    return in_fresh_interpreter(fast_run, REAL_CODECS, SCHEMA_NAMES)


def ops(case: CaseResult) -> dict[str, OpResult]:
    return {
        "decode": case.decode,
        "decode+read": case.decode_read,
        "encode": case.encode,
    }


def check_spread(figure: Spread, samples: int) -> None:
    assert figure.samples == samples
    assert 0 < figure.min <= figure.median <= figure.max
    assert figure.stdev >= 0
    assert all(math.isfinite(v) for v in (figure.min, figure.median, figure.max))


class TestRun:
    """Every codec on every profile yields positive, well-formed figures."""

    def test_every_case_is_measured_once(self, report: BenchReport) -> None:
        pairs = [(r.codec, r.profile) for r in report.results]
        assert pairs == [(c, p) for p in SCHEMA_NAMES for c in REAL_CODECS]

    @pytest.mark.parametrize("profile", SCHEMA_NAMES)
    @pytest.mark.parametrize("codec", REAL_CODECS)
    def test_figures_are_positive(
        self, report: BenchReport, codec: str, profile: str
    ) -> None:
        case = report.case(codec, profile)
        assert case.wire_bytes > 0
        for name, op in ops(case).items():
            check_spread(op.us, samples=2)
            assert op.loops >= 1, name
            assert op.alloc.calls == POOL
            assert op.alloc.peak_bytes > 0, name
            assert op.alloc.peak_bytes >= op.alloc.retained_bytes >= 0, name
            rates = (op.gc.gen0, op.gc.gen1, op.gc.gen2)
            assert all(r >= 0 and math.isfinite(r) for r in rates), name
        # the decoded object (a Python object for every codec) outlives the call
        assert case.decode.alloc.retained_bytes > 0
        # the encoded bytes object is held: at least its payload (same 3 messages)
        assert case.encode.alloc.retained_bytes >= case.wire_bytes

    def test_method_and_environment(self, report: BenchReport) -> None:
        assert report.method.repeats == 2
        assert report.method.pool_size == POOL
        assert report.method.clock == "time.thread_time_ns"
        env = report.environment
        assert env.protobuf_backend
        assert set(env.libraries) >= {"msgspec", "pydantic", "protobuf", "orjson"}
        check_spread(env.loop_overhead_us, samples=2)

    def test_unknown_pair_is_a_key_error(self, report: BenchReport) -> None:
        with pytest.raises(KeyError):
            report.case("auto", "medium")

    def test_json_round_trip(self, report: BenchReport) -> None:
        data = msgspec.json.encode(report)
        assert msgspec.json.decode(data, type=BenchReport) == report
        assert json.loads(data)["results"][0]["decode_read"]["us"]["median"] > 0

    def test_markdown_has_a_row_per_case(self, report: BenchReport) -> None:
        lines = [ln for ln in to_markdown(report).splitlines() if ln.startswith("|")]
        assert lines[0] == "| " + " | ".join(HEADERS) + " |"
        assert len(lines) == 2 + len(report.results)
        assert all(ln.count("|") == len(HEADERS) + 1 for ln in lines)


class TestValidation:
    """Bad arguments raise ConfigError before anything is built."""

    @pytest.mark.parametrize(
        ("kwargs", "text"),
        [
            ({"codecs": ["nope"]}, "--codecs: 'nope'"),
            ({"codecs": ["auto"]}, "--codecs: 'auto'"),
            ({"codecs": []}, "--codecs"),
            ({"profiles": ["huge"]}, "--profiles: 'huge'"),
            ({"repeats": 0}, "--repeats"),
            ({"pool_size": 0}, "--pool-size"),
            ({"warmups": -1}, "--warmups"),
            ({"min_time_s": 0.0}, "--min-time"),
            ({"large_bytes": 10}, "--large-bytes"),
        ],
    )
    def test_rejected(self, kwargs: dict[str, Any], text: str) -> None:
        with pytest.raises(ConfigError, match=text):
            codecbench.run(**kwargs)

    def test_duplicates_are_dropped(self) -> None:
        report = fast_run(["msgspec-json", "msgspec-json"], ["small", "small"])
        assert [(r.codec, r.profile) for r in report.results] == [
            ("msgspec-json", "small")
        ]


class TestSampling:
    """Calibration and the summary of samples."""

    def test_calibration_doubles_until_long_enough(self) -> None:
        seen: list[int] = []

        def sample(loops: int) -> int:
            seen.append(loops)
            return loops * 10

        assert calibrate(sample, 75) == 8
        assert seen == [1, 2, 4, 8]

    def test_spread(self) -> None:
        figure = spread([3.0, 1.0, 2.0])
        assert (figure.median, figure.min, figure.max) == (2.0, 1.0, 3.0)
        assert figure.stdev == pytest.approx(1.0)
        assert spread([5.0]).stdev == 0.0


class TestCli:
    """`codec-bench` in process: output formats, exit status, messages."""

    def test_json_decodes_to_the_structs(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        out = tmp_path / "bench.json"
        args = ["--codecs", "msgspec-msgpack,protobuf", "--profiles", "medium"]
        assert main([*args, *FAST_FLAGS, "--json", "--out", str(out)]) == 0
        printed = msgspec.json.decode(capsys.readouterr().out, type=BenchReport)
        written = msgspec.json.decode(out.read_bytes(), type=BenchReport)
        assert printed == written
        assert [r.codec for r in printed.results] == ["msgspec-msgpack", "protobuf"]
        assert printed.method.repeats == 1

    def test_markdown_table_off_a_terminal(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        args = ["--codecs", "json+pydantic", "--profiles", "small", *FAST_FLAGS]
        assert main(args) == 0
        out = capsys.readouterr().out
        assert "| codec | profile |" in out
        assert "| json+pydantic | small |" in out

    def test_rich_table_on_a_terminal(self) -> None:
        report = fast_run(["msgspec-json"], ["small"])

        class Terminal(io.StringIO):
            def isatty(self) -> bool:
                return True

        stream = Terminal()
        print_table(report, stream)
        assert "msgspec-json" in stream.getvalue()
        assert "| codec |" not in stream.getvalue()

    def test_unknown_codec_exits_2_with_one_line(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["--codecs", "msgspec-json,yaml"]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        lines = captured.err.splitlines()
        assert len(lines) == 1
        assert lines[0].startswith("codec-bench: error: --codecs: 'yaml'")

    def test_bad_out_directory_exits_2(
        self, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        assert main(["--out", str(tmp_path / "missing" / "x.json")]) == 2
        assert "--out" in capsys.readouterr().err

    def test_help_states_defaults(self, capsys: pytest.CaptureFixture[str]) -> None:
        with pytest.raises(SystemExit) as exc:
            main(["--help"])
        assert exc.value.code == 0
        # argparse wraps lines, at spaces and after hyphens: compare without spaces
        text = "".join(capsys.readouterr().out.split())
        assert f"(default:{','.join(REAL_CODECS)})" in text
        for default in ("(default:1000)", "(default:10)", "(default:0.05)"):
            assert default in text

    def test_version(self, capsys: pytest.CaptureFixture[str]) -> None:
        with pytest.raises(SystemExit) as exc:
            main(["--version"])
        assert exc.value.code == 0
        assert capsys.readouterr().out.strip() == __version__


class TestUserSchemas:
    """`--schemas`: a user's model measured beside the profiles (the tagged union
    and its flattened twin), a codec that cannot carry one left out with why."""

    @pytest.fixture(autouse=True)
    def _fixtures(self, monkeypatch: pytest.MonkeyPatch) -> None:
        fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "usermodels"
        monkeypatch.syspath_prepend(str(fixtures))

    def test_measured_beside_the_profiles_or_left_out_with_why(self) -> None:
        """One run, no profile: the tagged union on protobuf and msgspec, and a model
        protobuf cannot carry left out of protobuf alone."""
        report = codecbench.run(
            ["msgspec-json", "protobuf"],
            [],
            pool_size=POOL,
            repeats=1,
            warmups=0,
            min_time_s=2e-4,
            alloc_calls=POOL,
            schemas=["tagged_events:TaggedEvent", "tracking:ShipmentEvent"],
        )
        assert [(r.codec, r.profile) for r in report.results] == [
            ("msgspec-json", "TaggedEvent"),
            ("protobuf", "TaggedEvent"),
            ("msgspec-json", "ShipmentEvent"),
        ]
        assert all(r.decode_read.us.median > 0 for r in report.results)
        assert len(report.left_out) == 1
        assert report.left_out[0].startswith("protobuf on ShipmentEvent: ")
        assert "no protobuf type decodes to a date" in report.left_out[0]
        md = to_markdown(report)
        assert "Left out (the codec cannot carry the schema):" in md
        assert (  # a line per field, as check and codec-ab list them
            "\n- protobuf on ShipmentEvent: protobuf cannot carry 6 fields of "
            "tracking:ShipmentEvent:\n  - ShipmentEvent.occurred_on: no protobuf "
        ) in md
        assert "schema error" not in md

    def test_no_profile_without_schemas_is_an_error(self) -> None:
        with pytest.raises(ConfigError, match="--profiles"):
            codecbench.run(["msgspec-json"], [])
