"""`codec-ab --framing confluent`: each codec framed beside its unframed twin, and
the report's tables setting the framed case beside the twin and beside
confluent-kafka's deserializer."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest

from abrunner.framing import with_twins
from abrunner.peer_figures import PeerDecode
from abrunner.plan import Case, Plan, Profile
from abrunner.report import tables as abreport
from abrunner.report.terminal import print_tables
from abrunner.results import CaseResult, Report
from schemas.errors import ConfigError

URL = "http://127.0.0.1:8081/apis/ccompat/v7"


def _plan(codecs: tuple[str, ...] = ("json+pydantic", "avro"), **kw: Any) -> Plan:
    return Plan(
        codecs=codecs,
        profiles=(Profile("medium"),),
        rate=20_000,
        duration=10,
        warmup=2,
        repeat=1,
        max_mode=False,
        max_messages=1000,
        partitions=4,
        baseline=codecs[0],
        out="ab",
        **kw,
    )


def _result(codec: str, cpu: float, *, decode: float, lost: int = 0) -> CaseResult:
    return CaseResult(
        codec=codec,
        profile="medium",
        repeat=0,
        throughput=20_000.0,
        cpu_us_per_msg=cpu,
        decode_p50_us=decode,
        e2e_p99_ms=cpu,
        lost=lost,
        seq_missing=0,
        dead_lettered=0,
        kept_up=True,
    )


def _report() -> Report:
    plan = with_twins(_plan(), URL)
    results = [
        _result("json+pydantic", 15.0, decode=8.0),
        _result("json+pydantic+confluent", 16.5, decode=8.5),
        _result("avro", 20.0, decode=10.0),
        _result("avro+confluent", 21.0, decode=11.0, lost=3),
    ]
    return Report(
        plan=plan,
        environment=abreport.environment("4.1.2"),
        results=results,
        summary=abreport.aggregate(results, []),
        peers=[
            PeerDecode(
                codec="json+pydantic+confluent",
                profile="medium",
                messages=200,
                unframed_us=8.0,
                framed_us=8.4,
                peer_us=380.0,
                peer="JSONDeserializer",
            ),
            PeerDecode(
                codec="avro+confluent",
                profile="medium",
                messages=200,
                unframed_us=20.0,
                framed_us=21.0,
                peer_us=48.3,
                peer="AvroDeserializer",
            ),
        ],
    )


def _tables(text: str) -> list[dict[str, dict[str, str]]]:
    """The framed section's tables: codec -> header -> cell, in order."""
    text = text.split("## Framed beside unframed", 1)[1]
    found, rows = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("| "):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif rows:
            found.append({r[0]: dict(zip(rows[0], r, strict=True)) for r in rows[2:]})
            rows = []
    return found


class TestTwins:
    """The framed run adds each codec's framed twin right after it."""

    def test_with_twins(self) -> None:
        plan = with_twins(_plan(mode="paired"), URL)
        assert plan.codecs == (
            "json+pydantic",
            "json+pydantic+confluent",
            "avro",
            "avro+confluent",
        )
        assert plan.mode == "sequential" and plan.registry_url == URL
        assert plan.baseline == "json+pydantic"

    def test_a_replay_runs_the_framed_cases_alone(self) -> None:
        """A replay of a team's framed traffic: an unframed twin's load generator
        would have to strip the frames it cannot read without the registry."""
        plan = with_twins(_plan(replay="orders.rec"), URL)
        assert plan.codecs == ("json+pydantic+confluent", "avro+confluent")
        assert plan.baseline == "json+pydantic+confluent"

    def test_framing_args_per_case(self) -> None:
        plan = with_twins(_plan(), URL)
        framed = Case("avro+confluent", Profile("medium"), 0)
        assert (framed.wire_codec, framed.framed) == ("avro", True)
        assert plan.framing_args(framed) == (
            *("--framing", "confluent", "--registry-url", URL),
        )
        assert plan.framing_args(Case("avro", Profile("medium"), 0)) == ()

    def test_a_codec_without_a_registry_type_cannot_be_framed(self) -> None:
        with pytest.raises(ConfigError, match="msgspec-msgpack has no schema registry"):
            _plan(("msgspec-msgpack", "msgspec-msgpack+confluent"))


class TestReport:
    """report.md, the terminal and report.json set each framed case beside its twin
    and beside confluent-kafka's deserializer."""

    def test_markdown(self) -> None:
        kafka, peers = _tables(abreport.markdown(_report()))
        assert kafka["avro"]["CPU us/msg unframed"] == "20.00"
        assert kafka["avro"]["CPU us/msg framed"] == "21.00"
        assert kafka["avro"]["framed / unframed"] == "1.05x"
        assert kafka["avro"]["decode us framed"] == "11.00"
        assert kafka["avro"]["lost framed"] == "3"
        assert kafka["json+pydantic"]["framed / unframed"] == "1.10x"
        assert peers["avro"]["framed decode us/msg"] == "21.00"
        assert peers["avro"]["unframed decode us/msg"] == "20.00"
        assert (
            peers["avro"]["confluent-kafka deserializer us/msg"]
            == "48.30 (AvroDeserializer)"
        )
        assert peers["json+pydantic"]["deserializer / framed"] == "45.24x"
        assert peers["avro"]["messages"] == "200"

    def test_terminal(self) -> None:
        out = io.StringIO()
        print_tables(_report(), out)
        kafka, peers = _tables(out.getvalue())
        assert kafka["avro"]["CPU us/msg framed"] == "21.00"
        assert peers["avro"]["deserializer / framed"] == "2.30x"

    def test_report_json_keeps_the_figures(self, tmp_path: Path) -> None:
        abreport.write(_report(), tmp_path)
        back = abreport.read(tmp_path / "report.json")
        assert back.peers == _report().peers
        assert back.plan.codecs[1] == "json+pydantic+confluent"
        assert set(back.summary["medium"]) == set(back.plan.codecs)

    def test_a_missing_figure_says_why(self) -> None:
        report = _report()
        report.peers[1] = msgspec.structs.replace(
            report.peers[1], messages=0, error="ConnectionError: refused"
        )
        text = abreport.markdown(report)
        assert "- avro+confluent: not measured: ConnectionError: refused" in text

    def test_no_framed_case_no_section(self) -> None:
        results = [_result("avro", 20.0, decode=10.0)]
        plain = Report(
            plan=_plan(("avro",)),
            environment=abreport.environment("4.1.2"),
            results=results,
            summary=abreport.aggregate(results, []),
        )
        assert "Framed beside unframed" not in abreport.markdown(plain)


def test_the_children_get_the_registry_by_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`[registry]` from the TOML or the URL reaches the cases' processes as
    `REGISTRY_*` variables (never argv), for the run only."""
    from abrunner.framing import registry_environment
    from service.settings.registry import RegistryConnection

    for name in ("REGISTRY_USERNAME", "REGISTRY_PASSWORD", "REGISTRY_CA_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("REGISTRY_TIMEOUT_S", "9")  # the user's own: put back after
    secret = "S3NT1NEL-ab"  # noqa: S105 (a test value)
    registry = RegistryConnection(url=f"https://key:{secret}@sr.example/x")
    with registry_environment(registry):
        assert os.environ["REGISTRY_USERNAME"] == "key"
        assert os.environ["REGISTRY_PASSWORD"] == secret
        assert os.environ["REGISTRY_TIMEOUT_S"] == "2.0"
        assert (
            "REGISTRY_URL" not in os.environ or secret not in os.environ["REGISTRY_URL"]
        )
    assert "REGISTRY_PASSWORD" not in os.environ
    assert os.environ["REGISTRY_TIMEOUT_S"] == "9"
