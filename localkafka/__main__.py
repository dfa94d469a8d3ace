"""`python -m localkafka`: the local broker's command line (also `codec-kafka`)."""

from localkafka.cli import main

raise SystemExit(main())
