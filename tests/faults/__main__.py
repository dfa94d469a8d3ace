"""`python -m tests.faults` (`make faults`): the full fault suite and its report."""

from tests.faults.runner import main

raise SystemExit(main())
