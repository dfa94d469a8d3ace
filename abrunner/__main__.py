"""`python -m abrunner`: the codec A/B run (also `codec-ab`)."""

from abrunner.runner import main

raise SystemExit(main())
