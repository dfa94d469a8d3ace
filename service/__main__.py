"""`python -m service`: the codec worker."""

from service.entry import main

raise SystemExit(main())
