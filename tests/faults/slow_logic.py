"""`python -m tests.faults.slow_logic ARGS`: the worker, with a logic slow by design.

The built-in `medium` logic, except that an order of customer `SLOW_CUSTOMER` sleeps
for an hour first (a handler over any message budget, for the fault suite's B2), and
one of customer `STUCK_CUSTOMER` runs `sum(range(10**13))`, a call into C that holds
the GIL for hours and never checks for signals (B3: only the backstop ends it, whose
margin is cut to `HARD_MARGIN_S` so that B3 takes seconds, not minutes). It is the
worker's own command line otherwise (`service.console`), so every flag works;
nothing in `service/` knows of it.
"""

from __future__ import annotations

import time
from typing import Any, Final

from service.lifecycle import signals

SLOW_CUSTOMER: Final = 424_242
STUCK_CUSTOMER: Final = 434_343
SLOW_S: Final = 3600.0
HARD_MARGIN_S: Final = 5.0


def main() -> int:
    """Hold the signals, make `medium`'s logic slow on `SLOW_CUSTOMER`, run the worker."""
    signals.hold()
    from service.cli import main as run
    from service.logic import builtin
    from service.loop import message_budget

    message_budget.HARD_MARGIN_S = HARD_MARGIN_S  # type: ignore[misc]
    medium = builtin._LOGIC["medium"]

    def slow(obj: Any, totals: dict[int, float]) -> None:
        customer = obj.customer.customer_id
        if customer == SLOW_CUSTOMER:
            time.sleep(SLOW_S)
        elif customer == STUCK_CUSTOMER:
            sum(range(10**13))
        medium(obj, totals)

    builtin._LOGIC["medium"] = slow
    return run()


if __name__ == "__main__":
    raise SystemExit(main())
