"""Payload pools and `--max` backlogs bounded by bytes, not by a count.

A count that suits 1 KB orders does not suit 1.5 MB route plans: the load
generator's and the in-process bench's pool of 1000 payloads is 1.5 GB of JSON
at that size, many times more as Python objects (a sweep grew past 16 GB), and a
200,000-message backlog is 300 GB on the broker's disk. So each is bounded by the
bytes it holds: the pool by `POOL_BYTES` (1000 payloads up to 64 KB each, fewer
above), the backlog by `BACKLOG_BYTES` (200,000 messages up to ~10 KB, fewer above),
and the broker's disk is checked before a `--max` run starts.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Final

from abrunner.plan import POOL_SIZE, Plan, Profile
from loadgen.payloads import DEFAULT_LARGE_BYTES
from service.kafka.broker_record import DEFAULT_DATA_DIR

POOL_BYTES: Final = 64 << 20
"""JSON bytes of one pool at most: 1000 payloads of the default 64 KB `large`."""
MIN_POOL: Final = 10
BACKLOG_BYTES: Final = 2 << 30
"""Payload bytes of one `--max` backlog at most."""
MIN_BACKLOG: Final = 1000
DISK_FACTOR: Final = 2.5
"""A deleted topic's files stay on disk for a minute (Kafka's `file.delete.delay.ms`),
so two backlogs may be there at once, plus the log's index and headers."""
_BYTES: Final = {"small": 100, "medium": 1_000}
"""About how many JSON bytes a built-in payload has (`loadgen.payloads`)."""
_UNKNOWN: Final = 1_000
"""A user's schema or a recording: sized like a medium order (no estimate)."""


def payload_bytes(profile: Profile) -> int:
    """About how many bytes one of the profile's payloads holds."""
    if profile.schema == "large":
        return profile.large_bytes or DEFAULT_LARGE_BYTES
    return _BYTES.get(profile.schema, _UNKNOWN)


def pool_size(profile: Profile) -> int:
    """Distinct payloads in the load generator's (and the bench's) pool."""
    return min(POOL_SIZE, max(MIN_POOL, POOL_BYTES // payload_bytes(profile)))


def backlog(plan: Plan, profile: Profile) -> int:
    """Messages of a `--max` backlog: `--max-messages`, at most `BACKLOG_BYTES`."""
    fits = max(MIN_BACKLOG, BACKLOG_BYTES // payload_bytes(profile))
    return min(plan.max_messages, fits)


def disk_needed(plan: Plan) -> int:
    """Bytes the broker's disk needs free for the run's largest backlog."""
    if not plan.max_mode:
        return 0
    largest = max(backlog(plan, p) * payload_bytes(p) for p in plan.profiles)
    return int(DISK_FACTOR * largest)


def disk_problem(plan: Plan, directory: Path) -> str | None:
    """Why the broker's disk at `directory` cannot hold the backlogs; None if it can."""
    needed = disk_needed(plan)
    if not needed:
        return None
    probe = directory
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free >= needed:
        return None
    return (
        f"--max: the largest backlog needs ~{needed / 1e9:,.1f} GB free on the "
        f"broker's disk ({directory}), {free / 1e9:,.1f} GB are: lower "
        "--max-messages or --large-bytes, or free some space"
    )


def broker_disk_problem(plan: Plan, bootstrap: str | None, given: bool) -> str | None:
    """Why the broker's disk cannot hold a `--max` backlog (None: it can, or it is
    another machine's, which cannot be checked from here)."""
    if bootstrap is None:  # the local Kafka started for the run: a temporary dir
        return disk_problem(plan, Path(tempfile.gettempdir()))
    if not given:  # the one `codec-kafka start` left running
        return disk_problem(plan, Path(DEFAULT_DATA_DIR))
    return None
