"""`--break`: one fault put into a real stack run, and the check that must catch it.

| break | what is done | the check that must fail |
| --- | --- | --- |
| `lose` | side A's group is committed 50 records past each partition's start before worker-a first starts (a worker that committed what it never handled) | `loss A` |
| `target` | loadgen-b is paused (SIGSTOP by the engine's freezer) across the targets check, then resumed | `targets` |
| `query` | the dashboards are checked with one panel's `worker_messages_total` renamed, as a metric renamed in the worker but not in the dashboard would be | `panels` |

The stack itself is the real one in each case; `make stack-test-breaks` runs the three.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from tests.deploy.stack import readback
from tests.deploy.support import panels

if TYPE_CHECKING:
    from tests.deploy.stack.run import StackRun

SKIPPED_PER_PARTITION: Final = 50
RENAMED: Final = ("worker_messages_total", "worker_messages_handled_total")


class Break:
    """A fault and the check that must catch it (hooks do nothing by default)."""

    fails: str = ""
    late_services: tuple[str, ...] = ()

    def during_load(self, run: StackRun) -> None:
        """Called 15 s into the load, after the poison is injected."""

    def before_targets(self, run: StackRun) -> None:
        """Called just before the targets check."""

    def after_targets(self, run: StackRun) -> None:
        """Called just after the targets check."""


class LoseBreak(Break):
    """worker-a starts late, on a group committed past records it never handled."""

    fails = "loss A"
    late_services = ("worker-a",)

    def during_load(self, run: StackRun) -> None:
        side = run.sides[0]
        skipped = readback.skip_ahead(run.bootstrap, side, SKIPPED_PER_PARTITION)
        run.print(f"   break lose: {side.group} committed past {skipped} records")
        engine = run.engine
        assert engine is not None
        engine.compose("up", "-d", "--no-build", services=[side.worker], timeout=300)
        run.print(f"   break lose: {side.worker} started after the commit")


class TargetBreak(Break):
    """loadgen-b paused across the targets check."""

    fails = "targets"

    def before_targets(self, run: StackRun) -> None:
        engine = run.engine
        assert engine is not None
        engine.cli("pause", engine.container("loadgen-b"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            health = {t["instance"]: t["health"] for t in run.prometheus.targets()}
            if health.get("loadgen-b:9200") == "down":
                run.print("   break target: loadgen-b paused; Prometheus sees it down")
                return
            time.sleep(1)
        run.print("   break target: loadgen-b paused; Prometheus still sees it up")

    def after_targets(self, run: StackRun) -> None:
        engine = run.engine
        assert engine is not None
        engine.cli("unpause", engine.container("loadgen-b"))
        run.print("   break target: loadgen-b resumed")


class QueryBreak(Break):
    """The dashboards checked with one metric renamed in one panel."""

    fails = "panels"


BREAKS: Final[Mapping[str, Break]] = {
    "lose": LoseBreak(),
    "target": TargetBreak(),
    "query": QueryBreak(),
}


def renamed_metric_dashboards(
    boards: list[tuple[Path, Mapping[str, Any]]],
) -> list[tuple[Path, Mapping[str, Any]]]:
    """The dashboards with the first panel that reads `worker_messages_total` reading
    `worker_messages_handled_total` instead (a name no one exports)."""
    out: list[tuple[Path, Mapping[str, Any]]] = []
    done = False
    for path, board in boards:
        board = copy.deepcopy(dict(board))
        for panel in panels(board):
            for target in panel.get("targets", []):
                if not done and RENAMED[0] in target.get("expr", ""):
                    target["expr"] = target["expr"].replace(*RENAMED)
                    panel["title"] = f"{panel['title']} (renamed metric)"
                    done = True
        out.append((path, json.loads(json.dumps(board))))
    return out
