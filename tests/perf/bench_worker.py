"""Benchmark: the worker against a bare per-message loop, for every codec.

Run: `make bench`, or `python -m tests.perf.bench_worker --help`. Against
`KAFKA_BOOTSTRAP_SERVERS` if set (or `--bootstrap-servers`), else a `LocalKafka`
started for the run. Not a test: nothing is asserted, the figures depend on the
machine. Progress goes to stderr, the result to stdout (`--json`: one object).

The two contenders, each in its own process with a fresh consumer group:

- `bare`: the least a correct Python consumer of this traffic can do. A
  confluent-kafka `Consumer` with default settings (auto-commit;
  `auto.offset.reset=earliest`, as the worker's), `consume(batch, timeout)` with the
  worker's default batch size and wait (500, 5 ms), then per message `if
  m.error() is None: decode(m.value())` with the codec's own library decoder
  (`get_codec(codec, "medium").decode_unchecked`), the object dropped at once. The
  error check is what confluent-kafka's own example consumer does: without it an
  error event's text would be decoded as a message. Per batch it also stores its
  progress in shared memory and checks a stop flag (~0.2 us a batch).
- `worker`: `python -m service --codec C --schema medium --logic noop`, everything
  else at its defaults (`--batch-size` here passes one to both): offsets stored
  after each batch, the dead-letter producer armed, metrics updated per batch, the
  control-plane thread serving /metrics, decode timed for every 128th message and
  e2e latency for every 64th.

Drain mode (default). For each of `--codecs`, a fresh topic is filled by the product's
load generator (`codec-loadgen --rate 0 --count N`: medium order events in that
codec's wire format with its four headers); then bare and worker drain it, `--rounds`
times, the order flipped every round (bare, worker; worker, bare; ...) so that drift
in the broker or the machine favours neither. The figure is messages per CPU-second
of the consuming process: user + system time from /proc/<pid>/stat, read by this
harness together with the progress (the bare loop's shared counter, the worker's
`worker_messages_total` scraped from /metrics) from the first sample that sees a
message to the first that sees them all, so start-up (imports, group join) is
excluded. A scrape costs the worker ~4 ms of CPU (200 of them cost an idle worker
0.8 s), so samples are few: the second comes `--sample-interval` (0.5 s) after the
first, each later one at the end predicted from the rate so far (2 s apart at most):
2 to 6 a drain, under 1 % of the worker's CPU in a 300k drain, counted against it.
CPU time comes in 10 ms clock ticks: a 300k drain takes 1.4-10 CPU-seconds, so one
tick is under 0.7 % of it; small `--messages` runs are noise.

Reading the table: one row per codec; the bare and worker columns give best / median
msgs per CPU-second over the rounds; `best` is best worker / best bare, `median`
median / median, `paired` the median over rounds of each round's worker / bare (the
two drains of a round run back to back, so drift of the shared machine between
rounds cancels; it is the steadiest of the three). The ratio is the share of the codec's bare
throughput the worker keeps: 1.00 is free, 0.90 means 10 % fewer messages per
CPU-second. Target: >= 0.90 for every codec. The worker decodes, handles and drops
each message, so what it adds is a fixed cost per message and per batch, the same for
every codec (`make bench-instructions` counts it); the cheapest decode (protobuf)
feels it most. A worker that held a batch's decoded objects would add a cost that
differs by codec (DESIGN.md: a medium pydantic event 11 us dropped at once, 29 us held
in a list of 500; msgspec 2.5 vs 3.9 us).

Fixed-rate mode (`--fixed-rate`). For each of `--rates` (2,000, 20,000 and 40,000
msg/s), one fresh topic of `--codec` (msgspec-msgpack) events; bare and worker
subscribe in their own groups and are both assigned before the load generator sends
that rate for `--duration` (60 s), so both consume the same traffic at the same time.
The rates matter: a 5 ms consume returns ~10 messages at 2,000 msg/s and ~100 at
20,000, so what the worker does per batch (and per idle poll) weighs most at the low
rate. The window runs from the first message the bare loop sees to the first sample
at which both have processed every acknowledged message (or `--drain-timeout`: then
the table says how far behind). Per consumer: CPU % of a core over the window, split
by thread (the Python threads, librdkafka's `rdk:*`), and e2e latency p50/p99 from the
`x-sent-ns` header to processed. Both sample latency the same way: the worker runs
with `--latency-sample-every K` (`--latency-sample-every`, the worker's 64 by
default; 1 reads every message's stamp), and its figures come from the deltas of its
`worker_e2e_latency_seconds` histogram, scraped before the load and at the end of the
window only (one or two ~2 ms scrapes inside it). The bare loop, after decoding a
batch, takes one `time_ns()`, then for every K-th message of the stream reads
`m.headers()`, compares with `x-sent-ns` (stamped first) and appends `now -
int(value)` to an `array('q')`; at the end it buckets them as the worker does, and
both are read with `service.telemetry.histogram.quantile` (the bare loop's exact quantiles are
in `--json`). Converting a consumed message's headers costs 1.8-4.5 us, so reading
every stamp costs either loop ~10 % of a core at 40k msg/s: a comparison where only
one of them does it says nothing. Targets, worker / bare: CPU <= 1.10x, p50, p99 <=
1.2x, at every rate. `--twin-bare` adds a second, identical bare loop on the same
traffic: how far two identical loops differ within one run (the noise floor a worker
ratio must clear before it says anything), and the worker against the mean of both.
Runs on this machine differ more from each other than the twins within one run do.
"""

from __future__ import annotations

import argparse
import os
import statistics
from contextlib import ExitStack
from functools import partial
from typing import Any, Final

from codec import REAL_CODECS
from tests.perf.bench_fixed_rate import fixed_rate, print_fixed_rate
from tests.perf.bench_support import (
    LATENCY_SAMPLE_EVERY,
    WORKER_DEFAULTS,
    BareConsumer,
    WorkerProcess,
    fill_topic,
    fresh_topic,
    log,
    measure_drain,
    run_bench,
)

DEFAULT_CODECS: Final = (
    "msgspec-json",
    "msgspec-msgpack",
    "protobuf",
    "json+pydantic",
    "json-stdlib+pydantic",
    "flatbuffers",
    "capnp",
    "avro",
)
DRAIN_TARGET: Final = 0.90


# -- drain mode ----------------------------------------------------------------------


def _drain_once(
    who: str,
    args: argparse.Namespace,
    bootstrap: str,
    topic: str,
    codec: str,
    total: int,
) -> dict[str, Any]:
    contender: BareConsumer | WorkerProcess
    if who == "bare":
        timeout = WORKER_DEFAULTS.batch_timeout_ms / 1000
        batch = _bare_batch_size(args)
        contender = BareConsumer(bootstrap, topic, codec, batch, timeout)
    else:
        contender = WorkerProcess(bootstrap, topic, codec, args.batch_size)
    try:
        return measure_drain(
            contender.pid, contender.progress, total, args.sample_interval, args.timeout
        )
    finally:
        contender.close()


def _codec_drain(
    args: argparse.Namespace, bootstrap: str, codec: str
) -> dict[str, Any]:
    with ExitStack() as stack:
        topic = fresh_topic(stack, bootstrap, codec, args.partitions)
        log(f"{codec}: filling {topic} with {args.messages:,} events")
        fill = fill_topic(bootstrap, topic, codec, args.messages)
        runs: dict[str, list[dict[str, Any]]] = {"bare": [], "worker": []}
        for r in range(args.rounds):
            for who in ("bare", "worker") if r % 2 == 0 else ("worker", "bare"):
                run = _drain_once(who, args, bootstrap, topic, codec, fill["acked"])
                runs[who].append(run)
                log(
                    f"{codec}: round {r + 1} {who}: {run['msgs_per_cpu_s']:,} "
                    f"msg/CPU-s; threads {run['threads_cpu_s']}, steal "
                    f"{run['steal_s']} s"
                )
    out: dict[str, Any] = {"value_bytes": fill["bytes_per_message"]}
    for who, rounds in runs.items():
        rates = [r["msgs_per_cpu_s"] for r in rounds]
        out[who] = {
            "best": max(rates),
            "median": statistics.median(rates),
            "rounds": rounds,
        }
    out["ratio_best"] = round(out["worker"]["best"] / out["bare"]["best"], 3)
    out["ratio_median"] = round(out["worker"]["median"] / out["bare"]["median"], 3)
    # Each round's two drains run back to back: their ratio cancels the machine's
    # drift between rounds (a shared host moves both by 10-20 % at times).
    paired = [
        w["msgs_per_cpu_s"] / b["msgs_per_cpu_s"]
        for w, b in zip(runs["worker"], runs["bare"], strict=True)
    ]
    out["ratio_paired"] = [round(r, 3) for r in paired]
    out["ratio_paired_median"] = round(statistics.median(paired), 3)
    return out


def drain(args: argparse.Namespace, bootstrap: str) -> dict[str, Any]:
    """Drain mode: every codec, bare vs worker, msgs per CPU-second."""
    codecs = {c: _codec_drain(args, bootstrap, c) for c in args.codecs}
    below = {
        kind: [c for c, r in codecs.items() if r[f"ratio_{kind}"] < DRAIN_TARGET]
        for kind in ("best", "median", "paired_median")
    }
    return {
        "mode": "drain",
        "messages": args.messages,
        "partitions": args.partitions,
        "rounds": args.rounds,
        "batch_size": args.batch_size or WORKER_DEFAULTS.batch_size,
        "bare_batch_size": _bare_batch_size(args),
        "codecs": codecs,
        "target_ratio": DRAIN_TARGET,
        "below_target": below,
    }


def print_drain(res: dict[str, Any]) -> None:
    print(
        f"{res['messages']:,} medium order events per codec, {res['partitions']} "
        f"partitions, batch {res['batch_size']} (bare {res['bare_batch_size']}); "
        "msgs per CPU-second, best / median"
    )
    head = ("codec", "bare msg/CPU-s", "worker msg/CPU-s", "best", "median", "paired")
    print(
        f"{head[0]:22}{head[1]:>20}{head[2]:>20}{head[3]:>8}{head[4]:>8}{head[5]:>8}"
        "  rounds (ratio worker/bare)"
    )
    for codec, r in res["codecs"].items():
        bare, worker = (
            f"{r[w]['best']:,.0f} / {r[w]['median']:,.0f}" for w in ("bare", "worker")
        )
        print(
            f"{codec:22}{bare:>20}{worker:>20}{r['ratio_best']:>8.3f}"
            f"{r['ratio_median']:>8.3f}{r['ratio_paired_median']:>8.3f}"
            f"  {len(r['bare']['rounds'])}"
        )
    for kind, codecs in res["below_target"].items():
        verdict = "met" if not codecs else "NOT met: " + ", ".join(codecs)
        print(
            f"target worker/bare >= {DRAIN_TARGET:.2f} for every codec "
            f"({kind}): {verdict}"
        )


# -- command line --------------------------------------------------------------------


def _bare_batch_size(args: argparse.Namespace) -> int:
    """The bare loop's consume() batch: its own flag, else both's, else the worker's."""
    return int(args.bare_batch_size or args.batch_size or WORKER_DEFAULTS.batch_size)


def _rates(text: str) -> tuple[float, ...]:
    try:
        rates = tuple(float(r) for r in text.split(",") if r.strip())
    except ValueError:
        rates = ()
    if not rates or min(rates) <= 0:
        raise argparse.ArgumentTypeError(f"not positive msg/s: {text!r}")
    return rates


def _codecs(text: str) -> list[str]:
    names = [c.strip() for c in text.split(",") if c.strip()]
    unknown = sorted(set(names) - set(REAL_CODECS))
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown codec(s) {unknown}; known: {REAL_CODECS}"
        )
    return names


class _HelpFormatter(
    argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter
):
    """Flag defaults shown, the module docstring kept as written."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tests.perf.bench_worker",
        description=__doc__,
        formatter_class=_HelpFormatter,
    )
    add = p.add_argument
    add(
        "--bootstrap-servers",
        default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
        help="Kafka to use (env KAFKA_BOOTSTRAP_SERVERS); unset: start a LocalKafka",
    )
    add("--partitions", type=int, default=4, help="partitions of each fresh topic")
    add(
        "--batch-size",
        type=int,
        default=None,
        help="consume() batch of both contenders; unset: the worker's default, "
        f"{WORKER_DEFAULTS.batch_size}, and no --batch-size flag for it",
    )
    add(
        "--bare-batch-size",
        type=int,
        default=None,
        help="drain: the bare loop's consume() batch alone (e.g. 1000 against the "
        "worker's default); unset: as --batch-size",
    )
    add(
        "--sample-interval",
        type=float,
        default=0.5,
        help="drain: seconds from the first sample to the second (later ones are "
        "timed to the predicted end); fixed rate: poll interval once the load ended; "
        "each worker sample is a /metrics scrape costing it ~4 ms of CPU",
    )
    add("--json", action="store_true", help="print one JSON object instead of a table")
    drain_g = p.add_argument_group("drain mode (the default)")
    drain_g.add_argument(
        "--codecs",
        type=_codecs,
        default=",".join(DEFAULT_CODECS),
        help=f"comma-separated codecs, any of {', '.join(REAL_CODECS)}",
    )
    drain_g.add_argument(
        "--messages",
        type=int,
        default=300_000,
        help="events per codec topic (DESIGN.md's drains are 300k)",
    )
    drain_g.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="drains per contender and codec, order flipped each round",
    )
    drain_g.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds one drain may take at most",
    )
    rate_g = p.add_argument_group("fixed-rate mode")
    rate_g.add_argument(
        "--fixed-rate",
        action="store_true",
        help="both consumers on the same paced traffic: CPU %% and e2e latency",
    )
    rate_g.add_argument(
        "--codec",
        default="msgspec-msgpack",
        choices=REAL_CODECS,
        metavar="CODEC",
        help=f"the traffic's codec, any of {', '.join(REAL_CODECS)}",
    )
    rate_g.add_argument(
        "--rates",
        "--rate",
        type=_rates,
        default=(2_000.0, 20_000.0, 40_000.0),
        help="comma-separated msg/s the load generator sends, one run each",
    )
    rate_g.add_argument(
        "--latency-sample-every",
        type=int,
        default=LATENCY_SAMPLE_EVERY,
        help="both contenders read the e2e latency stamp of every k-th message "
        "(the worker's --latency-sample-every; 1: every message)",
    )
    rate_g.add_argument(
        "--twin-bare",
        action="store_true",
        help="run a second, identical bare loop on the same traffic: how far two "
        "identical loops differ in one run (the noise floor), and the worker "
        "against the mean of both",
    )
    rate_g.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    rate_g.add_argument(
        "--drain-timeout",
        type=float,
        default=60.0,
        help="seconds after the load for both to catch up before the window closes",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.fixed_rate:
        return run_bench(args, partial(fixed_rate, args), print_fixed_rate)
    return run_bench(args, partial(drain, args), print_drain)


if __name__ == "__main__":
    raise SystemExit(main())
