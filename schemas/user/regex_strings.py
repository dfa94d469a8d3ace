"""Strings that match a regular expression, for seeded synthetic payloads.

Covers what field patterns usually are (literals, classes and ranges, `\\d \\w \\s`,
`.`, groups, alternatives, bounded or open repeats, anchors); a pattern with
anything else (look-arounds, back-references, negated classes) is refused by
`unsupported` before any payload is made, so a check names every such field.
"""

from __future__ import annotations

import importlib
import random
import re
import string
from typing import Any, Final

# The stdlib's own regex parser (3.11+; no typing stubs): what `re.compile` uses.
sre: Any = importlib.import_module("re._constants")
sre_parse: Any = importlib.import_module("re._parser")

_CATEGORIES: Final[dict[Any, str]] = {
    sre.CATEGORY_DIGIT: string.digits,
    sre.CATEGORY_WORD: string.ascii_letters + string.digits + "_",
    sre.CATEGORY_SPACE: " ",
}
_NAMES: Final[dict[Any, str]] = {
    sre.ASSERT: "a look-around",
    sre.ASSERT_NOT: "a look-around",
    sre.GROUPREF: "a back-reference",
    sre.GROUPREF_EXISTS: "a back-reference",
    sre.NOT_LITERAL: "a negated character",
}
_ANY: Final = string.ascii_letters + string.digits
_OPEN_REPEAT: Final = 4
"""Extra items an open repeat (`*`, `+`, `{2,}`) gets at most."""
_TRIES: Final = 50


def unsupported(pattern: str) -> str | None:
    """Why no string can be made for `pattern` here, or None when one can."""
    try:
        parsed = sre_parse.parse(pattern)
    except re.error as exc:
        return f"the pattern {pattern!r} does not compile: {exc}"
    bad = _first_unsupported(parsed)
    if bad is not None:
        return f"cannot synthesize strings for the pattern {pattern!r} (it uses {bad})"
    return None


def matching(
    pattern: str, rng: random.Random, min_length: int = 0, max_length: int | None = None
) -> str | None:
    """A string `re.search(pattern)` finds that fits the lengths; None if none found."""
    parsed = sre_parse.parse(pattern)
    compiled = re.compile(pattern)
    for _ in range(_TRIES):
        text = "".join(_emit(parsed, rng))
        fits = min_length <= len(text) and (
            max_length is None or len(text) <= max_length
        )
        if fits and compiled.search(text):
            return text
    return None


def _first_unsupported(parsed: Any) -> str | None:
    for op, arg in parsed:
        if op in (sre.LITERAL, sre.ANY, sre.AT):
            continue
        if op is sre.IN:
            if any(item_op is sre.NEGATE for item_op, _ in arg):
                return "a negated class"
            continue
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            inner = _first_unsupported(arg[2])
        elif op is sre.SUBPATTERN:
            inner = _first_unsupported(arg[3])
        elif op is sre.BRANCH:
            inner = next(filter(None, map(_first_unsupported, arg[1])), None)
        else:
            return _NAMES.get(op, "a construct not covered here")
        if inner is not None:
            return inner
    return None


def _emit(parsed: Any, rng: random.Random) -> list[str]:
    out: list[str] = []
    for op, arg in parsed:
        if op is sre.LITERAL:
            out.append(chr(arg))
        elif op is sre.ANY:
            out.append(rng.choice(_ANY))
        elif op is sre.IN:
            out.append(_one_of(arg, rng))
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            low, high, inner = arg
            high = low + _OPEN_REPEAT if high is sre.MAXREPEAT else high
            for _ in range(rng.randint(low, high)):
                out.extend(_emit(inner, rng))
        elif op is sre.SUBPATTERN:
            out.extend(_emit(arg[3], rng))
        elif op is sre.BRANCH:
            out.extend(_emit(rng.choice(arg[1]), rng))
    return out


def _one_of(items: Any, rng: random.Random) -> str:
    op, arg = rng.choice(items)
    if op is sre.LITERAL:
        return chr(arg)
    if op is sre.RANGE:
        return chr(rng.randint(arg[0], arg[1]))
    if op is sre.CATEGORY:
        return rng.choice(_CATEGORIES.get(arg, _ANY))
    return rng.choice(_ANY)
