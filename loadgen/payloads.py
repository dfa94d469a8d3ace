"""Seeded synthetic payloads for every schema: the one shared data generator.

Payloads are returned as builtins (dicts, lists, scalars); `codec.from_builtins`
turns them into any codec's native object. The same seed gives the same payloads,
so every codec in an A/B encodes the same values. A user's schema gets its payloads
from its types (`schemas.make_payloads`, sized by `SynthOptions`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Final

from schemas.registry import SchemaName
from schemas.shape import MessageShape, Scalar

DEFAULT_LARGE_BYTES: Final = 64 * 1024
"""Default JSON size of a `large` payload (the parameter spans ~10 KB to ~1.5 MB)."""

_WORDS: Final = [
    "fast",
    "stable",
    "v2",
    "blue",
    "green",
    "red",
    "prime",
    "bulk",
    "eco",
    "fragile",
    "express",
    "gift",
    "sale",
    "new",
    "returning",
    "vip",
    "mobile",
    "web",
    "store",
    "north",
    "south",
    "east",
    "west",
]
_CITIES: Final = ("Lisbon", "Porto", "Berlin", "Hamburg", "Lyon", "Gdansk", "Turin")
_STATUSES: Final = ("created", "paid", "packed", "shipped", "delivered")
_KINDS: Final = ("pickup", "dropoff", "break", "depot")

_VEHICLE_JSON_BYTES: Final = 1560
"""Measured JSON size of one generated vehicle (40-point path, 20 stops)."""


def _address(rng: random.Random) -> dict[str, Any]:
    return {
        "street": f"{rng.randint(1, 999)} {rng.choice(_WORDS).title()} Street",
        "city": rng.choice(_CITIES),
        "region": rng.choice(("north", "south", "east", "west")),
        "postal_code": f"{rng.randint(10000, 99999)}",
        "country": rng.choice(("PT", "DE", "FR", "PL", "IT")),
    }


def small(rng: random.Random, seq: int) -> dict[str, Any]:
    """A ~100-byte payload like seed 001's (`id`, `name`, `tags`, `metrics`)."""
    return {
        "id": seq,
        "name": f"widget-{rng.choice(_WORDS)}",
        "tags": rng.sample(_WORDS, 3),
        "metrics": [round(rng.uniform(0, 10), 2) for _ in range(4)],
    }


def medium(rng: random.Random, seq: int) -> dict[str, Any]:
    """A ~1 KB order event: ~45 leaf fields with nested objects and a list of items."""
    items: list[dict[str, Any]] = [
        {
            "sku": f"SKU-{rng.randint(100000, 999999)}",
            "name": f"{rng.choice(_WORDS)} {rng.choice(_WORDS)}",
            "quantity": rng.randint(1, 5),
            "unit_price": round(rng.uniform(1, 200), 2),
            "discount": round(rng.choice((0.0, 0.05, 0.1, 0.15)), 2),
        }
        for _ in range(rng.randint(2, 4))
    ]
    subtotal = round(sum(i["quantity"] * i["unit_price"] for i in items), 2)
    tax = round(subtotal * 0.2, 2)
    shipping = round(rng.choice((0.0, 4.99, 9.99)), 2)
    total = round(subtotal + tax + shipping, 2)
    customer_id = rng.randint(1, 50_000)
    return {
        "event_id": f"evt-{seq:012d}",
        "event_type": "order." + rng.choice(_STATUSES),
        "occurred_at_ms": 1_767_225_600_000 + seq * 25,
        "schema_version": 3,
        "source": rng.choice(("web", "ios", "android", "pos")),
        "order_id": f"ord-{rng.randint(10**9, 10**10 - 1)}",
        "status": rng.choice(_STATUSES),
        "currency": "EUR",
        "customer": {
            "customer_id": customer_id,
            "email": f"user{customer_id}@example.com",
            "name": f"{rng.choice(_WORDS).title()} {rng.choice(_WORDS).title()}",
            "tier": rng.choice(("bronze", "silver", "gold")),
            "marketing_opt_in": rng.random() < 0.5,
            "address": _address(rng),
        },
        "shipping_address": _address(rng),
        "items": items,
        "payment": {
            "method": rng.choice(("card", "paypal", "mbway")),
            "card_last4": f"{rng.randint(0, 9999):04d}",
            "currency": "EUR",
            "amount": total,
            "captured": rng.random() < 0.9,
        },
        "subtotal": subtotal,
        "tax": tax,
        "shipping_cost": shipping,
        "total": total,
        "tags": rng.sample(_WORDS, 2),
        "session_id": f"{rng.getrandbits(64):016x}",
        "user_agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/126.0",
        "gift": rng.random() < 0.1,
        "coupon_code": rng.choice(("", "", "WELCOME10", "SPRING")),
    }


def large(
    rng: random.Random, seq: int, size_bytes: int = DEFAULT_LARGE_BYTES
) -> dict[str, Any]:
    """A route-planning snapshot of about `size_bytes` of JSON (seed 004)."""
    n_vehicles = max(1, round(size_bytes / _VEHICLE_JSON_BYTES))
    lat, lon = round(rng.uniform(38, 54), 6), round(rng.uniform(-9, 20), 6)
    vehicles = [
        {
            "vehicle_id": v,
            "shift": rng.choice(("early", "late", "night")),
            "capacity": round(rng.uniform(500, 2000), 1),
            "path": [round(rng.uniform(-90, 90), 6) for _ in range(40)],
            "stops": [
                {
                    "stop_id": rng.randint(1, 10**9),
                    "eta": round(rng.uniform(0, 86_400), 3),
                    "kind": rng.choice(_KINDS),
                }
                for _ in range(20)
            ],
        }
        for v in range(n_vehicles)
    ]
    return {
        "plan_id": f"plan-{seq:08d}",
        "created_at_ms": 1_767_225_600_000 + seq,
        "version": rng.randint(1, 100),
        "depot_lat": lat,
        "depot_lon": lon,
        "costs": [round(rng.uniform(0, 1000), 3) for _ in range(n_vehicles)],
        "vehicles": vehicles,
    }


def generator(
    schema: SchemaName, *, large_bytes: int = DEFAULT_LARGE_BYTES
) -> Callable[[random.Random, int], dict[str, Any]]:
    """The payload function for `schema`: `(rng, seq) -> builtins`."""
    if schema == "small":
        return small
    if schema == "medium":
        return medium
    return lambda rng, seq: large(rng, seq, large_bytes)


def make_payloads(
    schema: SchemaName,
    count: int,
    *,
    seed: int = 0,
    large_bytes: int = DEFAULT_LARGE_BYTES,
) -> list[dict[str, Any]]:
    """`count` varied payloads for `schema`, reproducible from `seed`."""
    rng = random.Random(seed)
    make = generator(schema, large_bytes=large_bytes)
    return [make(rng, seq) for seq in range(count)]


def entity_field(shape: MessageShape) -> str | None:
    """The field a user's messages are keyed by (`key = "entity"`), if any.

    The first top-level field named `id` or `*_id` that always holds a `str`, an
    `int` or a UUID, by its wire key (the payloads' key): Kafka keys are usually an entity's id (an order's, a customer's), which
    keeps one entity's messages in one partition, in order.
    """
    for f in shape.fields:
        named = f.name == "id" or f.name.endswith("_id")
        plain = isinstance(f.type, Scalar) and f.type.kind in ("str", "int", "uuid")
        if named and plain and not f.nullable:
            return f.wire
    return None
