"""Benchmark: instructions a message the worker's loop adds to a bare decode loop.

Run: `make bench-instructions` (or `python -m tests.perf.bench_instructions --help`).
No broker, no timing: per codec one child process runs under valgrind's callgrind,
which counts the machine instructions executed. With `PYTHONHASHSEED` fixed the count
for the same code on the same input repeats to ~0.001 % whatever else the machine
does, so a change of a few instructions a message shows, where CPU-time benchmarks
on this shared 2-core machine move by 5-20 % between runs. Instructions are not
time (cache misses are not counted), so this complements `make bench` and
`make bench-overhead`; it does not replace them.

The child builds `--messages` confluent-kafka `Message` objects carrying the load
generator's medium order events in the codec's wire format (200 distinct payloads,
the four headers), in batches of 500, warms every contender up on two batches, then
runs each once between two `os.getpgrp()` calls, where callgrind cuts its profile
(`--dump-before=os_getpgrp`). The contenders:

- `bare`: `decode(m.value())` per message (the codec's library decoder);
- `checked`: the same with the checks any safe loop makes (`m.error()`, a size limit);
- `run`: the worker's per-message loop (`MessagePath.run`, noop logic);
- `handle_each`: `BatchLoop._handle_each`, which also times the decode of every 128th
  message;
- `process`: `BatchLoop.process`, the whole batch: also the metrics (e2e latency from
  every 64th message) and the offset store (on a stub consumer).

These messages were built in Python, so their headers are already Python objects: a
consumed message's headers cost 1.8-4.5 us to convert on first read, which
`process` pays for every 64th message in a worker (`make bench-overhead` measures
that on consumed messages).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

from tests.perf.bench_worker import DEFAULT_CODECS, _codecs

BATCH: Final = 500
CONTENDERS: Final = ("bare", "checked", "run", "handle_each", "process")
_MARK: Final = "os_getpgrp"
"""The C function whose entry cuts the profile: what `os.getpgrp()` calls, which
nothing else here does (`os.getpid()` is called by libraries as they load)."""


# -- the child, under callgrind --------------------------------------------------------


def _contenders(codec_name: str, count: int) -> dict[str, Callable[[], None]]:
    import confluent_kafka

    from codec import get_codec
    from loadgen.payloads import make_payloads
    from service.kafka.headers import CONTENT_TYPE, RUN_ID, SENT_NS, SEQ
    from service.loop.hotpath import Tally
    from tests.perf.bench_support import in_process_loop

    codec = get_codec(codec_name, "medium")  # type: ignore[arg-type]
    values = [
        codec.encode(codec.from_builtins(p)) for p in make_payloads("medium", 200)
    ]
    msgs: list[Any] = [
        confluent_kafka.Message(
            topic="in",
            partition=i % 4,
            offset=i // 4,
            value=values[i % len(values)],
            key=b"%d" % i,
            headers=[
                (SENT_NS, b"1700000000000000000"),
                (SEQ, b"%d" % i),
                (CONTENT_TYPE, codec.content_type.encode()),
                (RUN_ID, b"bench"),
            ],
        )
        for i in range(count)
    ]
    batches = [msgs[i : i + BATCH] for i in range(0, count, BATCH)]
    stub: Any = _StubConsumer()
    loop = in_process_loop(stub, codec, codec_name, batch_size=BATCH)
    loop.assign([confluent_kafka.TopicPartition("in", p) for p in range(4)])
    decode, run, limit = codec.decode_unchecked, loop._path.run, 1 << 22

    def bare() -> None:
        for batch in batches:
            for m in batch:
                decode(m.value())

    def checked() -> None:
        for batch in batches:
            for m in batch:
                value = m.value()
                if m.error() is None and len(value) <= limit:
                    decode(value)

    def run_only() -> None:
        tally = Tally()
        for batch in batches:
            run(batch, tally)

    def handle_each() -> None:
        for batch in batches:
            loop._handle_each(batch, Tally(), [], [])

    def process() -> None:
        for batch in batches:
            loop.process(batch)

    return dict(
        zip(CONTENDERS, (bare, checked, run_only, handle_each, process), strict=True)
    )


class _StubConsumer:
    """Positions as librdkafka would report them; stores nothing."""

    def position(self, partitions: list[Any]) -> list[Any]:
        for tp in partitions:
            tp.offset = 1
        return partitions

    def store_offsets(self, offsets: list[Any]) -> None:
        pass


def child(codec: str, count: int) -> None:
    """Run each contender once between two profile cuts (see the module docstring)."""
    contenders = _contenders(codec, count)
    for fn in _contenders(codec, 2 * BATCH).values():  # the same code, warmed up
        fn()
    for fn in contenders.values():
        os.getpgrp()
        fn()
    os.getpgrp()


# -- the parent ------------------------------------------------------------------------


def _count(codec: str, count: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg.out"
        cmd = [
            "valgrind",
            "--tool=callgrind",
            f"--dump-before={_MARK}",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-m",
            "tests.perf.bench_instructions",
            "--child",
            codec,
            "--messages",
            str(count),
        ]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        subprocess.run(cmd, check=True, env=env, capture_output=True)
        parts = sorted(
            Path(tmp).glob("cg.out.*"), key=lambda p: int(p.suffix.lstrip("."))
        )
        totals = [_total(p) for p in parts]
    # Part 1 is the start-up and warm-up; parts 2.. are the contenders in order.
    measured = totals[1 : 1 + len(CONTENDERS)]
    if len(measured) != len(CONTENDERS):
        raise RuntimeError(f"{codec}: {len(totals)} profile parts, expected more")
    return {
        name: round(total / count, 1)
        for name, total in zip(CONTENDERS, measured, strict=True)
    }


def _total(part: Path) -> int:
    match = re.search(r"^totals: (\d+)", part.read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"no totals in {part}")
    return int(match.group(1))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tests.perf.bench_instructions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--codecs",
        type=_codecs,
        default=",".join(DEFAULT_CODECS),
        help="comma-separated wire codecs",
    )
    p.add_argument(
        "--messages", type=int, default=10_000, help="messages per contender"
    )
    p.add_argument("--jobs", type=int, default=2, help="codecs counted at once")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--child", metavar="CODEC", help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    if args.child:
        child(args.child, args.messages)
        return
    codecs: list[str] = args.codecs
    with ThreadPoolExecutor(args.jobs) as pool:
        counts = dict(
            zip(
                codecs,
                pool.map(lambda c: _count(c, args.messages), codecs),
                strict=True,
            )
        )
    if args.json:
        print(json.dumps({"messages": args.messages, "codecs": counts}))
        return
    print(f"instructions per message (callgrind, {args.messages:,} messages)")
    heads = (*CONTENDERS, "process - bare")
    print(f"{'codec':22}" + "".join(f"{h:>15}" for h in heads))
    for codec, c in counts.items():
        over = c["process"] - c["bare"]
        cells = [f"{c[k]:,.0f}" for k in CONTENDERS]
        cells.append(f"+{over:,.0f} ({over / c['bare']:.1%})")
        print(f"{codec:22}" + "".join(f"{x:>15}" for x in cells))


if __name__ == "__main__":
    main()
