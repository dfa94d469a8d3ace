"""The types with no shape kind both readers know: how each is sampled and made from text.

An address, a network or a URL is carried as its text where a format has no such
type (`schemas.carried`), and made the type again from it; `Any` (and `object`) only
by the forms that hold any value.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any, Final

import pydantic
from pydantic import IPvAnyAddress, IPvAnyNetwork

from schemas.shape import Foreign


def _sample_address(version: int) -> Callable[[Any], str]:
    def sample(rng: Any) -> str:
        if version == 4:
            return f"192.0.2.{rng.randrange(1, 255)}"
        return f"2001:db8::{rng.randrange(1, 0xFFFF):x}"

    return sample


def _sample_network(version: int) -> Callable[[Any], str]:
    def sample(rng: Any) -> str:
        if version == 4:
            return f"198.51.{rng.randrange(256)}.0/24"
        return f"2001:db8:{rng.randrange(1, 0xFFFF):x}::/48"

    return sample


def _sample_any(rng: Any) -> str:
    return f"any-{rng.randrange(1000)}"


def sample_url(rng: Any) -> str:
    """A URL every URL type of pydantic's accepts (http, host, path)."""
    return f"https://example.com/track/{rng.randrange(10**6)}"


FOREIGN: Final[
    dict[Any, tuple[str, Callable[[Any], Any] | None, Callable[[str], Any] | None]]
] = {
    ipaddress.IPv4Address: ("IPv4Address", _sample_address(4), ipaddress.IPv4Address),
    ipaddress.IPv6Address: ("IPv6Address", _sample_address(6), ipaddress.IPv6Address),
    ipaddress.IPv4Network: ("IPv4Network", _sample_network(4), ipaddress.IPv4Network),
    ipaddress.IPv6Network: ("IPv6Network", _sample_network(6), ipaddress.IPv6Network),
    IPvAnyAddress: ("IPvAnyAddress", _sample_address(6), ipaddress.ip_address),
    IPvAnyNetwork: ("IPvAnyNetwork", _sample_network(4), ipaddress.ip_network),
    Any: ("Any", _sample_any, None),
    object: ("object", _sample_any, None),
}
"""Types with no shape kind: name, a maker of synthetic JSON values, and the maker
of the value from its text (the type's own constructor: what pydantic runs on the
JSON string), for the formats that carry it as a string."""

_URLS: Final = (pydantic.AnyUrl, pydantic.networks._BaseUrl)


def foreign_of(cls: Any) -> Foreign | None:
    """The `Foreign` of an address, network or URL class; None for another."""
    if cls in FOREIGN:
        return Foreign(cls, *FOREIGN[cls])
    if isinstance(cls, type) and issubclass(cls, _URLS):
        reader = pydantic.TypeAdapter(cls).validate_python
        return Foreign(cls, cls.__name__, sample_url, reader)
    return None
