"""Measure every codec x profile case in-process and assemble the `BenchReport`.

Per profile, one pool of `pool_size` seeded payloads (`loadgen.payloads`) serves
every codec: each codec turns it into native objects with `from_builtins` and
encodes those once, before any clock starts. Between codecs the pool is kept as
MessagePack bytes, which the collector does not track: as dicts and lists, 1000
64 KB `large` payloads are ~1 million containers that every full collection
inside a timed loop would walk, a cost of the benchmark, not of the codec. For the
same reason the native objects are frozen out of the collector's reach
(`gc.freeze`) while encode is timed and dropped before decode is.
"""

from __future__ import annotations

import gc
import importlib.metadata
import os
import platform
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import cycle
from typing import Any, Final, cast

import msgspec

from codec import REAL_CODECS, Codec, CodecName, codec_refusal, get_codec
from codec.protobuf_codec import protobuf_backend
from codec.registry import REGISTRY_TYPES
from codecbench.allocation import malloc_held, traced
from codecbench.results import (
    Alloc,
    BenchReport,
    CaseResult,
    Environment,
    Method,
    OpResult,
    Spread,
)
from codecbench.sampling import (
    Sample,
    measure,
    time_calls,
    time_decode_read,
    time_empty,
)
from loadgen.payloads import DEFAULT_LARGE_BYTES, make_payloads
from schemas.errors import ConfigError
from schemas.registry import SCHEMA_NAMES, SCHEMAS, SchemaName
from schemas.shape import MessageShape
from schemas.user import synthetic
from schemas.user.loader import UserSchema, load_schema
from schemas.wire_shape import shape_of
from service import __version__
from service.logic.builtin import _LOGIC, _user_logic
from service.logic.field_reader import read_every_field
from service.logic.named_fields import field_paths, read_named_fields

Step = Callable[[Any, dict[int, float]], None]
Progress = Callable[[str], None]

DEFAULT_POOL_SIZE: Final = 1000
"""The load generator's default pool: distinct messages, cycled."""
DEFAULT_REPEATS: Final = 10
DEFAULT_WARMUPS: Final = 1
DEFAULT_MIN_TIME_S: Final = 0.05
"""A sample lasts 50-100 ms: long against the clock's resolution and a scheduler
tick (4 ms), short enough that a case (3 operations, each calibrated, warmed and
sampled 10 times, plus the allocation passes) takes ~4 s."""
DEFAULT_ALLOC_CALLS: Final = 100
"""Allocations barely vary between messages of a profile; 100 calls average out
the spread of item counts (2-4 items per order)."""

_LIBRARIES: Final = ("msgspec", "pydantic", "pydantic-core", "orjson", "protobuf")


class Pool:
    """One profile's seeded payloads, stored as MessagePack until a codec needs them.

    Args:
        schema: the profile, or a user's schema (`--schemas`): its synthetic
            payloads, its logic reading every field, named by its class.
        method: size, seed and `large` size of the pool.
    """

    def __init__(self, schema: SchemaName | UserSchema, method: Method) -> None:
        self.forms: SchemaName | UserSchema = schema
        if isinstance(schema, UserSchema):
            self.schema: str = schema.name.rpartition(":")[2]
            self.shape = schema.shape
            self.logic: Step = _user_logic(schema)
            payloads = synthetic.make_payloads(
                schema.shape, method.pool_size, seed=method.seed
            )
        else:
            self.schema, self.logic = schema, _LOGIC[schema]
            self.shape = shape_of(SCHEMAS[schema])
            payloads = make_payloads(
                schema,
                method.pool_size,
                seed=method.seed,
                large_bytes=method.large_bytes,
            )
        encode = msgspec.msgpack.Encoder().encode
        self._packed = [encode(p) for p in payloads]

    def builtins(self) -> Iterator[dict[str, Any]]:
        """The payloads as dicts, one at a time (MessagePack keeps every value exact)."""
        decode = msgspec.msgpack.Decoder(dict[str, Any]).decode
        for packed in self._packed:
            yield decode(packed)


@contextmanager
def _frozen_heap() -> Iterator[None]:
    """Move every object alive now out of the collector's reach for the block."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _op(sample: Sample, method: Method, alloc: Alloc) -> OpResult:
    us, loops, gc_rate = measure(
        sample,
        min_time_s=method.min_time_s,
        warmups=method.warmups,
        repeats=method.repeats,
    )
    return OpResult(us=us, loops=loops, gc=gc_rate, alloc=alloc)


def measure_case(
    codec_name: CodecName, pool: Pool, method: Method, *, framed: bool = False
) -> CaseResult:
    """Measure encode, decode and decode+read of one codec on one profile's pool.

    With ``framed``, the codec behind the schema registry's frame
    (`codec.registry`), its schema in an in-memory registry (asked once per id, as
    the worker asks a real one): the row `<codec>+confluent`, beside its twin.

    Raises:
        DecodeError: the codec cannot decode its own encoding of the pool.
        LogicError: the schema's logic rejects a pool message.
    """
    codec: Codec[Any] = get_codec(codec_name, pool.forms)
    if framed:
        codec = _framed(codec)
    step = pool.logic
    natives = [codec.from_builtins(b) for b in pool.builtins()]
    wire = [codec.encode(obj) for obj in natives]
    first = wire[: method.alloc_calls]
    totals: dict[int, float] = {}
    for data in first:  # checks the pool, warms caches, fills the sink's keys
        step(codec.decode(data), totals)

    with _frozen_heap():
        encode = codec.encode
        encode_alloc = traced(encode, natives[: method.alloc_calls])
        encode_op = _op(time_calls(encode, cycle(natives)), method, encode_alloc)
    del natives
    gc.collect()

    decode = codec.decode_unchecked
    decode_alloc = traced(decode, first)
    decode_op = _op(time_calls(decode, cycle(wire)), method, decode_alloc)

    def decode_read(data: bytes) -> object:
        obj = decode(data)
        step(obj, totals)
        return obj

    read_alloc = traced(decode_read, first)
    read_sample = time_decode_read(decode, step, totals, cycle(wire))
    read_all, read_fields = _reads(pool.shape, method)
    extra = [
        _op_reading(decode, reader, first, wire, method)
        for reader in (read_all, read_fields)
    ]
    return CaseResult(
        codec=codec.name,
        profile=pool.schema,
        wire_bytes=sum(map(len, wire)) / len(wire),
        decode=decode_op,
        decode_read=_op(read_sample, method, read_alloc),
        encode=encode_op,
        malloc_held_bytes=malloc_held(decode, first),
        read_all=extra[0],
        read_fields=extra[1],
    )


def _framed(codec: Codec[Any]) -> Codec[Any]:
    from codec.registry import frame_codec
    from codec.registry.memory import InMemoryRegistry

    framed = frame_codec(codec, InMemoryRegistry())
    framed.register("bench-value")
    return framed


def _reads(shape: MessageShape, method: Method) -> tuple[Step, Step]:
    """The two reading steps: every field, and `method.read_fields` only.

    Both count the values read into one key, the same one line for every codec,
    so the loop around the read costs every codec the same.
    """
    every = read_every_field(shape)
    named = read_named_fields(shape, field_paths(shape, method.read_fields))

    def read_all(obj: Any, totals: dict[int, float]) -> None:
        totals[0] = every(obj)

    def read_fields(obj: Any, totals: dict[int, float]) -> None:
        totals[0] = named(obj)

    return read_all, read_fields


def _op_reading(
    decode: Callable[[bytes], Any],
    step: Step,
    first: list[bytes],
    wire: list[bytes],
    method: Method,
) -> OpResult:
    totals: dict[int, float] = {}

    def decode_step(data: bytes) -> object:
        obj = decode(data)
        step(obj, totals)
        return obj

    alloc = traced(decode_step, first)
    return _op(time_decode_read(decode, step, totals, cycle(wire)), method, alloc)


def check_codecs(codecs: Sequence[str]) -> tuple[CodecName, ...]:
    """`codecs` as registry keys, duplicates dropped, order kept.

    Raises:
        ConfigError: a name is not a wire codec, or none is given.
    """
    for name in codecs:
        if name not in REAL_CODECS:
            raise ConfigError(
                f"--codecs: {name!r} is not a wire codec; "
                f"choose from {','.join(REAL_CODECS)}"
            )
    if not codecs:
        raise ConfigError("--codecs: give at least one codec")
    return tuple(dict.fromkeys(cast(Sequence[CodecName], codecs)))


def check_profiles(
    profiles: Sequence[str], *, allow_none: bool = False
) -> tuple[SchemaName, ...]:
    """`profiles` as schema names, duplicates dropped, order kept.

    Raises:
        ConfigError: a name is not a profile, or none is given (unless
            `allow_none`: users' schemas are measured).
    """
    for name in profiles:
        if name not in SCHEMA_NAMES:
            raise ConfigError(
                f"--profiles: {name!r} is not a profile; "
                f"choose from {','.join(SCHEMA_NAMES)}"
            )
    if not profiles and not allow_none:
        raise ConfigError("--profiles: give at least one profile")
    return tuple(dict.fromkeys(cast(Sequence[SchemaName], profiles)))


def environment(loop_overhead: Spread) -> Environment:
    """The interpreter, platform and library versions of this process."""
    threshold = gc.get_threshold()
    return Environment(
        version=__version__,
        python=f"{platform.python_implementation()} {platform.python_version()}",
        platform=platform.platform(),
        cpu_count=os.cpu_count(),
        libraries={name: importlib.metadata.version(name) for name in _LIBRARIES},
        protobuf_backend=protobuf_backend(),
        gc_thresholds=(threshold[0], threshold[1], threshold[2]),
        loop_overhead_us=loop_overhead,
    )


def run(
    codecs: Sequence[str] = REAL_CODECS,
    profiles: Sequence[str] = SCHEMA_NAMES,
    *,
    pool_size: int = DEFAULT_POOL_SIZE,
    repeats: int = DEFAULT_REPEATS,
    warmups: int = DEFAULT_WARMUPS,
    min_time_s: float = DEFAULT_MIN_TIME_S,
    seed: int = 0,
    large_bytes: int = DEFAULT_LARGE_BYTES,
    alloc_calls: int = DEFAULT_ALLOC_CALLS,
    read_fields: str = "3",
    progress: Progress | None = None,
    schemas: Sequence[str] = (),
    framing: str = "none",
    run_validators: bool = False,
) -> BenchReport:
    """Measure every codec on every profile; the library entry point of `codec-bench`.

    Args:
        codecs: wire codec registry keys (`auto` has no wire format of its own).
        profiles: payload profiles: `small`, `medium`, `large`.
        pool_size: distinct seeded payloads per profile, cycled.
        repeats: kept samples per figure.
        warmups: discarded samples after calibration.
        min_time_s: the shortest sample, in seconds.
        seed: the payload generator's seed.
        large_bytes: JSON size of a `large` payload.
        alloc_calls: calls per allocation pass.
        read_fields: what the `+k` column reads: dotted paths `a,b.c` (each
            profile must have them), or a count k (the first k top-level fields).
        progress: called with `codec profile` before each case.
        schemas: users' schemas (`MODULE:NAME`) measured beside the profiles,
            each named by its class; a codec that cannot carry one is left out of
            it (`BenchReport.left_out`).
        framing: `confluent`: each codec with a registry type also measured
            framed, the row `<codec>+confluent` right after its twin.
        run_validators: the users' schemas' Structs run their after validators
            (`--run-validators`, `schemas.user.struct_validators`).

    Returns:
        The report; `report.case(codec, profile)` picks one result.

    Raises:
        ConfigError: an argument is invalid (checked before anything is built).
    """
    method = Method(
        pool_size=pool_size,
        repeats=repeats,
        warmups=warmups,
        min_time_s=min_time_s,
        seed=seed,
        large_bytes=large_bytes,
        alloc_calls=alloc_calls,
        read_fields=read_fields,
    )
    names = check_codecs(codecs)
    built = check_profiles(profiles, allow_none=bool(schemas))
    users = [load_schema(spec) for spec in dict.fromkeys(schemas)]
    if run_validators:
        users = [u.with_validators() for u in users]
    for schema in built:
        try:
            field_paths(shape_of(SCHEMAS[schema]), read_fields)
        except ConfigError as exc:
            raise ConfigError(f"--read-fields: {schema}: {exc}") from None
    for user in users:
        try:
            field_paths(user.shape, read_fields)
        except ConfigError as exc:
            raise ConfigError(f"--read-fields: {user.name}: {exc}") from None
    overhead, _, _ = measure(
        time_empty(cycle([b""] * pool_size)),
        min_time_s=min_time_s,
        warmups=warmups,
        repeats=repeats,
    )
    results: list[CaseResult] = []
    left_out: list[str] = []
    every: list[SchemaName | UserSchema] = [*built, *users]
    for forms in every:
        pool = Pool(forms, method)
        for name in names:
            why = codec_refusal(name, forms) if isinstance(forms, UserSchema) else None
            if why is not None:
                left_out.append(f"{name} on {pool.schema}: {why}")
                continue
            if progress is not None:
                progress(f"{name} {pool.schema}")
            results.append(measure_case(name, pool, method))
            if framing == "confluent" and name in REGISTRY_TYPES:
                results.append(measure_case(name, pool, method, framed=True))
        del pool
    return BenchReport(
        method=method,
        environment=environment(overhead),
        results=results,
        left_out=left_out,
    )
