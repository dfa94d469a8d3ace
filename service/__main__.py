"""`python -m service`: the codec worker."""

from service.cli import main

raise SystemExit(main())
