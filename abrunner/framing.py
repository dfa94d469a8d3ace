"""`codec-ab --framing confluent`: every case framed, against a registry.

The registry is the one given (`--registry-url`, `REGISTRY_URL`, `[registry] url`),
else the one `codec-kafka registry start` recorded, else a local one started for
the run and stopped after it. The workers and load generators get `--framing
confluent --registry-url URL`; credentials reach them through the environment they
inherit (`REGISTRY_USERNAME`, `REGISTRY_PASSWORD`, `REGISTRY_CA_FILE`), never argv.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import msgspec
from rich.console import Console

from abrunner.config import AbSettings
from abrunner.plan import Plan


@contextlib.contextmanager
def framed_plan(settings: AbSettings, plan: Plan, console: Console) -> Iterator[Plan]:
    """`plan` with every worker and load generator framing its values (as it is
    with `framing = none`); a local registry runs while it is in use if none is
    given."""
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
        framed = ("--framing", "confluent", "--registry-url", url)
        yield msgspec.structs.replace(
            plan,
            worker_args=(*plan.worker_args, *framed),
            loadgen_args=(*plan.loadgen_args, *framed),
        )
