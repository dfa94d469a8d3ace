"""The stack test's verdicts: plain records in, one `Check` per judged thing out.

Pure functions over what the run read (`readback`, `live`), so each rule is
unit-tested on made-up figures (tests/deploy/test_stack_checks.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final


@dataclass(frozen=True)
class Check:
    """One judged thing: a name (`loss A`, `targets`, ...), pass or fail, and why."""

    name: str
    ok: bool
    detail: str
    problems: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        head = f"{'ok  ' if self.ok else 'FAIL'} {self.name}: {self.detail}"
        return [head, *(f"       {p}" for p in self.problems[:12])]


@dataclass(frozen=True)
class LoadgenSummary:
    """The load generator's final figures, from the summary it prints at exit."""

    run_id: str
    sent: int
    acked: int
    failed: int


_RUN: Final = re.compile(r"^run (\S+): ", re.MULTILINE)
_COUNTS: Final = re.compile(
    r"^\s+sent\s+([\d,]+)\s+acked\s+([\d,]+)\s+failed\s+([\d,]+)", re.M
)


def parse_loadgen_summary(output: str) -> LoadgenSummary | None:
    """The last summary table in a load generator's output (None if there is none)."""
    runs, counts = _RUN.findall(output), _COUNTS.findall(output)
    if not runs or not counts:
        return None
    sent, acked, failed = (int(n.replace(",", "")) for n in counts[-1])
    return LoadgenSummary(runs[-1], sent, acked, failed)


@dataclass(frozen=True)
class SideReadBack:
    """One side after the load: what was sent, what the topic holds, what was handled."""

    side: str
    summary: LoadgenSummary | None
    missing: int
    """Acknowledged `x-seq` (0 to acked-1) of the loadgen's run absent from the topic."""
    records: int
    """Records in the topic (the load generator's and the injected poison)."""
    handled: int
    """worker_messages_total over every outcome, from the worker's /metrics."""
    committed_to_end: bool
    dead_letters: int
    """Records in the side's dead-letter topic."""
    poison: int
    """Undecodable messages the run injected (each must be dead-lettered)."""
    worker_restarts: int = 0


def judge_side(rb: SideReadBack) -> Check:
    """`loss <side>`: every acknowledged message is in the topic and was handled once.

    The worker's counter is exact only within one process: a restarted worker fails
    the check (its handled count cannot be told from a loss).
    """
    name = f"loss {rb.side}"
    if rb.summary is None:
        return Check(name, False, "no summary from the load generator")
    s = rb.summary
    lost = rb.records - rb.handled
    problems = []
    if s.acked == 0:
        problems.append("the load generator had nothing acknowledged")
    if s.failed:
        problems.append(f"{s.failed:,} sends failed at the load generator")
    if rb.missing:
        problems.append(f"{rb.missing:,} acknowledged x-seq missing from the topic")
    if rb.worker_restarts:
        problems.append(f"the worker restarted {rb.worker_restarts} time(s)")
    if lost > 0:
        problems.append(f"{lost:,} of {rb.records:,} records never handled (lost)")
    if rb.handled > rb.records:
        problems.append(f"{rb.handled - rb.records:,} records handled twice")
    if not rb.committed_to_end:
        problems.append("the group's committed offsets stop short of the log end")
    if rb.dead_letters != rb.poison:
        problems.append(f"{rb.dead_letters} dead letters for {rb.poison} poison")
    detail = (
        f"{s.acked:,} acked, all {s.acked - rb.missing:,} read back by x-seq, "
        f"{rb.handled:,} of {rb.records:,} records handled, {rb.dead_letters} "
        f"dead letter(s) for {rb.poison} poison"
    )
    return Check(name, not problems, detail, tuple(problems))


def judge_targets(targets: Iterable[Mapping[str, str]], expected: int) -> Check:
    """`targets`: Prometheus has `expected` active targets and all are up."""
    found = list(targets)
    down = [
        f"{t['job']} {t['instance']}: {t['health']} {t.get('error', '')}".rstrip()
        for t in found
        if t["health"] != "up"
    ]
    problems = list(down)
    if len(found) != expected:
        problems.append(f"{len(found)} active targets, expected {expected}")
    detail = f"{len(found) - len(down)} of {len(found)} up"
    return Check("targets", not problems, detail, tuple(problems))


def judge_answers(name: str, answers: Mapping[str, bool], what: str) -> Check:
    """`rules`/`panels`: every query (title -> answered with data) answered."""
    empty = [title for title, ok in answers.items() if not ok]
    detail = f"{len(answers) - len(empty)} of {len(answers)} {what} answered with data"
    ok = bool(answers) and not empty
    return Check(name, ok, detail, tuple(f"no data: {t}" for t in empty))


@dataclass(frozen=True)
class Declared:
    """A service's health as the compose file declares it."""

    service: str
    healthcheck: bool
    """A health check runs (the image's, or the compose file's)."""
    one_shot: bool
    """A job that must have exited 0 (`service_completed_successfully`)."""


@dataclass(frozen=True)
class Observed:
    """A service's container as the engine shows it."""

    status: str
    exit_code: int
    health: str | None


def judge_health(
    declared: Iterable[Declared],
    observed: Mapping[str, Observed],
    *,
    finished: frozenset[str] = frozenset(),
    name: str = "health",
) -> Check:
    """`health`: each service as declared: healthy, exited 0 (a job), or running.

    Args:
        declared: the services to judge.
        observed: their containers by service.
        finished: services whose run has ended by now (the load generators after
            their duration): exited 0 is their healthy state.
        name: the check's name (`health during load`, `health after load`).
    """
    problems, states = [], []
    for d in declared:
        o = observed.get(d.service)
        if o is None:
            problems.append(f"{d.service}: no container")
            continue
        if d.one_shot or d.service in finished:
            good = o.status == "exited" and o.exit_code == 0
            state = f"exited {o.exit_code}" if o.status == "exited" else o.status
        elif d.healthcheck:
            good = o.status == "running" and o.health == "healthy"
            state = f"{o.status}, {o.health}"
        else:
            good = o.status == "running"
            state = o.status
        states.append(f"{d.service} {state}")
        if not good:
            problems.append(f"{d.service}: {state}")
    return Check(name, not problems, "; ".join(states), tuple(problems))


@dataclass(frozen=True)
class Leftovers:
    """What of the project exists after `down`."""

    containers: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    ports_in_use: list[int] = field(default_factory=list)


def judge_down(left: Leftovers) -> Check:
    """`down`: no container, network, volume or published port of the stack is left."""
    problems = [
        f"{kind}: {', '.join(map(str, items))}"
        for kind, items in (
            ("containers", left.containers),
            ("networks", left.networks),
            ("volumes", left.volumes),
            ("ports still listening", left.ports_in_use),
        )
        if items
    ]
    return Check(
        "down",
        not problems,
        "nothing left" if not problems else "left over",
        tuple(problems),
    )


VERDICTS: Final = frozenset({"better", "worse", "no detectable difference"})


def _num(value: object) -> str:
    return "?" if value is None else f"{float(str(value)):.3f}"


def judge_staging(
    status: int, ratios: Iterable[Mapping[str, object]], err: str
) -> Check:
    """`staging`: `codec-ab staging` exits 0 with a verdict on CPU us/msg B/A."""
    cpu = [r for r in ratios if r.get("figure") == "cpu_us_per_msg"]
    if status != 0 or len(cpu) != 1:
        tail = err.strip().splitlines()[-1:] or ["no report"]
        return Check("staging", False, f"exit {status}", (tail[0],))
    r = cpu[0]
    verdict = r.get("verdict")
    detail = (
        f"CPU us/msg B/A {_num(r.get('ratio'))} "
        f"[{_num(r.get('low'))}, {_num(r.get('high'))}]: {verdict}"
    )
    ok = verdict in VERDICTS
    why = () if ok else (f"no verdict: {r.get('why') or verdict}",)
    return Check("staging", ok, detail, why)
