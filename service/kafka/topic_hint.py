"""The line a tool prints for missing topics: the fix, runnable as printed.

The `codec-kafka topics create ...` it names repeats the run's own connection
arguments (`--config FILE`, `--bootstrap-servers`, connection flags), so it works
against the cluster the user is on, a secured one included.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence


def missing_topics_text(
    bootstrap: str,
    missing: list[str],
    roles: Mapping[str, str],
    partitions: int,
    connect: Sequence[str],
) -> str:
    """One line: the missing topics, what each is for, and the two ways to fix it
    (the command with the tool's own connection arguments, quoted for a shell)."""
    named = ", ".join(f"{name!r} ({roles[name]})" for name in missing)
    them = "it" if len(missing) == 1 else "them"
    command = shlex.join(
        [
            *("codec-kafka", "topics", "create", *missing),
            *("--partitions", str(partitions), *connect),
        ]
    )
    return (
        f"config error: no topic {named} on {bootstrap}: create {them} with "
        f"`{command}`, or start with --create-topics"
    )
