"""`python -m tests.fuzz` (`make fuzz`): a coverage-guided atheris run per codec.

Usage:

    python -m tests.fuzz [--codec KEY ...] [--seconds N] [--corpus DIR]
                         [--crashers DIR] [--logs DIR] [--timeout S]
                         [--rss-limit-mb MB] [--max-len BYTES]
    python -m tests.fuzz --replay FILE ... [--codec KEY ...]

Run from the repository root. Each codec (default: all) is fuzzed for `--seconds` in
its own process (`tests.fuzz.harness`: atheris takes the process over), one after
the other: the machine is shared. Its corpus is `CORPUS/KEY/`, seeded on every run
with valid payloads of every profile in its wire format(s) and the small hostile
structures of `tests.fuzz.inputs`; what libFuzzer finds interesting is kept there
for the next run. A failing input is written to `CRASHERS/KEY/` (`crash-*`: an
exception other than DecodeError, a contract violation or a segfault; `timeout-*`:
an input that ran past `--timeout` seconds; `oom-*`: past `--rss-limit-mb`). The
child's output (libFuzzer's progress, the traceback of a crash) is `LOGS/KEY.log`,
and the wire's dictionary it mutated with `LOGS/KEY.dict`.

At the end, a table per codec: executions, seconds, corpus size, crashes. The exit
status is 1 if any codec failed (a crash, a hang, a child that died), else 0.

`--replay` runs files (a crasher, a corpus) through the same contract check in this
process, without atheris: a plain traceback to debug with.

Findings already reported (`tests.fuzz.contract.KNOWN_FINDINGS`) are tolerated so
the run gets past them; `CODEC_FUZZ_STRICT=1` (read by the children too) fails on
them as well. atheris instruments Python only: see `tests.fuzz.harness` for what
guides it through the C and Rust decoders.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from codec import CODEC_NAMES, CodecName
from tests.fuzz.contract import check
from tests.fuzz.inputs import (
    HOSTILE_FIXED,
    PROFILES,
    hostile,
    samples,
    targets,
    tokens,
)
from tests.fuzz.wire_hostile import wire_hostile

ROOT: Final = Path(__file__).resolve().parents[2]
ARTIFACTS: Final = ("crash-", "timeout-", "oom-", "leak-")
"""libFuzzer's names for a failing input (`slow-unit-*` is a report, not a failure)."""
COLUMNS: Final = (
    "codec",
    "status",
    "exit",
    "execs",
    "exec/s",
    "seconds",
    "corpus",
    "new",
    "crashes",
)
"""The table's columns: `new` counts corpus entries this run added."""
STARTUP_SECONDS: Final = 120
"""Slack for the child's imports, instrumentation and corpus load before it is
declared hung (libFuzzer's `-max_total_time` counts from its own start)."""


@dataclass(frozen=True, slots=True)
class Result:
    """One codec's run."""

    codec: str
    status: str
    exit_code: int | None
    execs: int | None
    seconds: float
    corpus: int
    new: int
    crashers: list[Path]
    log: Path

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m tests.fuzz",
        description="Coverage-guided fuzzing (atheris) of each codec's decode path.",
    )
    p.add_argument(
        "--codec",
        action="extend",
        nargs="+",
        choices=CODEC_NAMES,
        metavar="KEY",
        help=f"codecs to fuzz (default: all: {', '.join(CODEC_NAMES)})",
    )
    p.add_argument(
        "--seconds", type=int, default=60, metavar="N", help="per codec (default 60)"
    )
    p.add_argument(
        "--corpus",
        type=Path,
        default=Path(".fuzz/corpus"),
        metavar="DIR",
        help="one subdirectory per codec, kept across runs (default .fuzz/corpus)",
    )
    p.add_argument(
        "--crashers",
        type=Path,
        default=Path(".fuzz/crashers"),
        metavar="DIR",
        help="failing inputs, one subdirectory per codec (default .fuzz/crashers)",
    )
    p.add_argument(
        "--logs",
        type=Path,
        default=Path(".fuzz/logs"),
        metavar="DIR",
        help="each codec's libFuzzer output and dictionary (default .fuzz/logs)",
    )
    p.add_argument(
        "--timeout",
        type=int,
        default=10,
        metavar="S",
        help="seconds one input may take before it is a hang (default 10)",
    )
    p.add_argument(
        "--rss-limit-mb",
        type=int,
        default=1024,
        metavar="MB",
        help="memory past which the child fails (default 1024)",
    )
    p.add_argument(
        "--max-len",
        type=int,
        default=16_384,
        metavar="BYTES",
        help="largest input libFuzzer makes (default 16384)",
    )
    p.add_argument(
        "--replay",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="check these inputs in this process instead (a crasher, a corpus file)",
    )
    args = p.parse_args(argv)
    if args.seconds < 1 or args.timeout < 1:
        p.error("--seconds and --timeout must be at least 1")
    return args


def seed(corpus: Path, key: CodecName) -> None:
    """Write the seed inputs into `corpus` (fixed names: rewriting is idempotent)."""
    corpus.mkdir(parents=True, exist_ok=True)
    inputs = {
        f"seed-{profile}-{i}": s.data
        for profile in PROFILES
        for i, s in enumerate(samples(key, profile, 4))
    }
    inputs |= {f"seed-{name}": v for name, v in HOSTILE_FIXED.items() if v}
    inputs |= {f"seed-{name}": v for name, v in wire_hostile().items()}
    inputs |= {f"seed-{name}@64": v for name, v in hostile(64).items()}
    for name, data in inputs.items():
        (corpus / name).write_bytes(data)


def _dict_entry(token: bytes) -> str:
    return '"' + "".join(f"\\x{b:02x}" for b in token) + '"'


def write_dictionary(path: Path, key: CodecName) -> None:
    """libFuzzer's `-dict` file: the wire's tokens and field names, hex-escaped."""
    path.write_text("".join(_dict_entry(t) + "\n" for t in tokens(key)))


def _stat(log: str, name: str) -> int | None:
    m = re.search(rf"^stat::{name}:\s*(\d+)", log, re.MULTILINE)
    return int(m[1]) if m else None


def _execs(log: str) -> int | None:
    """Executions: libFuzzer's final stats, else its last `#N` progress line."""
    found = _stat(log, "number_of_executed_units")
    if found is None:
        lines = re.findall(r"^#(\d+)\s", log, re.MULTILINE)
        found = int(lines[-1]) if lines else None
    return found


def _status(exit_code: int | None, new_crashers: list[Path]) -> str:
    if exit_code is None:
        return "HUNG"  # the child outlived --seconds + --timeout + its start-up
    for prefix in ARTIFACTS:
        if any(p.name.startswith(prefix) for p in new_crashers):
            return prefix.rstrip("-").upper()
    return "ok" if exit_code == 0 else f"EXIT {exit_code}"


def fuzz(key: CodecName, args: argparse.Namespace) -> Result:
    """Fuzz one codec in a child process; collect what it did from its output."""
    corpus = (args.corpus / key).resolve()
    crashers = (args.crashers / key).resolve()
    logs = args.logs.resolve()
    for directory in (crashers, logs):
        directory.mkdir(parents=True, exist_ok=True)
    seed(corpus, key)
    dictionary, log = logs / f"{key}.dict", logs / f"{key}.log"
    write_dictionary(dictionary, key)
    before_corpus = {p.name for p in corpus.iterdir()}
    before = set(crashers.iterdir())
    cmd = [
        sys.executable,
        "-m",
        "tests.fuzz.harness",
        key,
        f"-max_total_time={args.seconds}",
        f"-timeout={args.timeout}",
        f"-rss_limit_mb={args.rss_limit_mb}",
        f"-max_len={args.max_len}",
        f"-artifact_prefix={crashers}/",
        f"-dict={dictionary}",
        "-print_final_stats=1",
        str(corpus),
    ]
    print(f"fuzzing {key} for {args.seconds} s (log: {log})", file=sys.stderr)
    started = time.monotonic()
    exit_code: int | None
    with log.open("wb") as out:
        try:
            exit_code = subprocess.run(
                cmd,
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=args.seconds + args.timeout + STARTUP_SECONDS,
                check=False,
            ).returncode
        except subprocess.TimeoutExpired:
            exit_code = None  # run() has killed it
    seconds = time.monotonic() - started
    text = log.read_text(errors="replace")
    after = {p.name for p in corpus.iterdir()}
    found = sorted(
        p for p in set(crashers.iterdir()) - before if p.name.startswith(ARTIFACTS)
    )
    return Result(
        codec=key,
        status=_status(exit_code, found),
        exit_code=exit_code,
        execs=_execs(text),
        seconds=seconds,
        corpus=len(after),
        new=len(after - before_corpus),
        crashers=found,
        log=log,
    )


def _failure_excerpt(log: Path, lines: int = 30) -> str:
    """The part of a failed run's log that says why: from atheris' report on."""
    text = log.read_text(errors="replace")
    for marker in ("=== Uncaught Python exception", "=== Timeout", "==ERROR", "ALARM"):
        if marker in text:
            text = text[text.index(marker) :]
            break
    return "\n".join(text.splitlines()[:lines])


def table(results: list[Result]) -> str:
    """One row per codec; exec/s over the whole child's life, start-up included."""
    rows = [list(COLUMNS)]
    for r in results:
        execs = "?" if r.execs is None else str(r.execs)
        rate = "?" if r.execs is None else f"{r.execs / max(r.seconds, 1e-9):.0f}"
        exit_code = "-" if r.exit_code is None else str(r.exit_code)
        row = [r.codec, r.status, exit_code, execs, rate, f"{r.seconds:.0f}"]
        rows.append([*row, str(r.corpus), str(r.new), str(len(r.crashers))])
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return "\n".join(
        "  ".join(
            cell.ljust(w) if i < 2 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    )


def replay(files: list[Path], keys: list[CodecName]) -> int:
    """Check each file with each codec in this process; 1 if any broke the contract."""
    failed = 0
    for key in keys:
        decoders = targets(key)
        for path in files:
            data = path.read_bytes()
            for label, codec, header in decoders:
                try:
                    check(codec, data, header)
                except Exception:
                    failed += 1
                    print(f"FAIL {key} {label} {header!r} {path}", file=sys.stderr)
                    traceback.print_exc()
    print(f"replayed {len(files)} file(s) on {len(keys)} codec(s): {failed} failure(s)")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    keys: list[CodecName] = args.codec or list(CODEC_NAMES)
    if args.replay:
        return replay(args.replay, keys)
    if importlib.util.find_spec("atheris") is None:
        print(
            "atheris is not installed: it is in the project's `fuzz` dependency group",
            file=sys.stderr,
        )
        return 2
    results = []
    for key in keys:
        result = fuzz(key, args)
        results.append(result)
        if not result.ok:
            print(f"\n{key}: {result.status}, see {result.log}", file=sys.stderr)
            print(_failure_excerpt(result.log), file=sys.stderr)
            for path in result.crashers:
                print(f"  input: {path}", file=sys.stderr)
    print(table(results))
    failed = [r.codec for r in results if not r.ok]
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        print(
            "reproduce: python -m tests.fuzz --replay FILE --codec KEY", file=sys.stderr
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
