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
the run and stopped after it. A registry given is reached before the first case
(and before a replay's recording is probed), with its URL, credentials and CA file
(`unusable_registry`): a wrong password, CA file or URL is one line naming the
setting and exit status 1, not a run whose framed cases fail one by one. The framed
cases' workers and load generators get `--framing confluent --registry-url URL`
(the URL without credentials); the rest of `[registry]`, from whichever source,
reaches them as the `REGISTRY_*` variables of the environment they inherit
(`REGISTRY_USERNAME`, `REGISTRY_PASSWORD`, `REGISTRY_CA_FILE`...), never argv.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

import msgspec
from rich.console import Console

from abrunner.config import AbSettings
from abrunner.plan import FRAMED, Plan
from codec.registry.access_check import RegistryAccessError
from service.settings.registry import RegistryConnection
from service.settings.registry_start import reach


def unusable_registry(settings: AbSettings) -> int | None:
    """Exit status 1 (its line printed) if the registry given cannot be used."""
    if settings.framing == "none" or settings.registry.url is None:
        return None  # none framed, or a registry started for the run
    try:
        reach(settings.registry, RegistryAccessError)
    except RegistryAccessError as exc:
        print(f"codec-ab: error: {exc}", file=sys.stderr)
        return 1
    return None


@contextlib.contextmanager
def registry_environment(registry: RegistryConnection) -> Iterator[None]:
    """`registry` as `REGISTRY_*` variables of this process while the run lasts,
    for the processes it starts (see the module); restored after."""
    given = registry.environment()
    given.pop("REGISTRY_URL", None)  # each case's argv names the run's registry
    before = {name: os.environ.get(name) for name in given}
    os.environ.update(given)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


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
        stack.enter_context(registry_environment(settings.registry))
        url = settings.registry.url
        if url is None:
            from localkafka.registry import LocalRegistry

            console.print("starting a local schema registry (Apicurio Registry)")
            url = stack.enter_context(LocalRegistry()).url
        else:
            console.print(f"schema registry: {url}")
        yield with_twins(plan, url)
