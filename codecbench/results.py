"""The benchmark's figures as typed Structs: a figure, an operation, a case, a report.

`run` returns a `BenchReport`; `--json` and `--out` write `msgspec.json.encode(report)`,
read back with `msgspec.json.decode(data, type=BenchReport)`. Times are CPU
microseconds per message; bytes are per message (per call); GC figures are
collections per 1,000 messages.
"""

from __future__ import annotations

from typing import Final

import msgspec

from schemas.errors import ConfigError

_MIN_LARGE_BYTES: Final = 256
"""The load generator's lower bound for `--large-bytes`: both accept the same sizes."""


class Spread(msgspec.Struct, frozen=True, kw_only=True):
    """One timing figure over the kept samples, in CPU microseconds per message.

    Attributes:
        median: the median sample: the figure to quote.
        min: the fastest sample.
        max: the slowest sample.
        stdev: the samples' standard deviation (0 with a single sample).
        samples: samples kept (warm-up and calibration samples are not).
    """

    median: float
    min: float
    max: float
    stdev: float
    samples: int


class GcRate(msgspec.Struct, frozen=True, kw_only=True):
    """Garbage collections per 1,000 messages during the kept samples, per generation.

    Counted from `gc.get_stats()` before and after each sample, outside the clock.
    """

    gen0: float
    gen1: float
    gen2: float


class Alloc(msgspec.Struct, frozen=True, kw_only=True):
    """Bytes allocated per call as tracemalloc sees them (a separate, untimed pass).

    Counted: every block taken through Python's allocators (the raw, mem and object
    domains), which covers every Python object msgspec, pydantic-core, orjson, json
    and upb create. Not counted: memory a C or Rust library takes from its own
    allocator, notably upb's arenas, where protobuf keeps a parsed message (see
    `CaseResult.malloc_held_bytes`). The pass's own bookkeeping is measured with a
    call that allocates nothing and subtracted.

    Attributes:
        peak_bytes: mean, over the calls, of the highest traced memory during one
            call above the level before it: the result plus the temporaries alive at
            the busiest moment (the two-pass JSON paths' dict trees show here).
        retained_bytes: mean traced bytes still allocated after the call while its
            result is held: the result's footprint (for encode, the bytes object).
        calls: calls measured (the first messages of the pool).
    """

    peak_bytes: float
    retained_bytes: float
    calls: int


class OpResult(msgspec.Struct, frozen=True, kw_only=True):
    """One operation (decode, decode+read or encode) of one codec on one profile.

    Attributes:
        us: CPU microseconds per message.
        loops: messages per sample, calibrated so a sample takes `min_time_s` to
            twice that.
        gc: collections per 1,000 messages during the kept samples.
        alloc: traced allocation per call.
    """

    us: Spread
    loops: int
    gc: GcRate
    alloc: Alloc


class CaseResult(msgspec.Struct, frozen=True, kw_only=True):
    """Every figure measured for one codec on one profile.

    Attributes:
        codec: the codec's registry key.
        profile: the payload profile (schema) name.
        wire_bytes: mean encoded size of the pool's messages.
        decode: the library decoder alone (`codec.decode_unchecked`, what the
            worker's hot loop calls); each object is dropped at once.
        decode_read: decode, then the schema's stub logic reading every field a
            consumer would (`service.logic.builtin`): the fair figure for protobuf, whose
            upb backend parses lazily.
        encode: `codec.encode` of the pool's native objects.
        read_all: decode, then every field read into Python values
            (`service.logic.field_reader`): the column that compares like with like across
            eager and lazy codecs (None in reports written before it existed).
        read_fields: decode, then only the `--read-fields` fields read
            (`service.logic.named_fields`): what a lazy format can save a narrow consumer.
        malloc_held_bytes: C heap (glibc `mallinfo2`, in-use bytes) per decoded
            object while a batch of them is held, measured without tracemalloc:
            where upb's arenas show. It overlaps `decode.alloc` for Python objects
            above 512 bytes (pymalloc hands those to malloc), so the two are not
            to be added. None off glibc.
    """

    codec: str
    profile: str
    wire_bytes: float
    decode: OpResult
    decode_read: OpResult
    encode: OpResult
    malloc_held_bytes: float | None
    read_all: OpResult | None = None
    read_fields: OpResult | None = None


class Method(msgspec.Struct, frozen=True, kw_only=True):
    """How the figures were taken (validated on construction).

    Attributes:
        pool_size: distinct seeded payloads per profile, cycled by every loop.
        repeats: kept samples per figure.
        warmups: samples discarded after calibration.
        min_time_s: the shortest sample; calibration doubles the loop count until a
            sample takes at least this long.
        seed: the payload generator's seed.
        large_bytes: JSON size of a `large` payload.
        alloc_calls: calls per allocation pass (the pool's first messages).
        clock: the CPU clock read around each sample.

    Raises:
        ConfigError: a value is out of range; the message names the flag.
    """

    pool_size: int
    repeats: int
    warmups: int
    min_time_s: float
    seed: int
    large_bytes: int
    alloc_calls: int
    clock: str = "time.thread_time_ns"
    read_fields: str = "3"
    """The fields the `+k` column reads: dotted paths, or a count k (the first k)."""

    def __post_init__(self) -> None:
        at_least_one = {
            "--pool-size": self.pool_size,
            "--repeats": self.repeats,
            "--alloc-calls": self.alloc_calls,
        }
        for flag, value in at_least_one.items():
            if value < 1:
                raise ConfigError(f"{flag} must be at least 1, got {value}")
        if self.warmups < 0:
            raise ConfigError(f"--warmups must be at least 0, got {self.warmups}")
        if not self.min_time_s > 0:
            raise ConfigError(f"--min-time must be positive, got {self.min_time_s}")
        if self.large_bytes < _MIN_LARGE_BYTES:
            raise ConfigError(
                f"--large-bytes must be at least {_MIN_LARGE_BYTES}, "
                f"got {self.large_bytes}"
            )


class Environment(msgspec.Struct, frozen=True, kw_only=True):
    """Where the figures were taken.

    Attributes:
        version: the project's version.
        python: the interpreter's version and implementation.
        platform: `platform.platform()`.
        cpu_count: logical CPUs.
        libraries: versions of the codec libraries.
        protobuf_backend: the protobuf runtime (`upb` for the published wheels).
        gc_thresholds: `gc.get_threshold()` during the run.
        loop_overhead_us: one empty iteration of the sample loop (the pool cycle);
            included in every timing, not subtracted.
    """

    version: str
    python: str
    platform: str
    cpu_count: int | None
    libraries: dict[str, str]
    protobuf_backend: str
    gc_thresholds: tuple[int, int, int]
    loop_overhead_us: Spread


class BenchReport(msgspec.Struct, frozen=True, kw_only=True):
    """A whole run: its method, its environment and one result per codec and profile."""

    method: Method
    environment: Environment
    results: list[CaseResult]
    left_out: list[str] = []
    """"CODEC on SCHEMA: why" for each case of a user's schema (`--schemas`) a
    codec cannot carry, so not measured."""

    def case(self, codec: str, profile: str) -> CaseResult:
        """The result for `codec` on `profile`.

        Raises:
            KeyError: that pair was not measured.
        """
        for result in self.results:
            if result.codec == codec and result.profile == profile:
                return result
        raise KeyError((codec, profile))
