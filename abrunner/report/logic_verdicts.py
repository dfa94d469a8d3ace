"""Your logic in the A/B report: what a switch breaks in it, beside what it costs.

With `--logic MODULE:CALLABLE` (on a user's `--schema` or a built-in profile), the
runner judges the handler per codec before any case runs, in process and without
Kafka, exactly as
`codec-schema check SCHEMA --logic MODULE:CALLABLE` does on the same synthetic
messages, or with `--replay FILE` on the recording's first messages as `check
--recording FILE` takes them (`schematool.logic_check`, `schematool.recorded`):
works, differs (where) or fails (why). The
verdicts travel in the plan (report.json) and the report sets them beside each
codec's CPU per message and its split: the decode, the handler (your code's time
on that codec's objects, `worker_handle_seconds`) and the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, cast

from abrunner.results import Report
from loadgen.payloads import make_payloads as builtin_payloads
from schemas.registry import SchemaName, user_schema
from schemas.user.loader import UserSchema
from schemas.user.synthetic import make_payloads
from schematool.logic_check import REFERENCE, check_logic
from schematool.recorded import recorded_payloads
from service.logic.user_handler import is_user_logic, load_handler

MESSAGES: Final = 50
"""Synthetic messages judged, as `codec-schema check`'s default `--count`."""


def judge(
    logic: str | None,
    schema: str | None,
    codecs: tuple[str, ...],
    replay: Path | None = None,
) -> tuple[tuple[str, str], ...]:
    """(codec, verdict line) for each codec, `codec-schema check --logic`'s lines;
    () without a team's handler. `schema`: a user's spec or a built-in key (its
    messages are the load generator's, its reference the built-in pydantic model).

    Raises:
        ConfigError: the handler or the schema cannot be loaded (checked already
            while the settings were validated).
    """
    if logic is None or not is_user_logic(logic) or schema is None:
        return ()
    user = user_schema(schema)
    judged: UserSchema | SchemaName
    if user is None:  # a built-in schema: judged on the load generator's messages
        judged = cast(SchemaName, schema)
        payloads = builtin_payloads(judged, MESSAGES, seed=0)
    elif replay is not None:
        judged = user
        payloads, _source = recorded_payloads(replay, schema, MESSAGES)
    else:
        judged = user
        payloads = make_payloads(user.shape, MESSAGES, seed=0)
    report = check_logic(judged, logic, load_handler(logic), payloads, codecs=codecs)
    return tuple(
        (codec, v.line()) for codec, v in report.verdicts.items() if codec in codecs
    )


def section(report: Report) -> str | None:
    """The processing guarantee when it is exactly-once, and the `## Your logic`
    section (verdict and CPU split per codec); None without either."""
    plan = report.plan
    guarantee = (
        "Processing guarantee: **exactly-once**: every worker committed each batch's "
        "dead letters, results and consumed offsets in one Kafka transaction; its "
        "CPU per message and p99 above include that cost."
    )
    if not plan.logic_verdicts:
        return guarantee if plan.processing_guarantee == "exactly-once" else None
    rows = next(iter(report.summary.values()), {})
    judged = f"{MESSAGES} synthetic messages"
    recording = ""
    if plan.replay is not None:
        judged = f"the first {MESSAGES} messages of the replayed recording"
        recording = " --recording FILE"
    lines = [
        *((guarantee, "") if plan.processing_guarantee == "exactly-once" else ()),
        "## Your logic on each codec",
        "",
        f"`{plan.logic}` ran in every worker. Verdict: its result on each codec's "
        f"objects against its result on the pydantic model ({REFERENCE}), "
        f"{judged}, no Kafka "
        f"(the same as `codec-schema check SCHEMA --logic ...{recording}`). "
        "CPU split per message: the decode (median of the worker's timed decodes), "
        "your handler's CPU (an async handler: its own steps, "
        "`worker_handle_cpu_seconds`; a sync one: its time, "
        "`worker_handle_seconds`) and the rest (CPU us/msg less both: librdkafka, "
        "the loop, metrics; blank when they pass it), each wall time, so "
        "preemption on a busy machine inflates them. Waited: an async handler's "
        "wall time less its CPU, the time it spent awaiting (no CPU).",
        "",
        "| codec | CPU us/msg | decode us | your logic CPU us | rest us "
        "| your logic waited us | your logic |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for codec, verdict in plan.logic_verdicts:
        row = rows.get(codec)
        cpu = row.median("cpu_us_per_msg") if row else None
        decode = row.median("decode_p50_us") if row else None
        wall = row.median("handle_us") if row else None
        own = row.median("handle_cpu_us") if row else None
        handle = wall if own is None else own
        waited = None if own is None or wall is None else max(0.0, wall - own)
        rest = None
        if cpu is not None and decode is not None and handle is not None:
            rest = cpu - decode - handle if cpu >= decode + handle else None
        cells = [_us(cpu), _us(decode), _us(handle), _us(rest), _us(waited)]
        lines.append(f"| {codec} | {' | '.join(cells)} | {_cell(verdict)} |")
    return "\n".join(lines)


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
