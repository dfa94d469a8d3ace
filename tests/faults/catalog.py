"""The fault suite's scenarios in report order, and which of them form the fast set."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from codec import REAL_CODECS
from tests.faults import (
    scenarios_async as async_handlers,
    scenarios_backlog as backlog,
    scenarios_broker as broker,
    scenarios_budget as budget,
    scenarios_consumer as consumer,
    scenarios_dlq as dlq,
    scenarios_exactly_once as eos,
    scenarios_hostile as hostile,
    scenarios_listeners as listeners,
    scenarios_memory as memory,
    scenarios_network as network,
    scenarios_poison as poison,
    scenarios_registry as registry,
    scenarios_security as security,
    scenarios_staging as staging,
    scenarios_stall as stall,
)
from tests.faults.harness import Env, Outcome

Scenario = Callable[[Env], Outcome]


@dataclass(frozen=True, slots=True)
class Entry:
    """One scenario: its id, its function and whether the fast set runs it."""

    id: str
    run: Scenario
    fast: bool

    @property
    def title(self) -> str:
        """The first line of the scenario's docstring."""
        return (self.run.__doc__ or self.id).strip().splitlines()[0]


FAST_CODECS: Final = ("msgspec-msgpack", "json+pydantic", "protobuf")
"""The fast set's poison codecs: one per family (msgspec, pydantic, protobuf)."""

ENTRIES: Final = (
    Entry("D2", consumer.d2_clean_bounce, True),
    Entry("D3", consumer.d3_kill_9, True),
    Entry("D5", consumer.d5_scale, True),
    Entry("D9", broker.d9_broker_sigterm, False),
    Entry("D10", broker.d10_broker_sigkill, False),
    Entry("D11", broker.d11_broker_pause, False),
    Entry("D12", network.d12_network_partition, False),
    Entry("D13", network.d13_degraded_network, False),
    *(
        Entry(f"P1-P3 {codec}", poison.poison_for(codec), codec in FAST_CODECS)
        for codec in REAL_CODECS
    ),
    Entry("P3", poison.p3_small_limits, True),
    Entry("P4", dlq.p4_dlq_unavailable, True),
    Entry("P5", poison.p5_retry_budget, True),
    Entry("S1", consumer.s1_sigterm_under_load, True),
    Entry("S3", backlog.s3_backlog, True),
    Entry("S4", consumer.s4_overload, False),
    Entry("Sec1", security.sec1_tls_fail_closed, False),
    Entry("Sec2", security.sec2_secret_hygiene, True),
    Entry("Sec4", security.sec4_metrics_exposure, True),
    Entry("Sec5", listeners.sec5_every_listener, False),
    Entry("Rg1", registry.rg1_wrong_password, False),
    Entry("Rg2", registry.rg2_wrong_ca, False),
    Entry("Rg3", registry.rg3_registry_fails_after_start, False),
    Entry("H1", hostile.h1_hostile_headers, True),
    Entry("C1", hostile.c1_control_plane_abuse, True),
    Entry("R1", stall.r1_stalled_broker, False),
    Entry("N1 earliest", stall.added_partitions("earliest"), False),
    Entry("N1 latest", stall.added_partitions("latest"), False),
    Entry("L1", memory.l1_large_messages, False),
    Entry("ST1", staging.st1_staging_crash, False),
    Entry("E1 kill", eos.e1_kill_9, False),
    Entry("E1 rebalance", eos.e1_rebalance, False),
    Entry("E1 raises", eos.e1_handler_raises, False),
    Entry("E1 broker", eos.e1_broker_restart, False),
    Entry("B1", budget.b1_shared_string_bomb, False),
    Entry("B2", budget.b2_message_budget, False),
    Entry("B3", budget.b3_backstop, False),
    *(Entry(id_, run, False) for id_, run in async_handlers.SCENARIOS),
)
"""The full set: every entry. The fast set (CI, `pytest tests/faults`): the
per-commit layer of RELIABILITY 6.4 in short variants, about 4 minutes on 2
cores; the broker faults (D9-D13, each on a broker of its own) and the S4 soak
of overload run in the full set only."""


def select(*, fast: bool, only: str | None = None) -> list[Entry]:
    """The entries to run: the fast set or all, narrowed by comma-separated ids.

    An id matches itself, and `P1-P3` matches every codec's `P1-P3 <codec>`.
    """
    chosen = [e for e in ENTRIES if e.fast or not fast]
    if only:
        wanted = {w.strip().lower() for w in only.split(",") if w.strip()}
        chosen = [
            e
            for e in ENTRIES
            if e.id.lower() in wanted or e.id.lower().split(" ")[0] in wanted
        ]
    return chosen


def by_id(entry_id: str) -> Entry:
    """The entry called `entry_id`."""
    return next(e for e in ENTRIES if e.id == entry_id)
