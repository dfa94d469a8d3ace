"""`python -m codecbench`: the in-process codec micro-benchmark (`codec-bench`)."""

from codecbench.cli import main

if __name__ == "__main__":  # importing the module (a test, a tool) must not run it
    raise SystemExit(main())
