"""`python -m service`: the codec worker."""

from service.console import main

raise SystemExit(main())
