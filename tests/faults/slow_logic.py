"""`python -m tests.faults.slow_logic ARGS`: the worker, with a logic slow by design.

The built-in `medium` logic, except that an order of customer `SLOW_CUSTOMER` sleeps
for an hour first: a handler over any message budget, for the fault suite's B2.
It is the worker's own command line otherwise (`service.console`), so every flag
works; nothing in `service/` knows of it.
"""

from __future__ import annotations

import time
from typing import Any, Final

from service.lifecycle import signals

SLOW_CUSTOMER: Final = 424_242
SLOW_S: Final = 3600.0


def main() -> int:
    """Hold the signals, make `medium`'s logic slow on `SLOW_CUSTOMER`, run the worker."""
    signals.hold()
    from service.cli import main as run
    from service.logic import builtin

    medium = builtin._LOGIC["medium"]

    def slow(obj: Any, totals: dict[int, float]) -> None:
        if obj.customer.customer_id == SLOW_CUSTOMER:
            time.sleep(SLOW_S)
        medium(obj, totals)

    builtin._LOGIC["medium"] = slow
    return run()


if __name__ == "__main__":
    raise SystemExit(main())
