"""The A/B results as typed Structs: one case, one aggregated row, the whole report.

The runner fills a `CaseResult` per codec, profile and repeat; `report.aggregate`
folds the repeats into a `Row` per codec and profile; a `Report` (plan, environment,
results, summary) is what report.json holds: `msgspec.json.encode(report)`, read
back with `msgspec.json.decode(data, type=Report)`.

A figure that was not measured is None and left out of report.json; fields added
since the first reports have defaults, so every report.json written still reads. A
latency quantile whose rank lies above the top histogram bucket is `math.inf` in memory
(`service.telemetry.histogram.quantile`); JSON has no infinity, so it is written as null.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

from abrunner.peer_figures import PeerDecode
from abrunner.plan import Plan
from abrunner.windowed import Capacity, Paired


class CaseResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Every figure measured for one codec on one profile in one repeat.

    Attributes:
        codec: the codec's registry key.
        profile: the payload profile's label (`medium`, `large:100000`).
        repeat: which repeat of the case, from 0.
        mode: `rate` (paced load) or `max` (a backlog drained as fast as it goes).
        throughput: messages handled per second in the measured window.
        max_rate: in max mode, the throughput: the worker's maximum per process.
        cpu_pct: the worker's CPU time over the window, % of one core.
        cpu_us_per_msg: the worker's CPU microseconds per handled message.
        e2e_p50_ms: median end-to-end latency (None in max mode).
        e2e_p99_ms: 99th percentile end-to-end latency.
        e2e_p999_ms: 99.9th percentile end-to-end latency.
        decode_us: mean of the worker's sampled single decodes (in reports written
            before the worker sampled: a batch's decode time over its size).
        decode_p50_us: median of the worker's sampled single decodes (every 32nd
            message timed with `perf_counter_ns`: wall time, preemption included),
            from the `worker_decode_seconds` histogram's delta.
        handle_us: mean business-logic time per message (wall: an async
            handler's awaits included).
        handle_cpu_us: an async handler's mean CPU per message in its own steps
            (`worker_handle_cpu_seconds`); None for a sync one (its time is CPU).
        gc_ms_per_s: milliseconds per second the worker spent in cyclic garbage
            collection (all generations) over the load window.
        gc_per_1k_msgs: cyclic garbage collections (all generations) per 1,000
            messages handled.
        rss_peak_mb: the worker's highest sampled resident memory.
        rss_steady_mb: the median RSS over the second half of the window.
        wire_bytes: mean payload bytes per message the load generator sent in
            the measured run (every message sent, whatever the worker did with it:
            codecs sent the same bytes show the same size). Reports written before
            averaged the worker's accepted messages only.
        lag_end: consumer lag when the load stopped.
        lag_max: the highest sampled consumer lag.
        dead_lettered: messages of the measured run (after the warm-up, to the
            drain's end: the messages `processed` counts) sent to the dead-letter
            topic. Reports written before counted the warm-up's too.
        warmup_dead_lettered: the warm-up's dead letters, not in `dead_lettered`
            (None in max mode, which has no warm-up).
        e2e_invalid: sampled messages whose latency was not observed: `x-sent-ns`
            unparsable, ahead of the worker's clock or absurdly old
            (`worker_e2e_latency_invalid_total`); None from a worker without it.
        processed: messages of the measured run handled, whatever the outcome
            (after the warm-up, to the drain's end; in max mode the backlog).
            Reports written before counted from the first snapshot after the
            first measured message (a few fewer).
        target_rate: the rate asked of the load generator.
        producer_rate: the rate the load generator achieved.
        sent: messages the measured load generator sent.
        acked: of those, acknowledged by the broker.
        producer_failed: deliveries the load generator saw fail.
        lost: acknowledged but never handled (None: not drained, so unknown).
        not_drained: still queued when the drain timed out (not loss).
        seq_missing: `x-seq` values of the run absent when the topic is read back.
        kept_up: the worker kept pace with the load.
        worker_exit: the worker's exit status after SIGTERM.
        offsets_committed_to_end: the group's committed offsets reached the end.
        error: why the case could not be measured (None when it was).
        rejected_count: dead letters of the measured run (read back from the
            dead-letter topic).
        rejected: those dead letters by `"<field path>: <reason>"`.
        recorded: a replay: the messages in the recording.
        replayed_as_recorded: a replay: recorded messages sent byte for byte.
        not_carried: a replay: recorded messages the codec's format cannot carry
            (skipped), by `"<field path>: <reason>"`.
        logs: the case's log files (worker, load generator), as written.
    """

    codec: str
    profile: str
    repeat: int
    mode: Literal["rate", "max"] | None = None
    throughput: float | None = None
    max_rate: float | None = None
    cpu_pct: float | None = None
    cpu_us_per_msg: float | None = None
    e2e_p50_ms: float | None = None
    e2e_p99_ms: float | None = None
    e2e_p999_ms: float | None = None
    decode_us: float | None = None
    decode_p50_us: float | None = None
    handle_us: float | None = None
    handle_cpu_us: float | None = None
    gc_ms_per_s: float | None = None
    gc_per_1k_msgs: float | None = None
    rss_peak_mb: float | None = None
    rss_steady_mb: float | None = None
    wire_bytes: float | None = None
    lag_end: float | None = None
    lag_max: float | None = None
    dead_lettered: int | None = None
    warmup_dead_lettered: int | None = None
    e2e_invalid: int | None = None
    processed: int | None = None
    target_rate: float | None = None
    producer_rate: float | None = None
    sent: int | None = None
    acked: int | None = None
    producer_failed: int | None = None
    lost: int | None = None
    not_drained: int | None = None
    seq_missing: int | None = None
    kept_up: bool | None = None
    worker_exit: int | None = None
    offsets_committed_to_end: bool | None = None
    error: str | None = None
    rejected_count: int | None = None
    rejected: dict[str, int] = {}
    recorded: int | None = None
    replayed_as_recorded: int | None = None
    not_carried: dict[str, int] = {}
    logs: list[str] = []


FIGURES: Final = tuple(
    (  # noqa: SIM905 (a name a line would take 20 lines more)
        "throughput max_rate cpu_pct cpu_us_per_msg e2e_p50_ms e2e_p99_ms "
        "e2e_p999_ms decode_us decode_p50_us handle_us handle_cpu_us gc_ms_per_s "
        "gc_per_1k_msgs rss_peak_mb rss_steady_mb wire_bytes lag_end lag_max "
        "processed target_rate producer_rate sent acked producer_failed "
        "seq_missing worker_exit"
    ).split()
)
"""The `CaseResult` fields a `Row` keeps as a median and spread over the repeats.

The rest are identity (codec, profile, repeat, mode) or summed into the row's
status (lost, not_drained, dead_lettered, kept_up, error)."""


IN_PROCESS_FIGURES: Final = (
    "decode_in_process_us",
    "decode_read_in_process_us",
    "decode_vs_in_process",
)
"""The `Row` figures from the in-process measurement (`InProcess`; one value each,
so no spread): its decode and decode+read medians, and the Kafka path's median
decode (`decode_p50_us`) over the in-process one (1.0 when they agree). Reports written
since the lazy formats also hold `read_all_in_process_us` and `read_k_in_process_us`."""


class Spread(msgspec.Struct, frozen=True):
    """One figure over a case's repeats."""

    median: float
    min: float
    max: float


class InProcess(msgspec.Struct, frozen=True, kw_only=True):
    """`codec-bench`'s figures for one codec on one profile, taken in this process.

    Medians over the samples of CPU microseconds per message (`time.thread_time_ns`)
    in a tight loop over the load generator's pool (same size and seed).

    Attributes:
        codec: the codec's registry key.
        profile: the payload profile's label.
        decode_us: the decoder alone (`decode_unchecked`, as the worker calls it).
        decode_read_us: decode, then the stub logic reading every field.
        read_all_us: decode, then every field read into Python values (like with
            like across eager and lazy codecs); None in older reports.
        read_k_us: decode, then only the first three top-level fields read (the
            narrow consumer, where a lazy format can save); None in older reports.
    """

    codec: str
    profile: str
    decode_us: float
    decode_read_us: float
    read_all_us: float | None = None
    read_k_us: float | None = None


class Row(msgspec.Struct, kw_only=True):
    """One codec on one profile over its repeats: status and figures.

    Attributes:
        runs: repeats run, failed ones included.
        errors: the failed repeats' errors.
        kept_up: every measured repeat kept up (False when none was measured).
        lost: messages lost over the measured repeats (`lost` + `seq_missing`).
        not_drained: messages still queued after the drains.
        dead_lettered: messages dead-lettered over the measured repeats (their
            measured runs, the warm-ups left out).
        figures: each of `FIGURES` that was measured at least once, when the
            in-process figures were taken each of `IN_PROCESS_FIGURES`,
            `cores_at_target`: CPU us/msg x `Report.target_rate` / 1e6, and
            `decode_share`: mean decode over CPU us/msg, per repeat
            (`abrunner.report.decode_share`).
        rejected_all: every measured repeat dead-lettered every message it
            handled: the most frequent reason (the status says so, never `ok`:
            the figures measure rejecting, not decoding); else None.
    """

    runs: int
    errors: list[str]
    kept_up: bool
    lost: int
    not_drained: int
    dead_lettered: int
    figures: dict[str, Spread]
    rejected_all: str | None = None

    def median(self, key: str) -> float | None:
        """The median of figure `key`, None when it was never measured."""
        spread = self.figures.get(key)
        return None if spread is None else spread.median


Summary = dict[str, dict[str, Row]]
"""profile label -> codec -> its aggregated row."""


def by_cpu(rows: dict[str, Row]) -> list[str]:
    """The codecs of one profile, lowest CPU per message first (unmeasured last)."""
    return sorted(rows, key=lambda c: rows[c].median("cpu_us_per_msg") or float("inf"))


class Ratio(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One codec's figure over the baseline's, from repeats paired by index.

    Attributes:
        profile: the payload profile's label.
        codec: the codec's registry key (never the baseline).
        figure: the `FIGURES` key: `cpu_us_per_msg`, `e2e_p99_ms` or `rss_steady_mb`.
        pairs: repeats measured for both (finite, positive figures).
        ratio: the geometric mean of the pairs' ratios.
        low: the 95 % interval's lower end (None with fewer than 3 pairs).
        high: its upper end (None with fewer than 3 pairs).
        verdict: `better`, `worse` (the interval excludes 1) or `no detectable
            difference` (None with fewer than 3 pairs).
        why: why there is no interval, where the data cannot support one.
    """

    profile: str
    codec: str
    figure: str
    pairs: int
    ratio: float
    low: float | None = None
    high: float | None = None
    verdict: str | None = None
    why: str | None = None


class Environment(msgspec.Struct, kw_only=True):
    """Versions and machine facts that make the figures reproducible."""

    python: str
    platform: str
    cpu_count: int | None
    cpu_model: str
    kafka: str
    librdkafka: str
    protobuf_backend: str
    libraries: dict[str, str]


class Report(msgspec.Struct, kw_only=True):
    """Everything one `codec-ab` run wrote: report.json.

    Attributes:
        plan: what was asked.
        environment: versions and machine facts.
        results: one per case finished.
        summary: the results folded per profile and codec.
        interrupted: the run was stopped (Ctrl-C, SIGTERM) before its last case;
            `results` holds the cases finished.
        in_process: the in-process decode figures taken before the Kafka cases.
        target_rate: the rate (msg/s) the rows' `cores_at_target` figure is
            for (`--target-rate`, default the run's `--rate`).
        ratios: with 3 repeats or more, each codec's figures over the
            baseline's with a 95 % interval and a verdict (`abrunner.report.decisions`).
        staging: set in a staging report (`codec-ab staging`): two live sides.
        paired: set when the codecs ran paired: every window measured.
        capacity: the check that chose paired or sequential runs, when made.
        peers: the framed cases' in-process decode beside confluent-kafka's
            deserializers on the same framed messages (`--framing confluent`).
    """

    plan: Plan
    environment: Environment
    results: list[CaseResult]
    summary: Summary
    interrupted: bool = False
    in_process: list[InProcess] = msgspec.field(default_factory=list)
    target_rate: float | None = None
    ratios: list[Ratio] = msgspec.field(default_factory=list)
    staging: Staging | None = None
    paired: Paired | None = None
    capacity: Capacity | None = None
    peers: list[PeerDecode] = msgspec.field(default_factory=list)


class StagingSide(msgspec.Struct, kw_only=True):
    """One live side of a staging report (`codec-ab staging`).

    Attributes:
        name: `A` or `B`; its rows are keyed `A: <codec>`.
        selector: the PromQL label matchers that chose its workers.
        codec: the codec its `worker_info` names.
        schema: the schema its `worker_info` names.
        version: the worker versions seen.
        topics: the topics its workers read.
        processes: the most worker processes seen at one slice's end.
        restarts: worker processes (re)started during the window.
        slices_without_data: slices in which this side handled no message.
        consumer_errors: Kafka consumer errors over the window
            (`worker_consumer_errors_total`).
    """

    name: str
    selector: str
    codec: str
    schema: str
    version: str
    topics: list[str]
    processes: int
    restarts: int
    slices_without_data: int
    consumer_errors: int = 0


class Staging(msgspec.Struct, kw_only=True):
    """What makes a report a staging report: where the figures came from and how
    the window was cut (`abrunner.staging.report`).

    In a staging report the plan's `duration` is the window, `warmup` the slice
    length, `repeat` the number of blocks (the units the intervals are taken on),
    `rate` the cores column's (`rate_basis`); `results` one entry per side and block.

    Attributes:
        prometheus: the server read.
        start, end: the window (unix seconds).
        slice_s: the slice length in seconds.
        slices: whole slices in the window.
        usable: slices in which both sides handled messages.
        blocks: consecutive groups of usable slices the intervals are taken on.
        per_block: usable slices per block.
        dropped: earliest usable slices left out to make equal blocks.
        sides: side A, then side B.
        warnings: why the sides may not be comparable.
        notes: what the data shows that supports the comparison.
        same_messages: both sides read the same topics and handled the same
            number of messages of the same size (within 2 %).
        refused: why there are no intervals (too few slices), else None.
        dashboard: side -> figure -> the Verdict row's rules at the window's end.
        slice_results: each side's figures per slice (`repeat` = slice index).
        window_note: the window as analysed, what was left out and why.
        rate_basis: what the cores column's rate is; stalls: side -> its stall.
    """

    prometheus: str
    start: float
    end: float
    slice_s: float
    slices: int
    usable: int
    blocks: int
    per_block: int
    dropped: int
    sides: list[StagingSide]
    warnings: list[str] = msgspec.field(default_factory=list)
    notes: list[str] = msgspec.field(default_factory=list)
    same_messages: bool = False
    refused: str | None = None
    dashboard: dict[str, dict[str, float]] = msgspec.field(default_factory=dict)
    slice_results: list[CaseResult] = msgspec.field(default_factory=list)
    window_note: str = ""
    rate_basis: str = ""
    stalls: dict[str, str] = msgspec.field(default_factory=dict)
