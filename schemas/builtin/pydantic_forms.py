"""pydantic models: the json+pydantic forms of schemas/builtin/messages.proto.

Field names, order and kinds match the `.proto` messages and the msgspec Structs in
`schemas.builtin.structs` exactly (a unit test compares them). Every model is strict (no
`"123"` -> 123 coercion), forbids unknown fields and is frozen: the configuration a
careful team runs in production, so the A/B compares like with like.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Base(BaseModel):
    """Common model options."""

    model_config = ConfigDict(
        strict=True, extra="forbid", frozen=True, allow_inf_nan=False
    )
    """`allow_inf_nan=False`: JSON has no NaN or Infinity, and `1e999` is an
    overflow, not an infinity (msgspec-json and orjson refuse all three)."""


# --- small --------------------------------------------------------------------------


class Payload(_Base):
    id: int
    name: str
    tags: list[str]
    metrics: list[float]


# --- medium -------------------------------------------------------------------------


class Address(_Base):
    street: str
    city: str
    region: str
    postal_code: str
    country: str


class Customer(_Base):
    customer_id: int
    email: str
    name: str
    tier: str
    marketing_opt_in: bool
    address: Address


class LineItem(_Base):
    sku: str
    name: str
    quantity: int
    unit_price: float
    discount: float


class Payment(_Base):
    method: str
    card_last4: str
    currency: str
    amount: float
    captured: bool


class OrderEvent(_Base):
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


class Stop(_Base):
    stop_id: int
    eta: float
    kind: str


class Vehicle(_Base):
    vehicle_id: int
    shift: str
    capacity: float
    path: list[float]
    stops: list[Stop]


class RoutePlan(_Base):
    plan_id: str
    created_at_ms: int
    version: int
    depot_lat: float
    depot_lon: float
    costs: list[float]
    vehicles: list[Vehicle]
