"""msgspec Structs: the wire and in-memory shapes of schemas/builtin/messages.proto.

Field names, order and kinds match the `.proto` messages exactly (a unit test compares
them). Every Struct is `frozen` (the business logic only reads), `kw_only`, rejects
unknown fields, and is built with `gc=False`: a decoded message is a tree of strings,
numbers and lists that can never form a reference cycle, so keeping it out of the
cyclic garbage collector is safe and saves the collector's traversal on every batch
(msgspec's perf tips, in their stated order from safe to aggressive).
"""

from __future__ import annotations

import msgspec


class _Base(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False
):
    """Common Struct options."""


# --- small --------------------------------------------------------------------------


class Payload(_Base, frozen=True):
    id: int
    name: str
    tags: list[str]
    metrics: list[float]


# --- medium -------------------------------------------------------------------------


class Address(_Base, frozen=True):
    street: str
    city: str
    region: str
    postal_code: str
    country: str


class Customer(_Base, frozen=True):
    customer_id: int
    email: str
    name: str
    tier: str
    marketing_opt_in: bool
    address: Address


class LineItem(_Base, frozen=True):
    sku: str
    name: str
    quantity: int
    unit_price: float
    discount: float


class Payment(_Base, frozen=True):
    method: str
    card_last4: str
    currency: str
    amount: float
    captured: bool


class OrderEvent(_Base, frozen=True):
    event_id: str
    event_type: str
    occurred_at_ms: int
    schema_version: int
    source: str
    order_id: str
    status: str
    currency: str
    customer: Customer
    shipping_address: Address
    items: list[LineItem]
    payment: Payment
    subtotal: float
    tax: float
    shipping_cost: float
    total: float
    tags: list[str]
    session_id: str
    user_agent: str
    gift: bool
    coupon_code: str


# --- large --------------------------------------------------------------------------


class Stop(_Base, frozen=True):
    stop_id: int
    eta: float
    kind: str


class Vehicle(_Base, frozen=True):
    vehicle_id: int
    shift: str
    capacity: float
    path: list[float]
    stops: list[Stop]


class RoutePlan(_Base, frozen=True):
    plan_id: str
    created_at_ms: int
    version: int
    depot_lat: float
    depot_lon: float
    costs: list[float]
    vehicles: list[Vehicle]
