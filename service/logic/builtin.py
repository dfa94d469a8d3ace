"""The stub business logic: what the worker does with each decoded message.

The logic reads decoded objects by attribute only, so the same code runs on a
pydantic model, a msgspec Struct and a protobuf message, and no codec pays for a
conversion the others skip. `aggregate` touches every field a real consumer of the
schema would (protobuf's upb backend decodes lazily: reading fields is where its
cost is, DESIGN.md); on a user's schema it reads every field (`service.logic.field_reader`).
`--work-us` adds a busy loop per message standing in for heavier logic. A message
that breaks an invariant raises `LogicError` (poison).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from time import perf_counter_ns
from typing import Any, Final, Protocol

from schemas.errors import LogicError
from schemas.registry import SCHEMAS, Schema, SchemaName
from schemas.user.loader import UserSchema
from schemas.wire_shape import shape_of
from service.logic.field_reader import read_every_field
from service.logic.named_fields import field_paths, read_named_fields
from service.logic.user_handler import (
    FirstCallProbe,
    awaits,
    is_user_logic,
    load_handler,
)

_KEYS: Final = 4096
"""Aggregates are kept per key modulo this, so memory stays bounded."""


def _small(obj: Any, totals: dict[int, float]) -> None:
    metrics = obj.metrics
    if not obj.tags and not metrics:
        raise LogicError("payload without tags or metrics")
    key = obj.id % _KEYS
    totals[key] = totals.get(key, 0.0) + sum(metrics)


def _medium(obj: Any, totals: dict[int, float]) -> None:
    total = 0.0
    for item in obj.items:
        quantity = item.quantity
        if quantity <= 0:
            raise LogicError("line item with a non-positive quantity")
        total += quantity * item.unit_price * (1.0 - item.discount)
    if total == 0.0:
        raise LogicError("order without items")
    key = obj.customer.customer_id % _KEYS
    totals[key] = totals.get(key, 0.0) + total + obj.shipping_cost


def _large(obj: Any, totals: dict[int, float]) -> None:
    vehicles = obj.vehicles
    if not vehicles:
        raise LogicError("plan without vehicles")
    load = 0.0
    for vehicle in vehicles:
        load += sum(vehicle.path)
        for stop in vehicle.stops:
            load += stop.eta if stop.kind != "break" else 0.0
    key = obj.version % _KEYS
    totals[key] = totals.get(key, 0.0) + load + sum(obj.costs)


class _Logic(Protocol):
    def __call__(self, obj: Any, totals: dict[int, float]) -> None: ...


_LOGIC: Final[dict[SchemaName, _Logic]] = {
    "small": _small,
    "medium": _medium,
    "large": _large,
}


def _user_logic(schema: UserSchema) -> _Logic:
    """A user's schema: read every field; count the values read (key 0)."""
    read = read_every_field(schema.shape)

    def step(obj: Any, totals: dict[int, float]) -> None:
        totals[0] = totals.get(0, 0.0) + read(obj)

    return step


def _fields_logic(shape: Any, spec: str) -> _Logic:
    """Read only the named fields; count the values read (key 0)."""
    read = read_named_fields(shape, field_paths(shape, spec))

    def step(obj: Any, totals: dict[int, float]) -> None:
        totals[0] = totals.get(0, 0.0) + read(obj)

    return step


class Handler:
    """The configured logic as one per-message step (None for `noop`).

    Args:
        schema: a built-in schema (its key or forms), or a user's schema (every
            field is read).
        logic: `aggregate` (read fields, keep running totals per key), `fields`
            (read only `read_fields`, `service.logic.named_fields`), `noop`, or a
            team's `MODULE:CALLABLE` (`service.logic.user_handler`), which becomes
            the step itself: its return value is the result (`results`).
        work_us: extra busy-loop microseconds per message.
        read_fields: for `fields`, dotted paths `a,b.c` or a count k (the first k).
    """

    def __init__(
        self,
        schema: SchemaName | Schema | UserSchema,
        logic: str,
        work_us: float = 0.0,
        read_fields: str = "3",
    ) -> None:
        self.totals: dict[int, float] = {}
        totals = self.totals
        self.results = is_user_logic(logic)
        """Whether the step's return value is the result to write downstream (a
        team's handler); else the decoded message itself is (the stubs)."""
        self.step: Callable[[Any], object] | None = None
        self.awaits = False
        """The step is an async handler (`service.logic.user_handler.awaits`): the
        worker runs it on its event loop (`service.loop.async_path.loop`)."""
        self.probe: FirstCallProbe | None = None
        """A team's plain callable, until its first call says whether it returns
        awaitables (`FirstCallProbe`); None otherwise."""
        if self.results:
            handler = load_handler(logic)
            self.awaits = awaits(handler)
            work_ns = int(work_us * 1000)
            if self.awaits:
                self.step = _with_work_async(handler, work_ns) if work_ns else handler
                return
            # Called as is, no wrapper, once its first call has returned: the same
            # cost on every codec.
            step = _with_work(handler, work_ns) if work_ns else handler
            self.step = self.probe = FirstCallProbe(step)
            return
        logic_step: _Logic | None = None
        if logic == "fields":
            forms = SCHEMAS[schema] if isinstance(schema, str) else schema
            logic_step = _fields_logic(shape_of(forms), read_fields)
        elif logic != "noop":
            if isinstance(schema, UserSchema):
                logic_step = _user_logic(schema)
            else:
                logic_step = _LOGIC[
                    schema.name if isinstance(schema, Schema) else schema
                ]
        work_ns = int(work_us * 1000)
        # Choose the step once: nothing in it tests the configuration per message.
        if logic_step is not None:
            # A C-level partial: one Python frame per message, not two.
            self.step = partial(logic_step, totals=totals)
        if work_ns:
            self.step = _with_work(self.step, work_ns)
        if logic == "flaky" and self.step is not None:
            self.step = _Flaky(self.step)


FLAKY_EVERY: Final = 20


class _Flaky:
    """The `flaky` logic: `aggregate`, but every 20th message fails its first
    attempt and passes the next (a transient error, for the retry budget's fault
    test); a message `aggregate` rejects is still rejected on every attempt."""

    def __init__(self, step: Callable[[Any], object]) -> None:
        self._step = step
        self._seen = 0
        self._failed: Any = None

    def __call__(self, obj: Any) -> None:
        # The retry of the message that just failed: equal, not the same object
        # (each attempt decodes the message again).
        if self._failed is not None and obj == self._failed:
            self._failed = None
        else:
            self._seen += 1
            if self._seen % FLAKY_EVERY == 0:
                self._failed = obj
                raise LogicError("flaky logic: a transient failure (first attempt)")
        self._step(obj)


def _with_work(
    step: Callable[[Any], object] | None, work_ns: int
) -> Callable[[Any], object]:
    """`step` followed by `work_ns` of busy CPU (heavier logic's stand-in); returns
    what `step` returns."""

    def work(obj: Any) -> object:
        result = None if step is None else step(obj)
        deadline = perf_counter_ns() + work_ns
        while perf_counter_ns() < deadline:
            pass
        return result

    return work


def _with_work_async(
    step: Callable[[Any], Any], work_ns: int
) -> Callable[[Any], Awaitable[object]]:
    """An async `step` followed by `work_ns` of busy CPU once it has returned."""

    async def work(obj: Any) -> object:
        result = await step(obj)
        deadline = perf_counter_ns() + work_ns
        while perf_counter_ns() < deadline:
            pass
        return result

    return work
