"""`codec-ab`: the codec A/B run, one command from nothing to a report with charts.

For each payload profile, repeat and codec: a fresh topic and consumer group, a
worker process with that codec, a warm-up, then the load generator at `--rate` for
`--duration` (`abrunner.lab.runner`). With no `--bootstrap-servers` the local Kafka is
used if one runs (`make kafka-start`), else the local Kafka is started and stopped
here. `--max` finds each codec's maximum rate per worker process instead: the
worker drains a pre-filled backlog as fast as one process can.

Ctrl-C or SIGTERM stops the running case (processes killed, topics deleted), writes
the report of the cases finished, marked interrupted, and exits 130 (twice: at once).

`--compare OLD` compares the new report with OLD afterwards, `--compare OLD NEW`
two reports without a run (`abrunner.report.compare`): a CI gate.

Exit status: 0 when every case ran, lost nothing and decoded something (a case that
dead-lettered every message reads `DEAD-LETTERED ALL`), 1 otherwise, 2 for bad flags,
130 when interrupted; with `--compare`, also 1 on a regression and 2 for a report
that cannot be read.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any, Final

from rich.console import Console

import service.settings.cli_flags as commands
from abrunner import guarantees
from abrunner.config import DEFAULT_CODECS, PREFERRED_BASELINE, TOOL, AbSettings
from abrunner.framing import framed_plan, unusable_registry
from abrunner.lab import payload_sizing, peer_decode, runner
from abrunner.plan import Plan, Profile, code_not_run, schema_limits, validator_lines
from abrunner.report import compare, decisions, rejections
from abrunner.report.logic_verdicts import judge as judge_logic
from abrunner.report.tables import write
from abrunner.report.terminal import print_tables
from abrunner.results import CaseResult, Report
from loadgen import replay
from localkafka.topics import CONNECT_TIMEOUT_S, TopicAdmin
from schemas.errors import ConfigError, LocalKafkaError
from service.kafka.security_check import AccessRefused, check_access
from service.settings.cli_flags import KAFKA_FLAGS, REGISTRY_FLAGS, Flag, add_flags

INTERRUPTED: Final = 130
"""128 + SIGINT: what a shell reports for a command stopped by Ctrl-C."""

_FLAGS: Final = (
    Flag(
        "--codecs",
        ("codecs",),
        "comma-separated codec keys",
        default="the six migration codecs, " + ",".join(DEFAULT_CODECS) + "; "
        "flatbuffers, capnp and avro run when named",
    ),
    Flag(
        "--framing",
        ("framing",),
        "none|confluent: also run each codec framed (CODEC+confluent) beside it",
    ),
    Flag("--rate", ("rate",), "messages per second", float),
    Flag("--duration", ("duration",), "measured seconds per codec", float),
    Flag("--warmup", ("warmup",), "warm-up seconds per codec", float),
    Flag(
        "--schema",
        ("schema",),
        "your own schema, MODULE:NAME or FILE.proto:Message (or a built-in one), "
        "instead of --profile",
    ),
    Flag(
        "--replay",
        ("replay",),
        "replay this recording (codec-loadgen record) in every case, transcoded "
        "into the case's codec",
        Path,
    ),
    Flag("--profile", ("profile",), "payload profile: small, medium, large[:BYTES]"),
    Flag(
        "--profiles",
        ("profiles",),
        "comma-separated profiles to sweep, e.g. small,medium,large:1000000",
    ),
    Flag(
        "--large-bytes",
        ("large_bytes",),
        "comma-separated sizes of the large profile, e.g. 10000,100000,1500000",
    ),
    Flag("--repeat", ("repeat",), "runs of each case; median and spread", int),
    Flag(
        "--max",
        ("max_mode",),
        "find each codec's maximum rate per worker process",
        boolean=True,
    ),
    Flag(
        "--mode",
        ("mode",),
        "paired: every codec of a repeat at once on the same traffic, compared "
        "window by window (sequential where the machine cannot carry them all); "
        "sequential: one codec after another, in a rotated order",
    ),
    Flag("--window-s", ("window_s",), "seconds per window of a paired run", float),
    Flag("--max-messages", ("max_messages",), "backlog size in --max mode", int),
    Flag("--partitions", ("partitions",), "partitions of each topic", int),
    Flag(
        "--baseline",
        ("baseline",),
        "codec the ratios refer to",
        default="json-stdlib+pydantic if listed, else the first codec",
    ),
    Flag("--out", ("out",), "report directory", Path),
    Flag("--logic", ("logic",), "workers' logic: a team's MODULE:CALLABLE or a stub"),
    Flag(
        "--run-validators",
        ("run_validators",),
        "workers' derived Structs run your model's after validators (the report "
        "says which codecs ran them)",
        boolean=True,
    ),
    Flag(
        "--processing-guarantee",
        ("processing_guarantee",),
        "at-least-once|exactly-once|both (both: the same load under each, in "
        "turn, and exactly-once's cost per codec in guarantees.md)",
    ),
    Flag(
        "--worker-arg",
        ("worker_args",),
        "extra codec-worker flag, repeatable, e.g. --worker-arg=--batch-size=1000",
        many=True,
    ),
    Flag(
        "--loadgen-arg",
        ("loadgen_args",),
        "extra codec-loadgen flag, repeatable, e.g. --loadgen-arg=--list-len=1,8",
        many=True,
    ),
    Flag(
        "--verify",
        ("verify",),
        "read each topic back to check the run's x-seq coverage",
        boolean=True,
    ),
    Flag(
        "--bench",
        ("bench",),
        "measure each codec's decode in-process (codec-bench) before the Kafka "
        "cases, to set beside the Kafka path's",
        boolean=True,
    ),
    Flag(
        "--target-rate",
        ("target_rate",),
        "msg/s to size each codec's cores for: CPU us/msg x rate / 1e6",
        float,
        default="the run's --rate",
    ),
    *compare.gate_flags("a codec"),
    *KAFKA_FLAGS,
    *REGISTRY_FLAGS,
)


def build_parser() -> argparse.ArgumentParser:
    """The `codec-ab` argument parser; every help text states default and variable."""
    parser = commands.command_parser(
        "codec-ab",
        "Compare codecs on real Kafka: a worker per codec under the same load, then "
        "one side-by-side report (report.md, report.json, PNG charts). Without a "
        "broker address it uses the one `codec-kafka start` recorded, else starts "
        "the local Kafka. Ctrl-C writes the report of the cases finished and exits "
        "130. Precedence: defaults < --config "
        "TOML ([kafka], [ab]) < environment (KAFKA_*, AB_*) < flags.",
        TOOL,
    )
    add_flags(parser, _FLAGS, AbSettings, TOOL)
    parser.add_argument(
        "--compare",
        nargs="+",
        metavar="REPORT",
        default=[],
        help="OLD: after the run, compare the new report with OLD (a report.json or "
        "its directory); OLD NEW: compare two reports, no run. Exit 1 when a codec "
        "regressed beyond --max-regression, 2 when a report cannot be read",
    )
    return parser


def plan_from_settings(s: AbSettings) -> Plan:
    """The typed plan from the settings: the one place settings become a `Plan`.

    A replay's recording is probed against the schema here, before any run
    (`loadgen.replay.probe`): a recording of another schema is refused.

    Raises:
        ConfigError: a value is invalid; the message names the setting.
    """
    profiles = [Profile.parse(p) for p in (s.profiles or [s.profile])]
    if s.schema_ is not None:
        profiles = [Profile(s.schema_)]
    elif s.large_bytes:
        profiles = [p for p in profiles if p.schema != "large"]
        profiles += [Profile("large", size) for size in s.large_bytes]
    same = {"rate", "duration", "warmup", "repeat", "max_mode", "max_messages"}
    same |= {"mode", "window_s", "processing_guarantee"}
    codecs, left_out, skipped = schema_limits(
        s.schema_,
        tuple(s.codecs),
        synthetic=s.replay is None,
        named="codecs" in s.model_fields_set,
    )
    baseline = s.chosen_baseline
    if baseline not in codecs and s.baseline is None:  # the default one, left out
        baseline = PREFERRED_BASELINE if PREFERRED_BASELINE in codecs else codecs[0]
    plan = Plan(
        **s.model_dump(include=same | {"partitions", "verify", "bench"}),
        codecs=codecs,
        left_out=left_out,
        skipped=skipped,
        validators=validator_lines(s.schema_, codecs, s.run_validators),
        not_run=code_not_run(s.schema_, codecs, s.run_validators),
        profiles=tuple(profiles),
        baseline=baseline,
        out=str(s.out),
        worker_args=s.worker_argv(),
        logic=s.logic,
        logic_verdicts=judge_logic(s.logic, profiles[0].schema, codecs, s.replay),
        loadgen_args=tuple(w for a in s.loadgen_args for w in a.split("=", 1)),
        replay=None if s.replay is None else str(s.replay),
        rotated=True,
    )
    if s.replay is not None:  # another schema's traffic would be all dead letters
        framed = None if s.framing == "none" else s.registry.access()
        replay.probe(s.replay, plan.profiles[0].schema, framed=framed)
    return plan


def main(argv: Sequence[str] | None = None) -> int:
    """Run the A/B; 0 when every case ran and lost nothing, 1 otherwise, 2 bad
    flags, 130 interrupted. `codec-ab staging ...` is `abrunner.staging.cli`."""
    given = sys.argv[1:] if argv is None else list(argv)
    if given[:1] == ["staging"]:
        from abrunner.staging import cli as staging_cli

        return staging_cli.main(given[1:])
    if given[:1] == ["record"]:  # the step before --replay is the load generator's
        rest = " ".join(given[1:]) or "--topic T --out FILE"
        out = given[given.index("--out") + 1] if "--out" in given[:-1] else "FILE"
        print(
            "codec-ab: error: 'record' is not a codec-ab command: record with "
            f"`codec-loadgen record {rest}`, then replay with `codec-ab --replay "
            f"{out}`",
            file=sys.stderr,
        )
        return 2
    args = build_parser().parse_args(argv)
    settings = commands.settings_or_status(AbSettings, TOOL, args, _FLAGS)
    if isinstance(settings, int):
        return settings
    try:  # before the run: an unreadable OLD must not cost one
        before = compare.reports(args.compare)
    except compare.UnreadableReport as exc:
        print(f"codec-ab: --compare: {exc}", file=sys.stderr)
        return 2
    if len(before) == 2:
        return _gate(settings, before[0], before[1], tuple(args.compare))
    if settings.processing_guarantee == "both":
        if args.compare:
            print("codec-ab: --compare: not with both guarantees", file=sys.stderr)
            return 2
        return guarantees.run_both(settings, lambda one: _run(one, [], ())[:2])
    return _run(settings, before, args.compare)[0]


def _run(
    settings: AbSettings, before: list[Report], compare_to: Sequence[str]
) -> tuple[int, Report | None]:
    """One A/B run with its report and `--compare` gate: (exit status, report)."""
    if (status := unusable_registry(settings)) is not None:  # before any case
        return status, None
    try:
        plan = plan_from_settings(settings)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2, None
    console = Console(stderr=True)
    bootstrap = settings.bootstrap
    if bootstrap is not None and not settings.bootstrap_given:
        console.print(f"using the broker `codec-kafka start` recorded: {bootstrap}")
    given = settings.bootstrap_given  # a backlog the broker's disk cannot hold:
    if problem := payload_sizing.broker_disk_problem(plan, bootstrap, given):
        print(f"codec-ab: {problem}", file=sys.stderr)
        return 2, None
    if bootstrap is not None:  # refused, mismatched or nobody there: one line, now
        try:
            _check_cluster(runner.Broker.of(bootstrap, settings.kafka).conf)
        except (AccessRefused, LocalKafkaError) as exc:
            print(f"codec-ab: error: {exc}", file=sys.stderr)
            return 1, None
        except ConfigError as exc:
            print(exc, file=sys.stderr)
            return 2, None
    try:
        with _interrupts(), framed_plan(settings, plan, console) as plan:
            report = runner.run(plan, bootstrap, console, settings.kafka)
            report.peers = peer_decode.for_report(settings, plan, report, console)
            decisions.decide(report, settings.target_rate or plan.rate)
            paths = write(report, plan.out_dir)
            print_tables(report, sys.stdout)
    except KeyboardInterrupt:  # after the cases: while the report was written
        console.print("codec-ab: interrupted")
        return INTERRUPTED, None
    console.print(
        f"report: {paths[0]}, {paths[1]} and {len(paths) - 2} charts"
        + (" (interrupted)" if report.interrupted else "")
    )
    if report.interrupted:
        return INTERRUPTED, report
    status = 1 if any(map(_failed, report.results)) else 0
    if before:
        names = (compare_to[0], str(paths[1]))
        status = max(status, _gate(settings, before[0], report, names))
    return status, report


def _gate(
    settings: AbSettings, old: Report, new: Report, names: tuple[str, ...]
) -> int:
    """`compare.gate` with the settings' threshold and figures, on stdout."""
    return compare.gate(
        old,
        new,
        (names[0], names[1]),
        settings.max_regression,
        settings.gate_figures,
        sys.stdout,
    )


def _check_cluster(conf: dict[str, Any]) -> None:
    """Before any case: the cluster accepts this client and a broker answers.

    Raises:
        AccessRefused: the cluster refused the client's security settings.
        LocalKafkaError: no broker answered within `CONNECT_TIMEOUT_S`.
        ConfigError: a key or keystore the client cannot open.
    """
    check_access(conf)
    TopicAdmin(conf, connect_timeout=CONNECT_TIMEOUT_S, silent=True)


def _failed(result: CaseResult) -> bool:
    """Not measured, lost messages, or dead-lettered every message it handled."""
    everything = rejections.rejected_all([result]) is not None
    return bool(result.error is not None or result.lost or result.seq_missing) or (
        result.error is None and everything
    )


class _Stop:
    """A signal handler: the first signal raises KeyboardInterrupt in the main
    thread (the runner stops its case and the report is written), the next one
    ends the process at once; its children die with it (`die_with_parent`)."""

    def __init__(self) -> None:
        self.signals = 0

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.signals += 1
        if self.signals > 1:
            os.write(2, b"codec-ab: interrupted again: exiting now\n")
            os._exit(INTERRUPTED)
        raise KeyboardInterrupt


@contextmanager
def _interrupts() -> Iterator[_Stop]:
    """Route SIGINT and SIGTERM to a `_Stop` for the block (main thread only)."""
    stop = _Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {
        sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
