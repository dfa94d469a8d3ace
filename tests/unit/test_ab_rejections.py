"""What each codec refused, in the report; a failed case's whole reason and its logs."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from abrunner.lab.processes import LoadgenProcess
from abrunner.plan import Profile
from abrunner.report import rejections, tables as abreport, terminal
from abrunner.results import CaseResult
from schemas.errors import RunnerError
from tests.unit.test_ab_report import report, result


@pytest.mark.parametrize(
    ("message", "reason", "expected"),
    [
        (
            b"Expected `int`, got `str` - at `$.userId`",
            b"decode",
            "userId: Expected `int`, got `str`",
        ),
        (
            b"Expected `int`, got `float` - at `$.items[0].qty`",
            b"decode",
            "items.qty: Expected `int`, got `float`",
        ),
        (  # by field, as a replay counts what it cannot carry: no index or key
            b"Expected `int`, got `str` - at `$.lines[3].refunds[...].amount`",
            b"decode",
            "lines.refunds.amount: Expected `int`, got `str`",
        ),
        (b"Object contains unknown field `note`", b"decode", "note: an unknown field"),
        (
            b"Object contains unknown field `x` - at `$.payer`",
            b"decode",
            "payer.x: an unknown field",
        ),
        (
            b"2 validation error(s): userId: int_parsing; ts: missing",
            b"decode",
            "userId: int_parsing",
        ),
        (b"malformed JSON", b"decode", "record: decode: malformed JSON"),
        (None, b"empty", "record: empty"),
    ],
)
def test_a_dead_letter_names_its_field(
    message: bytes | None, reason: bytes, expected: str
) -> None:
    headers = {"x-dlq-exception-message": message, "x-dlq-reason": reason}
    assert rejections.reason(headers) == expected


def _rejecting() -> list[CaseResult]:
    lax = {
        "userId: Expected `int`, got `str`": 2_250,
        "retries: Expected `int`, got `float`": 10,
    }
    return [
        result("json+pydantic", 10.0, acked=3_000, rejected_count=0),
        result(
            "msgspec-json",
            5.0,
            acked=3_000,
            dead_lettered=2_260,
            rejected_count=2_260,
            rejected=lax,
        ),
        result(
            "protobuf",
            4.0,
            acked=2_990,
            rejected_count=0,
            recorded=3_000,
            not_carried={"takenAt: a datetime without a timezone": 10},
        ),
    ]


def test_the_report_says_what_each_codec_would_reject() -> None:
    got = rejections.lines(_rejecting())
    assert got[0] == "- `json+pydantic` dead-lettered none of 3,000 messages."
    assert got[1] == (
        "- `msgspec-json` would reject 75 % of your traffic (2,260 of 3,000 messages "
        "dead-lettered): userId: Expected `int`, got `str` in 2,250 messages; "
        "retries: Expected `int`, got `float` in 10 messages."
    )
    assert got[2] == (
        "- `protobuf` dead-lettered none of 2,990 messages; it could not carry 10 of "
        "the 3,000 recorded messages (0.33 %, skipped in its case): takenAt: a "
        "datetime without a timezone in 10 messages."
    )
    md = abreport.markdown(report(_rejecting(), repeat=1))
    assert "### What each codec rejects (`medium`)" in md
    assert got[1] in md


def test_a_failed_case_keeps_its_whole_reason_and_logs() -> None:
    why = "RunnerError: codec-loadgen exited with 1 and no summary: " + "x" * 200
    failed = CaseResult(
        codec="protobuf", profile="medium", repeat=0, error=why, logs=["out/logs/a.log"]
    )
    md = abreport.markdown(report([*_rejecting()[:1], failed], repeat=1))
    assert f"- `protobuf` / `medium` / run 1: {why}. Logs: `out/logs/a.log`." in md


def test_a_loadgen_without_a_summary_says_why_and_keeps_its_log(tmp_path: Path) -> None:
    # Nothing listens on port 1: the run ends with its one-line error, no summary.
    log = tmp_path / "loadgen.log"
    proc = LoadgenProcess(
        "127.0.0.1:1",
        "t",
        "msgspec-json",
        Profile("small"),
        "run",
        rate=10,
        count=1,
        args=["--log-level", "error"],
        log=log,
    )
    with pytest.raises(RunnerError) as caught:
        proc.summary(timeout=60)
    text = str(caught.value)
    assert (
        "exited with 1 and no summary: codec-loadgen: error: cannot reach Kafka" in text
    )
    assert text.endswith(f"(log: {log})")
    assert "cannot reach Kafka" in log.read_text()
    assert log.read_text().startswith(f"$ {sys.executable} -m loadgen")


FIVE = {
    "userId: Expected `int`, got `str`": 500,
    "retries: Expected `int`, got `float`": 400,
    "note: an unknown field": 300,
    "items[0].qty: Expected `int`, got `float`": 200,
    "record: decode: malformed JSON": 1,
}
"""Five reasons: more than the terminal lists."""
GONE = {f"field{i}: a datetime without a timezone": 10 - i for i in range(4)}
"""Four reasons a replay could not carry."""


def _five() -> list[CaseResult]:
    return [
        result(
            "msgspec-json",
            5.0,
            acked=3_000,
            dead_lettered=1_401,
            rejected_count=1_401,
            rejected=FIVE,
            recorded=3_000,
            not_carried=GONE,
        )
    ]


def test_report_md_and_json_list_every_reason(tmp_path: Path) -> None:
    written = report(_five(), repeat=1)
    abreport.write(written, tmp_path)
    md = (tmp_path / "report.md").read_text()
    for why, n in [*FIVE.items(), *GONE.items()]:
        assert f"{why} in {n:,} message{'s' * (n != 1)}" in md, why
    assert "other reason" not in md
    back = abreport.read(tmp_path / "report.json").results[0]
    assert back.rejected == FIVE and back.not_carried == GONE


def test_the_terminal_cuts_and_says_where_the_rest_are() -> None:
    written = report(_five(), repeat=1)
    out = io.StringIO()
    terminal.print_tables(written, out)
    text = out.getvalue()
    where = f"listed in {Path('ab-results') / 'report.md'}"
    assert "record: decode: malformed JSON in 1 message" not in text
    assert f"; 2 other reasons, {where}" in text
    assert "field3: a datetime" not in text
    assert f"; 1 other reason, {where}." in text
    assert "userId: Expected `int`, got `str` in 500 messages" in text
