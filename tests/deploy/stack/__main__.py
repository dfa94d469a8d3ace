"""`python -m tests.deploy.stack` (`make stack-test`): the compose stack's load test."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from tests.deploy.stack.breaks import BREAKS
from tests.deploy.stack.run import MIN_DURATION_S, Options, StackRun


def main(argv: Sequence[str] | None = None) -> int:
    """Run the stack test; the exit status of `StackRun.run`."""
    d = Options()
    parser = argparse.ArgumentParser(
        prog="python -m tests.deploy.stack",
        description="Bring docker-compose.yml up (Docker or podman), load it, check it "
        "from outside and tear it down. Exit 0: every check passed; 1: a check failed; "
        "2: the stack could not be built, started or read; 4: --break went unnoticed.",
    )
    parser.add_argument(
        "--duration",
        type=int,
        default=d.duration,
        help=f"seconds the load generators run (default {d.duration}, "
        f"at least {MIN_DURATION_S})",
    )
    parser.add_argument(
        "--rate",
        type=int,
        default=d.rate,
        help=f"msg/s per side (default {d.rate})",
    )
    parser.add_argument("--codec-a", default=d.codec_a, help=f"default {d.codec_a}")
    parser.add_argument("--codec-b", default=d.codec_b, help=f"default {d.codec_b}")
    parser.add_argument(
        "--project",
        default=d.project,
        help=f"compose project name (default {d.project})",
    )
    parser.add_argument(
        "--break",
        dest="breaks",
        choices=sorted(BREAKS),
        help="break one thing on purpose; the run must fail on its check",
    )
    parser.add_argument(
        "--keep", action="store_true", help="leave the stack running (no `down`)"
    )
    parser.add_argument("--out", type=Path, help="write report.json into this folder")
    args = parser.parse_args(argv)
    options = Options(**vars(args))
    return StackRun(options, print=lambda line: print(line, flush=True)).run()


if __name__ == "__main__":
    sys.exit(main())
