"""`python -m loadgen.fanout`: one load generator writing several topics."""

from loadgen.fanout.writer import main

if __name__ == "__main__":
    raise SystemExit(main())
