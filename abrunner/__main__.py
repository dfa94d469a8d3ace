"""`python -m abrunner`: the codec A/B run (also `codec-ab`)."""

from abrunner.cli import main

raise SystemExit(main())
