"""Tokens of `.proto` text, and the cursor the parser reads them with."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, NoReturn

from schemas.errors import ConfigError

_TOKEN: Final = re.compile(
    r"""(?P<space>\s+|//[^\n]*|/\*.*?\*/)
      | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
      | (?P<number>(?:0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?))
      | (?P<name>\.?[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)
      | (?P<symbol>[{}\[\]()<>=;,:+-])""",
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class Token:
    """One token: its kind (a group name of the pattern), text and line."""

    kind: str
    text: str
    line: int


def tokenize(text: str, filename: str) -> list[Token]:
    """Every token of `text`, comments and spaces dropped.

    Raises:
        ConfigError: at a character no token starts with.
    """
    out: list[Token] = []
    pos, line = 0, 1
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ConfigError(
                f"schema error: {filename}:{line}: unexpected {text[pos]!r}"
            )
        kind = match.lastgroup or ""
        if kind != "space":
            out.append(Token(kind, match.group(), line))
        line += match.group().count("\n")
        pos = match.end()
    return out


class TokenCursor:
    """Reads tokens one at a time; every error names the file and line."""

    def __init__(self, text: str, filename: str) -> None:
        self._tokens = tokenize(text, filename)
        self._pos = 0
        self._filename = filename

    def _at_end(self) -> bool:
        return self._pos >= len(self._tokens)

    def _peek(self) -> str:
        return "" if self._at_end() else self._tokens[self._pos].text

    def _next(self) -> Token:
        if self._at_end():
            self._fail("unexpected end of file")
        token = self._tokens[self._pos]
        self._pos += 1
        return token

    def _expect(self, text: str) -> None:
        token = self._next()
        if token.text != text:
            self._fail(f"expected {text!r}, found {token.text!r}", token)

    def _name(self) -> str:
        token = self._next()
        if token.kind != "name":
            self._fail(f"expected a name, found {token.text!r}", token)
        return token.text

    def _int(self) -> int:
        negative = self._peek() == "-"
        if negative:
            self._next()
        token = self._next()
        if token.kind != "number" or not re.fullmatch(
            r"0[xX][0-9a-fA-F]+|\d+", token.text
        ):
            self._fail(f"expected an integer, found {token.text!r}", token)
        value = (
            int(token.text, 0) if token.text[:2].lower() == "0x" else int(token.text)
        )
        return -value if negative else value

    def _string(self) -> str:
        token = self._next()
        if token.kind != "string":
            self._fail(f"expected a string, found {token.text!r}", token)
        return token.text[1:-1]

    def _fail(self, what: str, token: Token | None = None) -> NoReturn:
        """Raise `ConfigError` at `token`'s line (default: the current token's)."""
        if token is None and self._tokens:
            token = self._tokens[min(self._pos, len(self._tokens) - 1)]
        line = token.line if token is not None else 1
        raise ConfigError(f"schema error: {self._filename}:{line}: {what}")

    def _skip_block(self) -> None:
        """Skip a `{...}` block (a service, an aggregate option value)."""
        self._expect("{")
        depth = 1
        while depth:
            text = self._next().text
            depth += (text == "{") - (text == "}")
