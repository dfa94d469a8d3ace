"""`codec-bench`: each codec's in-process cost per message, beside the Kafka path.

    from codecbench import run
    report = run(["msgspec-msgpack", "json+pydantic"], ["medium"], repeats=5)
    report.case("msgspec-msgpack", "medium").decode_read.us.median  # CPU us/msg

The A/B runner puts these figures beside its own per-message decode time.
"""

from codecbench.bench import measure_case, run
from codecbench.results import (
    Alloc,
    BenchReport,
    CaseResult,
    Environment,
    GcRate,
    Method,
    OpResult,
    Spread,
)

__all__ = [
    "Alloc",
    "BenchReport",
    "CaseResult",
    "Environment",
    "GcRate",
    "Method",
    "OpResult",
    "Spread",
    "measure_case",
    "run",
]
