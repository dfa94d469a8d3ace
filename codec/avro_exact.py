"""An exact walk of Avro binary against its schema: what fastavro does not check.

fastavro's compiled reader trusts what it reads: a long of 20 bytes (the shift goes
past 64 bits and wraps), a 10-byte long whose last byte carries bits above 64, an
`int` of 6 bytes or above 32 bits, a boolean byte of 2, a union index of -1 (read
as the last branch, as a Python list index) and a negative-count block whose byte
size lies all decode into some value. The Avro specification and Java's reader
("Invalid long encoding") refuse them all. So `walker` builds, once per schema, a
function that walks the whole buffer in step with the schema and raises
`MalformedBuffer` at the first byte that is not a valid encoding, before fastavro
reads it:

- a long is at most 10 bytes (and the 10th at most 1: bit 63 is the last), an
  `int` (union and enum indexes too) at most 5 bytes and 32 bits;
- a boolean is 0 or 1, a union or enum index names a branch or symbol, a string's
  or bytes' length is non-negative and inside the buffer;
- a block's count is followed, when negative, by its byte size, which must be the
  bytes its items take; a block holds no more items than bytes remain (each item
  takes at least a byte) or, for items of zero bytes (empty records), no more than
  the buffer's length: a 10-byte message cannot ask for 2**62 empty records;
- the record ends exactly at the buffer's end.

Performance note: the walk is Python source generated from the schema (one
function per record, each field's check inline, a one-byte length or long read
without a call), so a medium order event costs about 3 us on top of fastavro's
17 us (docs/benchmarks.md, "Exact Avro"). The generated text holds no schema
text: records are numbered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from codec.base import MalformedBuffer

_FIXED: Final = {"null": 0, "float": 4, "double": 8}

Check = Callable[[bytes], None]


def walker(schema: Any) -> Check:
    """The exact check of one record of `schema` (the derived schema's JSON form).

    Raises:
        MalformedBuffer: (from the returned function) at the first invalid byte.
    """
    gen = _Generator()
    root = gen.record_function(schema, "")
    namespace: dict[str, Any] = {
        "MalformedBuffer": MalformedBuffer,
        "_long": _long,
        "_int": _int,
        "_sized": _sized,
        "_long_size": _long_size,
        "_int_size": _int_size,
        "_not_boolean": _not_boolean,
        **_ONE_BYTE,
    }
    exec(compile("\n".join(gen.lines), "<avro exact walk>", "exec"), namespace)  # noqa: S102 (our own generated text)
    walk: Callable[[bytes, int], int] = namespace[root]

    def check(data: bytes) -> None:
        try:
            end = walk(data, 0)
        except IndexError:
            raise MalformedBuffer("Avro record truncated") from None
        if end > len(data):
            raise MalformedBuffer("Avro record truncated")
        if end < len(data):
            raise MalformedBuffer("trailing bytes after the Avro record")

    return check


def _long(data: bytes, pos: int) -> tuple[int, int]:
    """The zig-zag long at `pos` and the position after it: at most 10 bytes,
    the 10th at most 1 (bit 63 is the last)."""
    b = data[pos]
    n, shift, end = b & 0x7F, 7, pos + 1
    while b > 0x7F:
        b = data[end]
        end += 1
        if end - pos == 10 and b > 1:
            raise MalformedBuffer("Avro long over 10 bytes or 64 bits")
        n |= (b & 0x7F) << shift
        shift += 7
    return (n >> 1) ^ -(n & 1), end


def _int(data: bytes, pos: int) -> tuple[int, int]:
    """The zig-zag int at `pos` and the position after it: at most 5 bytes, the
    5th at most 0x0F (bit 31 is the last)."""
    b = data[pos]
    n, shift, end = b & 0x7F, 7, pos + 1
    while b > 0x7F:
        b = data[end]
        end += 1
        if end - pos == 5 and b > 0x0F:
            raise MalformedBuffer("Avro int over 5 bytes or 32 bits")
        n |= (b & 0x7F) << shift
        shift += 7
    return (n >> 1) ^ -(n & 1), end


def _sized(data: bytes, pos: int) -> int:
    """The bytes a string or bytes value takes: a non-negative length, then its
    bytes inside the buffer."""
    length, end = _long(data, pos)
    if length < 0:
        raise MalformedBuffer("Avro string or bytes of negative length")
    if end + length > len(data):
        raise MalformedBuffer("Avro string or bytes past the buffer's end")
    return end + length - pos


def _long_size(data: bytes, pos: int) -> int:
    return _long(data, pos)[1] - pos


def _int_size(data: bytes, pos: int) -> int:
    return _int(data, pos)[1] - pos


def _not_boolean(data: bytes, pos: int) -> int:
    raise MalformedBuffer("Avro boolean neither 0 nor 1")


_ONE_BYTE: Final = {
    # By the first byte, what a value takes when that byte says it all (a
    # one-byte varint), else 0: the walk then calls the function that reads on.
    "_S": tuple(1 + (b >> 1) if b < 0x80 and not b & 1 else 0 for b in range(256)),
    "_L": tuple(1 if b < 0x80 else 0 for b in range(256)),
    "_B": tuple(1 if b < 2 else 0 for b in range(256)),
}
_STEPS: Final = {
    "string": ("_S", "_sized"),
    "bytes": ("_S", "_sized"),
    "long": ("_L", "_long_size"),
    "int": ("_L", "_int_size"),
    "boolean": ("_B", "_not_boolean"),
}
"""Each varint-led value's line: `p += TABLE[d[p]] or SLOW(d, p)`."""


class _Generator:
    """Writes the walk's source: `d` is the buffer, `p` the position, `n` its
    length. Each record gets a function `_rN(d, p)` (numbered: no schema text in
    the source), and its fields are also written inline where it is defined; a
    reference by name calls the function (so a recursive record works)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._names: dict[str, str] = {}
        self._empty: dict[str, bool] = {}
        self._depth = 0

    def record_function(self, schema: Any, namespace: str) -> str:
        full = _full(schema, namespace)
        if full in self._names:
            return self._names[full]
        func = self._names[full] = f"_r{len(self._names)}"
        self._empty[full] = True  # while its fields are written (recursion)
        inner = full.rpartition(".")[0]
        body: list[str] = []
        saved, self._depth = self._depth, 0
        for f in schema["fields"]:
            self._value(f["type"], inner, body, 1)
        self._depth = saved
        self._empty[full] = all(
            self._empty_value(f["type"], inner) for f in schema["fields"]
        )
        self.lines += [f"def {func}(d, p):", "    n = len(d)", *body, "    return p"]
        return func

    def _value(self, schema: Any, ns: str, out: list[str], level: int) -> None:
        pad = "    " * level
        if isinstance(schema, list):
            self._union(schema, ns, out, level)
        elif isinstance(schema, dict):
            kind = schema["type"]
            if kind == "record":
                self.record_function(schema, ns)
                inner = _full(schema, ns).rpartition(".")[0]
                for f in schema["fields"]:  # inline: a call costs ~80 ns
                    self._value(f["type"], inner, out, level)
            elif kind in ("array", "map"):
                self._blocks(schema, ns, out, level)
            elif kind == "enum":
                self._names[_full(schema, ns)] = f"enum:{len(schema['symbols'])}"
                self._index(len(schema["symbols"]), "enum index", out, level)
            elif kind == "fixed":
                self._names[_full(schema, ns)] = f"fixed:{int(schema['size'])}"
                _skip(out, pad, int(schema["size"]))
            else:
                self._value(kind, ns, out, level)  # a logical type on its base type
        elif schema in _FIXED:
            _skip(out, pad, _FIXED[schema])
        elif schema in _STEPS:
            table, slow = _STEPS[schema]
            out.append(f"{pad}p += {table}[d[p]] or {slow}(d, p)")
        else:
            self._named(schema, ns, out, level)

    def _named(self, name: str, ns: str, out: list[str], level: int) -> None:
        full = name if "." in name else f"{ns}.{name}".lstrip(".")
        target = self._names[full]
        pad = "    " * level
        if target.startswith("enum:"):
            self._index(int(target[5:]), "enum index", out, level)
        elif target.startswith("fixed:"):
            _skip(out, pad, int(target[6:]))
        else:
            out.append(f"{pad}p = {target}(d, p)")

    def _index(self, count: int, what: str, out: list[str], level: int) -> None:
        """Reads an int index into `i` and refuses one outside 0..count-1."""
        pad = "    " * level
        out += [
            f"{pad}i = d[p]",
            f"{pad}if i < 0x80:",
            f"{pad}    p += 1",
            f"{pad}    i = (i >> 1) ^ -(i & 1)",
            f"{pad}else:",
            f"{pad}    i, p = _int(d, p)",
            f"{pad}if not 0 <= i < {count}:",
            f"{pad}    raise MalformedBuffer('Avro {what} out of range')",
        ]

    def _union(self, branches: list[Any], ns: str, out: list[str], level: int) -> None:
        pad = "    " * level
        self._index(len(branches), "union index", out, level)
        for k, branch in enumerate(branches):
            body: list[str] = []
            self._value(branch, ns, body, level + 1)
            out.append(f"{pad}{'if' if k == 0 else 'elif'} i == {k}:")
            out += body or [f"{pad}    pass"]

    def _blocks(self, schema: Any, ns: str, out: list[str], level: int) -> None:
        pad, inner = "    " * level, "    " * (level + 1)
        self._depth += 1
        c, e = f"c{self._depth}", f"e{self._depth}"
        items: list[str] = []
        if schema["type"] == "map":
            self._value("string", ns, items, level + 2)  # the key
            self._value(schema["values"], ns, items, level + 2)
            room = "n - p"
        else:
            self._value(schema["items"], ns, items, level + 2)
            room = "n" if self._empty_value(schema["items"], ns) else "n - p"
        out += [
            f"{pad}while True:",
            f"{inner}{c}, p = _long(d, p)",
            f"{inner}if {c} == 0:",
            f"{inner}    break",
            f"{inner}{e} = -1",
            f"{inner}if {c} < 0:",
            f"{inner}    {c} = -{c}",
            f"{inner}    {e}, p = _long(d, p)",
            f"{inner}    if {e} < 0:",
            f"{inner}        raise MalformedBuffer('Avro block of negative size')",
            f"{inner}    {e} += p",
            f"{inner}if {c} > {room}:",
            f"{inner}    raise MalformedBuffer('Avro block of more items than bytes')",
            f"{inner}for _ in range({c}):",
            *(items or [f"{inner}    pass"]),
            f"{inner}if {e} >= 0 and p != {e}:",
            f"{inner}    raise MalformedBuffer('Avro block size unlike its items')",
        ]
        self._depth -= 1

    def _empty_value(self, schema: Any, ns: str) -> bool:
        """Whether a value of `schema` can take zero bytes (null, an empty record):
        only such items may outnumber the bytes that remain."""
        if isinstance(schema, list):
            return False  # the branch index takes a byte
        if isinstance(schema, dict):
            if schema["type"] == "record":
                return self._empty.get(_full(schema, ns), False)
            if schema["type"] == "fixed":
                return int(schema["size"]) == 0
            return isinstance(schema["type"], str) and schema["type"] == "null"
        if schema == "null":
            return True
        full = schema if "." in schema else f"{ns}.{schema}".lstrip(".")
        return self._empty.get(full, False) or self._names.get(full) == "fixed:0"


def _skip(out: list[str], pad: str, size: int) -> None:
    """`p += size`, merged into the line before when that is a skip too."""
    if not size:
        return
    if out and out[-1].startswith(f"{pad}p += ") and out[-1][len(pad) + 5 :].isdigit():
        size += int(out[-1][len(pad) + 5 :])
        out.pop()
    out.append(f"{pad}p += {size}")


def _full(schema: Any, namespace: str) -> str:
    name: str = schema["name"]
    if "." in name:
        return name
    space = schema.get("namespace", namespace)
    return f"{space}.{name}" if space else name
