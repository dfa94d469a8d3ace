"""Synthetic numbers within a field's bounds: ints, floats and Decimal text.

Small values by default (short on every wire); with edges, the values a format may
not carry faithfully where the bounds allow them: ints past 64 bits, floats with all
53 bits (never exact in 32).
"""

from __future__ import annotations

import decimal
import random
from typing import Any, Final

from schemas.errors import ConfigError
from schemas.shape import Constraints, fits_64_bits, int_range, int_width

_WIDTH_RANGE: Final[dict[str, tuple[int, int]]] = {
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
}
_SMALL: Final = 1_000_000
_DEFAULT_FLOATS: Final = (-10_000.0, 10_000.0)
_EDGE: Final = 0.25
"""How often a value is an edge case (a wide int, a full-precision float)."""


def draw_decimal(rng: random.Random, bounds: Constraints, path: str) -> str:
    """A Decimal's text within `bounds`, `decimal_places` places (2 unset)."""
    places = 2 if bounds.decimal_places is None else bounds.decimal_places
    digits = bounds.max_digits
    # The largest magnitude the digits allow, in units of the last place.
    most = 10**digits - 1 if digits is not None else None
    scale = 10**places
    lo = _bound(bounds.ge, bounds.gt, _DEFAULT_FLOATS[0], max)
    hi = _bound(bounds.le, bounds.lt, _DEFAULT_FLOATS[1], min)
    low, high = int(-(-lo * scale // 1)), int(hi * scale // 1)
    if most is not None:
        low, high = max(low, -most), min(high, most)
    if low > high:
        raise ConfigError(f"schema error: {path}: no Decimal fits its bounds")
    value = decimal.Decimal(rng.randint(low, high)).scaleb(-places)
    return format(value, "f")


def draw_int(rng: random.Random, bounds: Constraints, edges: bool, path: str) -> int:
    """An int within `bounds`: small, or with `edges` past 64 bits at times."""
    edge = edges and not fits_64_bits(bounds)
    if edge and rng.random() < _EDGE:
        wide = _wide_int(rng, bounds)
        if wide is not None:
            return wide
    low, high = _WIDTH_RANGE[int_width(bounds)]
    lo_b, hi_b = int_range(bounds)
    lo = low if lo_b is None else max(low, lo_b)
    hi = high if hi_b is None else min(high, hi_b)
    # Small values by default (+-1e6): short on every wire. Bounds that lie
    # wholly outside that window get a window of the same width at their edge.
    clip_lo, clip_hi = max(lo, -_SMALL), min(hi, _SMALL)
    if clip_lo <= clip_hi:
        lo, hi = clip_lo, clip_hi
    elif lo > _SMALL:
        hi = min(hi, lo + 2 * _SMALL)
    else:
        lo = max(lo, hi - 2 * _SMALL)
    step = int(bounds.multiple_of or 1)
    first, last = -(-lo // step), hi // step
    if first > last:
        raise ConfigError(f"schema error: {path}: no int fits its bounds")
    return rng.randint(first, last) * step


def _wide_int(rng: random.Random, bounds: Constraints) -> int | None:
    """An int past 64 bits within `bounds`, near the 64-bit edge (None: the
    bounds hold no multiple of their step there)."""
    lo, hi = int_range(bounds)
    sides = []
    above = 2**64 if lo is None else max(lo, 2**64)  # past uint64
    if hi is None or hi >= above:
        sides.append(
            (
                above,
                above + 2 * _SMALL if hi is None else min(hi, above + 2 * _SMALL),
            )
        )
    below = -(2**63) - 1 if hi is None else min(hi, -(2**63) - 1)  # past int64
    if lo is None or lo <= below:
        sides.append(
            (
                below - 2 * _SMALL if lo is None else max(lo, below - 2 * _SMALL),
                below,
            )
        )
    if not sides:
        return None
    low, high = rng.choice(sides)
    step = int(bounds.multiple_of or 1)
    first, last = -(-low // step), high // step
    return None if first > last else rng.randint(first, last) * step


def draw_float(
    rng: random.Random, bounds: Constraints, edges: bool, path: str
) -> float:
    """A float within `bounds`: four decimals, or with `edges` all 53 bits."""
    lo = _bound(bounds.ge, bounds.gt, _DEFAULT_FLOATS[0], max)
    hi = _bound(bounds.le, bounds.lt, _DEFAULT_FLOATS[1], min)
    if lo > hi:
        raise ConfigError(f"schema error: {path}: no float fits its bounds")
    if bounds.multiple_of:
        step = float(bounds.multiple_of)
        return rng.randint(int(-(-lo // step)), int(hi // step)) * step
    # Four decimals: short JSON; every fourth value keeps all 53 bits, which
    # no 32-bit float holds. Every 64-bit codec reads either back exactly.
    value = rng.uniform(lo, hi)
    if not (edges and rng.random() < _EDGE):
        value = round(value, 4)
    return min(max(value, lo), hi)


def _bound(
    inclusive: float | None, exclusive: float | None, default: float, pick: Any
) -> float:
    """The tighter of a default range end and the field's own bound."""
    value = default
    if inclusive is not None:
        value = pick(value, float(inclusive))
    if exclusive is not None:
        # Step just inside an exclusive bound: 1e-4 matches the rounding above.
        value = pick(value, float(exclusive) + (1e-4 if pick is max else -1e-4))
    return value
