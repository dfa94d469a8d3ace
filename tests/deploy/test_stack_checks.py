"""The stack test's verdicts on made-up figures (tests/deploy/stack/checks.py).

The stack run itself is `make stack-test`; these pin what each check calls a pass.
"""

from __future__ import annotations

from loadgen.report import Latency, Summary, render_table
from tests.deploy.stack import checks
from tests.deploy.stack.breaks import RENAMED, renamed_metric_dashboards
from tests.deploy.stack.checks import (
    Declared,
    Leftovers,
    LoadgenSummary,
    Observed,
    SideReadBack,
)
from tests.deploy.stack.live import declared_health
from tests.deploy.support import dashboards, panel_queries


def _summary(sent: int, acked: int, failed: int) -> Summary:
    none = Latency("ack", None, None, None, None)
    return Summary(
        run_id="5eed0123abcd",
        topic="ab-a",
        codec="json+pydantic",
        profile="medium",
        pattern="constant",
        processes=1,
        target_rate=1000.0,
        achieved_rate=1000.0,
        rate_error_pct=0.0,
        window_s=240.0,
        sent=sent,
        acked=acked,
        failed=failed,
        errors={},
        bytes_per_message=1146.7,
        ack_latency=none,
        send_lag=none,
        per_second_min=990,
        per_second_max=1010,
        per_second=[],
        main_thread_cpu_s=1.0,
        process_cpu_s=2.0,
        interrupted=False,
    )


def _side(**changes: object) -> SideReadBack:
    fields: dict[str, object] = {
        "side": "A",
        "summary": LoadgenSummary("r", 240_000, 240_000, 0),
        "missing": 0,
        "records": 240_001,
        "handled": 240_001,
        "committed_to_end": True,
        "dead_letters": 1,
        "poison": 1,
    }
    return SideReadBack(**(fields | changes))  # type: ignore[arg-type]


class TestLoadgenSummary:
    """The load generator's printed summary is read back exactly."""

    def test_reads_the_table_the_load_generator_prints(self) -> None:
        """Run id and counts come from `render_table`'s own output, after other lines."""
        text = "starting\n" + render_table(_summary(1_234_567, 1_234_560, 7)) + "\n"
        assert checks.parse_loadgen_summary(text) == LoadgenSummary(
            "5eed0123abcd", 1_234_567, 1_234_560, 7
        )

    def test_no_table_is_none(self) -> None:
        """Output without a summary (a crash) reads as None, not as zeros."""
        assert checks.parse_loadgen_summary("Traceback ...\n") is None


class TestJudgeSide:
    """`loss <side>` passes only when every acked message was read back and handled."""

    def test_everything_handled_passes(self) -> None:
        assert checks.judge_side(_side()).ok

    def test_records_never_handled_fail_as_lost(self) -> None:
        check = checks.judge_side(_side(handled=239_801))
        assert not check.ok
        assert "200 of 240,001 records never handled (lost)" in check.problems

    def test_a_missing_x_seq_fails(self) -> None:
        assert not checks.judge_side(_side(missing=3)).ok

    def test_commits_short_of_the_end_fail(self) -> None:
        assert not checks.judge_side(_side(committed_to_end=False)).ok

    def test_an_undead_poison_fails(self) -> None:
        assert not checks.judge_side(_side(dead_letters=0)).ok

    def test_a_restarted_worker_fails(self) -> None:
        """Its counter restarted at 0: a loss could hide behind it."""
        assert not checks.judge_side(_side(worker_restarts=1)).ok

    def test_no_summary_or_nothing_acked_fails(self) -> None:
        assert not checks.judge_side(_side(summary=None)).ok
        empty = LoadgenSummary("r", 0, 0, 0)
        assert not checks.judge_side(_side(summary=empty, records=1, handled=1)).ok


class TestOtherChecks:
    """Targets, query answers, health, down and staging."""

    def test_targets(self) -> None:
        up = {"job": "j", "instance": "i", "health": "up"}
        down = up | {"health": "down", "error": "context deadline exceeded"}
        assert checks.judge_targets([up, up], 2).ok
        assert not checks.judge_targets([up, down], 2).ok
        assert not checks.judge_targets([up], 2).ok

    def test_answers(self) -> None:
        assert checks.judge_answers("panels", {"a": True}, "queries").ok
        assert not checks.judge_answers("panels", {"a": True, "b": False}, "q").ok
        assert not checks.judge_answers("panels", {}, "queries").ok

    def test_health_as_declared(self) -> None:
        declared = [
            Declared("worker-a", healthcheck=True, one_shot=False),
            Declared("topics", healthcheck=False, one_shot=True),
            Declared("kafka", healthcheck=False, one_shot=False),
            Declared("loadgen-a", healthcheck=False, one_shot=False),
        ]
        good = {
            "worker-a": Observed("running", 0, "healthy"),
            "topics": Observed("exited", 0, None),
            "kafka": Observed("running", 0, None),
            "loadgen-a": Observed("running", 0, None),
        }
        assert checks.judge_health(declared, good).ok
        starting = good | {"worker-a": Observed("running", 0, "starting")}
        assert not checks.judge_health(declared, starting).ok
        failed_job = good | {"topics": Observed("exited", 2, None)}
        assert not checks.judge_health(declared, failed_job).ok
        finished = good | {"loadgen-a": Observed("exited", 0, None)}
        assert not checks.judge_health(declared, finished).ok
        assert checks.judge_health(
            declared, finished, finished=frozenset({"loadgen-a"})
        ).ok

    def test_down(self) -> None:
        assert checks.judge_down(Leftovers()).ok
        assert not checks.judge_down(Leftovers(networks=["n"])).ok
        assert not checks.judge_down(Leftovers(ports_in_use=[9092])).ok

    def test_staging_needs_a_verdict(self) -> None:
        ratio = {"figure": "cpu_us_per_msg", "ratio": 0.5, "low": 0.4, "high": 0.6}
        assert checks.judge_staging(0, [ratio | {"verdict": "better"}], "").ok
        none = ratio | {"verdict": None, "low": None, "why": "3 slices"}
        assert not checks.judge_staging(0, [none], "").ok
        assert not checks.judge_staging(2, [], "codec-ab: error: empty window").ok


class TestDeclaredHealth:
    """The compose file's declarations, as the stack test reads them."""

    def test_workers_checked_load_generators_not_topics_a_job(self) -> None:
        declared = {d.service: d for d in declared_health()}
        assert declared["worker-a"].healthcheck and declared["worker-b"].healthcheck
        assert not declared["loadgen-a"].healthcheck
        assert declared["topics"].one_shot and not declared["kafka"].one_shot


class TestQueryBreak:
    """The `query` break renames a metric in exactly one panel query."""

    def test_one_query_renamed(self) -> None:
        before = [e for _, d in dashboards() for _, e in panel_queries(d)]
        after = [
            e
            for _, d in renamed_metric_dashboards(list(dashboards()))
            for _, e in panel_queries(d)
        ]
        changed = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
        assert len(changed) == 1
        assert RENAMED[1] in changed[0][1]
