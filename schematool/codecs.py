"""The registry's wire codecs built on a user's schema (`codec.get_codec`)."""

from __future__ import annotations

from typing import Any, Final

from codec import REAL_CODECS, Codec, get_codec
from schemas.errors import ConfigError
from schemas.user.loader import UserSchema

WIRE_CODECS: Final[tuple[str, ...]] = tuple(REAL_CODECS)
"""Every codec with one wire format, in the registry's order."""


def user_codec(name: str, schema: UserSchema) -> Codec[Any]:
    """The wire codec `name` bound to `schema`'s native type for that codec.

    Raises:
        ConfigError: for a name that is not a wire codec (`auto` included).
    """
    if name not in WIRE_CODECS:
        raise ConfigError(
            f"--codecs: unknown codec {name!r} (choose from {', '.join(WIRE_CODECS)})"
        )
    return get_codec(name, schema)  # type: ignore[arg-type]  # checked just above
