"""`codec-ab` at its edges: interruption, terminal output, broker choice, in-process bench."""

from __future__ import annotations

import io
import os
import signal
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from abrunner import cli, interrupts
from abrunner.config import AbSettings
from abrunner.lab import inprocess_bench, runner
from abrunner.plan import Case, Plan, Profile
from abrunner.report import terminal
from abrunner.report.tables import markdown_table, read, tables
from abrunner.results import CaseResult
from schemas.errors import RunnerError
from service.kafka.connection import KafkaConnection
from service.lifecycle.child_processes import free_port
from tests.unit.test_ab_report import report

RECORDED = "127.0.0.1:1"
"""A broker address nothing answers on: every Kafka call here is faked."""


@pytest.fixture(autouse=True)
def _sequential(monkeypatch: pytest.MonkeyPatch) -> None:
    """These runs fake `runner.run_case`: the sequential cases (paired runs are
    `abrunner.lab.paired`, tested in tests/integration/test_ab.py)."""
    monkeypatch.setenv("AB_MODE", "sequential")


class NoLocalKafka:
    """Stands in for `LocalKafka`: a unit test must never start a broker."""

    def __init__(self, *args: object) -> None:
        raise RunnerError("the runner tried to start the local Kafka")


@pytest.fixture
def no_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    """No broker address given; `codec-kafka start` recorded `RECORDED`."""
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.setattr("abrunner.config.recorded_local_broker", lambda: RECORDED)
    monkeypatch.setattr(runner, "LocalKafka", NoLocalKafka)
    monkeypatch.setattr(cli, "_check_cluster", lambda conf: None)  # nothing there


def finished(bootstrap: str, case: Case, plan: Plan, note: Any) -> CaseResult:
    return CaseResult(
        codec=case.codec,
        profile=case.profile.label,
        repeat=case.repeat,
        mode="rate",
        cpu_us_per_msg=10.0,
        lost=0,
        seq_missing=0,
        kept_up=True,
    )


class TestInterrupt:
    """Ctrl-C mid-run writes the cases finished, marked interrupted, and exits 130."""

    def test_second_case_interrupted(
        self,
        no_broker: None,
        monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        calls: list[tuple[str, str]] = []

        def run_case(bootstrap: str, case: Case, plan: Plan, note: Any) -> CaseResult:
            calls.append((runner.Broker.of(bootstrap).address, case.codec))
            if len(calls) == 2:
                raise KeyboardInterrupt
            return finished(bootstrap, case, plan, note)

        monkeypatch.setattr(runner, "run_case", run_case)
        argv = ["--codecs", "msgspec-json,protobuf,msgspec-msgpack", "--no-bench"]
        assert cli.main([*argv, "--out", str(tmp_path)]) == cli.INTERRUPTED
        assert calls == [(RECORDED, "msgspec-json"), (RECORDED, "protobuf")]
        written = read(tmp_path / "report.json")
        assert written.interrupted
        assert [r.codec for r in written.results] == ["msgspec-json"]
        md = (tmp_path / "report.md").read_text().splitlines()
        assert md[2].startswith("**Interrupted**") and "1 of 3 cases" in md[2]
        out, err = capsys.readouterr()
        assert "**Interrupted**" in out and "| msgspec-json (baseline) |" in out
        assert "Traceback" not in out + err and "1 of 3 cases finished" in err
        assert f"recorded: {RECORDED}" in err

    def test_running_case_is_torn_down(self, monkeypatch: pytest.MonkeyPatch) -> None:
        closed: list[str] = []
        deleted: list[str] = []

        class Worker:
            group = "g"

            def __init__(self, *args: object, **kwargs: object) -> None:
                pass

            def start(self) -> Worker:
                return self

            def wait_ready(self, timeout: float) -> None:
                pass

            def close(self) -> None:
                closed.append("worker")

        class Loadgen:
            def __init__(self, *args: object, **kwargs: object) -> None:
                pass

            def summary(self, timeout: float) -> None:
                raise KeyboardInterrupt  # Ctrl-C while the warm-up runs

            def close(self) -> None:
                closed.append("loadgen")

        monkeypatch.setattr(runner, "WorkerProcess", Worker)
        monkeypatch.setattr(runner, "LoadgenProcess", Loadgen)
        monkeypatch.setattr(runner, "create_topic", lambda *args: None)
        monkeypatch.setattr(
            runner, "delete_topic", lambda bootstrap, name: deleted.append(name)
        )
        plan = cli.plan_from_settings(AbSettings(codecs=["protobuf"]))
        case = Case("protobuf", Profile("medium"), 0)
        with pytest.raises(KeyboardInterrupt):
            runner.run_case(RECORDED, case, plan, lambda text: None)
        assert closed == ["loadgen", "worker"]
        topic, dlq = sorted(deleted)
        assert topic.endswith(case.tag) and dlq == f"{topic}.dlq"


class TestSignals:
    """SIGTERM and a first Ctrl-C interrupt the run; a second one exits at once."""

    def test_sigterm_interrupts(self) -> None:
        before = signal.getsignal(signal.SIGTERM)
        with interrupts.interrupts() as stop:
            # Checked first: SIGTERM's default action would end the test run.
            assert signal.getsignal(signal.SIGTERM) is stop
            assert signal.getsignal(signal.SIGINT) is stop
            with pytest.raises(KeyboardInterrupt):
                signal.raise_signal(signal.SIGTERM)
        assert signal.getsignal(signal.SIGTERM) == before

    def test_second_signal_exits(self, monkeypatch: pytest.MonkeyPatch) -> None:
        def exit_now(code: int) -> None:
            raise SystemExit(code)  # as `os._exit` would, minus ending pytest

        monkeypatch.setattr(os, "_exit", exit_now)
        stop = interrupts.Stop()
        with pytest.raises(KeyboardInterrupt):
            stop(signal.SIGTERM, None)
        with pytest.raises(SystemExit) as exited:
            stop(signal.SIGINT, None)
        assert exited.value.code == cli.INTERRUPTED


class Terminal(io.StringIO):
    """Output that says it is a terminal."""

    def isatty(self) -> bool:
        return True


class TestTerminalTables:
    """A terminal gets rich tables; a pipe gets report.md's tables, one line a row."""

    def test_piped(self) -> None:
        written = report(repeat=1)
        out = io.StringIO()
        terminal.print_tables(written, out)
        lines = out.getvalue().splitlines()
        for _profile, headers, body in tables(written):
            table = markdown_table(headers, body)
            start = lines.index(table[0])
            assert lines[start : start + len(table)] == table
            assert len(table[0]) > 80  # wider than a terminal, not wrapped
        assert "`--repeat 3` or more" in out.getvalue()

    def test_terminal(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("COLUMNS", "400")
        out = Terminal()
        terminal.print_tables(report(repeat=1), out)
        text = out.getvalue()
        assert "Profile medium" in text and "msgspec-msgpack" in text
        assert "| --- |" not in text and "━" in text  # rich's rules, not Markdown
        assert "--repeat 3" in text
        assert "--repeat 3" not in _printed(report(repeat=2))


def _printed(written: Any) -> str:
    out = io.StringIO()
    terminal.print_tables(written, out)
    return out.getvalue()


class TestBroker:
    """No address given: the broker `codec-kafka start` recorded, else a local one."""

    def test_recorded(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr("abrunner.config.recorded_local_broker", lambda: "h:1")
        assert AbSettings().bootstrap == "h:1"
        given = AbSettings(kafka=KafkaConnection(bootstrap_servers="given:2"))
        assert given.bootstrap == "given:2" and given.bootstrap_given
        monkeypatch.setattr("abrunner.config.recorded_local_broker", lambda: None)
        assert AbSettings().bootstrap is None


class TestInProcess:
    """The in-process figures are taken on the plan's codecs and profiles."""

    TINY = inprocess_bench.Tuning(
        pool_size=20, repeats=1, warmups=0, min_time_s=0.001, alloc_calls=2
    )

    def test_tiny_pool(self) -> None:
        settings = AbSettings(
            codecs=["msgspec-msgpack", "json+pydantic"],
            profiles=["small", "large:1000"],
        )
        told: list[str] = []
        found = inprocess_bench.measure(
            cli.plan_from_settings(settings), told.append, self.TINY
        )
        assert {(f.codec, f.profile) for f in found} == {
            (c, p)
            for c in ("msgspec-msgpack", "json+pydantic")
            for p in ("small", "large:1000")
        }
        assert all(f.decode_us > 0 and f.decode_read_us > 0 for f in found)
        assert len(told) == 4

    def test_run_puts_them_in_the_report(
        self, no_broker: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        monkeypatch.setattr(runner, "run_case", finished)
        tiny = partial(inprocess_bench.measure, tuning=self.TINY)
        monkeypatch.setattr(inprocess_bench, "measure", tiny)
        argv = ["--codecs", "protobuf", "--profile", "small", "--bench"]
        assert cli.main([*argv, "--out", str(tmp_path)]) == 0
        written = read(tmp_path / "report.json")
        assert [(b.codec, b.profile) for b in written.in_process] == [
            ("protobuf", "small")
        ]
        row = written.summary["small"]["protobuf"]
        assert "decode_in_process_us" in row.figures
        assert "decode us in-process" in (tmp_path / "report.md").read_text()


class TestRejectedAll:
    """A case that dead-lettered every message it handled measured no decode: its
    status says so, never `ok`, and the run exits 1."""

    WHY = "record: decode: JSON is malformed: invalid character (byte 4)"

    def rejecting(
        self, bootstrap: str, case: Case, plan: Plan, note: Any
    ) -> CaseResult:
        result = finished(bootstrap, case, plan, note)
        if case.codec == "msgspec-json":
            result.processed = result.dead_lettered = result.rejected_count = 600
            result.rejected = {self.WHY: 590, "id: an unknown field": 10}
        else:
            result.processed, result.dead_lettered = 600, 12
        return result

    def test_status_and_exit(
        self,
        no_broker: None,
        monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        monkeypatch.setattr(runner, "run_case", self.rejecting)
        argv = ["--codecs", "msgspec-json,protobuf", "--no-bench"]
        assert cli.main([*argv, "--out", str(tmp_path)]) == 1
        written = read(tmp_path / "report.json")
        rows = written.summary["medium"]
        assert rows["msgspec-json"].rejected_all == self.WHY
        assert rows["protobuf"].rejected_all is None
        status = {body[0].split()[0]: body[1] for body in tables(written)[0][2]}
        assert status == {
            "msgspec-json": f"DEAD-LETTERED ALL: {self.WHY[:60]}",
            "protobuf": "ok",
        }
        assert f"DEAD-LETTERED ALL: {self.WHY[:60]}" in capsys.readouterr().out


class TestFailedCase:
    """A case that failed keeps a reason and a log, even one that failed before
    any process of its own started (a topic it could not create)."""

    def test_reason_and_log(
        self,
        no_broker: None,
        monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        def silent(bootstrap: str, case: Case, plan: Plan, note: Any) -> CaseResult:
            raise TimeoutError  # as a future's result() raises it: no message

        monkeypatch.setattr(runner, "run_case", silent)
        argv = ["--codecs", "msgspec-json", "--no-bench", "--out", str(tmp_path)]
        assert cli.main(argv) == 1
        (result,) = read(tmp_path / "report.json").results
        assert result.error == "TimeoutError: no reason given"
        (log,) = result.logs
        assert Path(log).read_text().endswith(f"failed: {result.error}\n")
        assert "FAILED: TimeoutError: no reason given" in capsys.readouterr().err


def test_nothing_listening_ends_before_any_case(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--bootstrap-servers` where nothing listens: one line, exit 1, no case run."""
    monkeypatch.setattr(runner, "run", lambda *a: pytest.fail("ran"))
    address = f"127.0.0.1:{free_port()}"
    argv = ["--codecs", "msgspec-json", "--no-bench", "--out", str(tmp_path / "ab")]
    assert cli.main([*argv, "--bootstrap-servers", address]) == 1
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, err
    assert err.startswith(f"codec-ab: error: no Kafka broker answers at {address}")
    assert "Connection refused" in err and "check --bootstrap-servers" in err


def test_record_is_the_load_generators_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`codec-ab record` (the step before `codec-ab --replay`) printed the whole
    usage and "unrecognized arguments"; it names the command that records."""
    assert cli.main(["record", "--topic", "orders", "--out", "orders.rec"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "codec-ab: error: 'record' is not a codec-ab command: record with "
        "`codec-loadgen record --topic orders --out orders.rec`, then replay with "
        "`codec-ab --replay orders.rec`\n"
    )


def test_the_codecs_default_is_said_as_it_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--help said "every wire codec"; the default runs the six migration codecs."""
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "every wire codec" not in out
    assert "flatbuffers, capnp and avro run when named" in out
