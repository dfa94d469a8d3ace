"""`python -m loadgen`: the load generator (`codec-loadgen`)."""

from loadgen.cli import main

if __name__ == "__main__":  # a guard: producer processes are spawned, re-importing main
    raise SystemExit(main())
