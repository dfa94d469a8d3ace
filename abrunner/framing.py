"""`codec-ab --framing confluent`: each codec framed, beside its unframed twin.

Every listed codec runs twice in the same run, one case after the other: as
listed (unframed), and framed (`<codec>+confluent`: the load generator registers
the schema and frames the values, the worker reads the frame through the
registry). The report sets each framed case beside its twin, and beside
confluent-kafka's own deserializer on the same framed messages
(`abrunner.lab.peer_decode`, `abrunner.report.framing`). The cases run
sequentially: a paired run's single load generator writes one wire form for all.

The registry is the one given (`--registry-url`, `REGISTRY_URL`, `[registry] url`),
else the one `codec-kafka registry start` recorded, else a local one started for
the run and stopped after it. The framed cases' workers and load generators get
`--framing confluent --registry-url URL`; credentials reach them through the
environment they inherit (`REGISTRY_USERNAME`, `REGISTRY_PASSWORD`,
`REGISTRY_CA_FILE`), never argv.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import msgspec
from rich.console import Console

from abrunner.config import AbSettings
from abrunner.plan import FRAMED, Plan


def with_twins(plan: Plan, registry_url: str) -> Plan:
    """`plan` with each codec followed by its framed case, run sequentially; a
    replay's framed cases alone (the recording is framed traffic: an unframed twin
    would need it unframed)."""
    baseline = plan.baseline
    if plan.replay is not None:
        codecs = tuple(codec + FRAMED for codec in plan.codecs)
        baseline += FRAMED
    else:
        codecs = tuple(c for codec in plan.codecs for c in (codec, codec + FRAMED))
    return msgspec.structs.replace(
        plan,
        codecs=codecs,
        baseline=baseline,
        registry_url=registry_url,
        mode="sequential",
    )


@contextlib.contextmanager
def framed_plan(settings: AbSettings, plan: Plan, console: Console) -> Iterator[Plan]:
    """`plan` with the framed twins (as it is with `framing = none`); a local
    registry runs while it is in use if none is given."""
    if settings.framing == "none":
        yield plan
        return
    with contextlib.ExitStack() as stack:
        url = settings.registry.url
        if url is None:
            from localkafka.registry import LocalRegistry

            console.print("starting a local schema registry (Apicurio Registry)")
            url = stack.enter_context(LocalRegistry()).url
        else:
            console.print(f"schema registry: {url}")
        yield with_twins(plan, url)
