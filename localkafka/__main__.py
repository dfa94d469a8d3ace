"""`python -m localkafka`: the local broker's command line (also `codec-kafka`)."""

from localkafka.broker import main

raise SystemExit(main())
