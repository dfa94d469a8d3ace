"""`python -m schematool`: the user-schema tool (`codec-schema`)."""

from schematool.cli import main

if __name__ == "__main__":  # importing the module (a test, a tool) must not run it
    raise SystemExit(main())
