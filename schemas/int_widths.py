"""Which protobuf integer type holds an int's bounds, and whether 64 bits hold them."""

from __future__ import annotations

from typing import Final, Protocol


class Constraints(Protocol):
    """The bounds these read (`schemas.shape.Constraints` has them)."""

    @property
    def gt(self) -> int | float | None: ...
    @property
    def ge(self) -> int | float | None: ...
    @property
    def lt(self) -> int | float | None: ...
    @property
    def le(self) -> int | float | None: ...


_INT32: Final = (-(2**31), 2**31 - 1)
_UINT32: Final = (0, 2**32 - 1)
_INT64: Final = (-(2**63), 2**63 - 1)
_UINT64: Final = (0, 2**64 - 1)


def int_width(bounds: Constraints) -> str:
    """The narrowest of int32, uint32, int64, uint64 that holds `bounds`.

    Unbounded ints are int64 (the built-in schemas' choice); a bound past 64 bits
    is refused by the readers before this is asked.
    """
    lo, hi = int_range(bounds)
    for name, (low, high) in (
        ("int32", _INT32),
        ("uint32", _UINT32),
        ("int64", _INT64),
        ("uint64", _UINT64),
    ):
        if lo is not None and hi is not None and low <= lo and hi <= high:
            return name
    return "uint64" if lo is not None and lo >= 0 and hi is None else "int64"


def int_range(bounds: Constraints) -> tuple[int | None, int | None]:
    """The inclusive integer range of `bounds` (None: unbounded on that side)."""
    lo = _first(bounds.ge, None if bounds.gt is None else bounds.gt + 1)
    hi = _first(bounds.le, None if bounds.lt is None else bounds.lt - 1)
    return (None if lo is None else int(lo), None if hi is None else int(hi))


def _first(*values: int | float | None) -> int | float | None:
    return next((v for v in values if v is not None), None)


def fits_64_bits(bounds: Constraints) -> bool:
    """True when every int `bounds` allow fits int64 or uint64."""
    lo, hi = int_range(bounds)
    if lo is not None and lo < _INT64[0]:
        return False
    return hi is None or hi <= (_UINT64[1] if lo is not None and lo >= 0 else _INT64[1])


__all__ = ["fits_64_bits", "int_range", "int_width"]
