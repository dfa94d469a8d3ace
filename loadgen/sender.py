"""The per-message send loops: stamp each message and hand it to `produce()`.

The producer loop calls a `Sender` once per slice (every 1-50 ms) with the slice's
first seq, its size and its intended send times; the sender is the only code that
runs per message. Which loop runs is chosen once, before the run (STYLE.md 6.4).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable

from loadgen.config import LoadgenSettings
from loadgen.source import Source, writer_codec
from service.kafka.headers import CONTENT_TYPE, RUN_ID, SENT_NS, SEQ

Stamps = Iterable[int] | int
"""Intended send times (ns since the epoch) of a slice: one each, or one for all."""

Sender = Callable[[int, int, Stamps], int]
"""`send(first_seq, n, stamps_ns) -> sent`: produce seqs first, first+stride, ..."""

SenderFactory = Callable[[Callable[..., None], LoadgenSettings, Source, int], Sender]
"""`make_sender`'s signature: the loop for `produce`, the settings, the source and
the stride, chosen once before the run."""


def make_sender(
    produce: Callable[..., None],
    s: LoadgenSettings,
    source: Source,
    stride: int,
) -> Sender:
    """The hot loop for this run's options, chosen once.

    Performance note: the common case (a pre-encoded pool, one content type, keys
    from the pool) builds 4 header tuples and calls `produce()`; anything else
    takes the general loop, which costs ~0.3 us more per message. Header names are
    module globals: on 3.11 a global load costs the same as a literal (a closure
    variable costs ~10 ns more per message).
    """
    topic, values, keys, count = s.topic, source.values, source.keys, len(source.values)
    run_h = (RUN_ID, s.run_id.encode())
    general = (
        source.content_type is None
        or source.extra_headers is not None
        or source.partitions is not None
        or source.builtins is not None
        or s.key_kind == "seq"
    )
    if general:
        return _general_sender(produce, s, source, stride, run_h)
    ct_h = (CONTENT_TYPE, source.content_type)

    def send(first: int, n: int, stamps: Stamps) -> int:
        seq = first
        seqs = range(first, first + n * stride, stride)
        # Positional (topic, value, key, partition, callback, on_delivery,
        # timestamp, headers): 0.4 us less per message than keywords. Naming the
        # header list `h` costs nothing measurable: ~355 ns a message either way
        # with a no-op produce(), so the calls fit on one line each.
        try:
            if isinstance(stamps, int):  # unthrottled: one stamp per burst
                sent_h, ms = (SENT_NS, b"%d" % stamps), stamps // 1_000_000
                for seq in seqs:
                    i = seq % count
                    h = [sent_h, ct_h, (SEQ, b"%d" % seq), run_h]
                    produce(topic, values[i], keys[i], -1, None, None, ms, h)
                return n
            for seq, ns in zip(seqs, stamps, strict=False):
                i = seq % count
                h = [(SENT_NS, b"%d" % ns), ct_h, (SEQ, b"%d" % seq), run_h]
                produce(topic, values[i], keys[i], -1, None, None, ns // 1_000_000, h)
        except BufferError:
            return (seq - first) // stride
        return n

    return send


def _general_sender(
    produce: Callable[..., None],
    s: LoadgenSettings,
    source: Source,
    stride: int,
    run_h: tuple[str, bytes],
) -> Sender:
    """The loop for replays, live encoding and seq keys (per-message lookups)."""
    topic, values, keys, count = s.topic, source.values, source.keys, len(source.values)
    value_of: Callable[[int], bytes | None] = values.__getitem__
    if source.builtins is not None:
        codec = writer_codec(s, s.forms)
        natives, encode = (
            [codec.from_builtins(b) for b in source.builtins],
            codec.encode,
        )
        value_of = lambda i: encode(natives[i])  # noqa: E731
    cts = source.content_types or [source.content_type] * count
    pre = [((CONTENT_TYPE, ct),) if ct is not None else () for ct in cts]
    post = [(run_h, *extra) for extra in source.extra_headers or [()] * count]
    parts = source.partitions or [-1] * count
    seq_keys = s.key_kind == "seq" and s.replay is None

    def send(first: int, n: int, stamps: Stamps) -> int:
        seq = first
        if isinstance(stamps, int):
            stamps = itertools.repeat(stamps)
        try:
            for seq, ns in zip(
                range(first, first + n * stride, stride), stamps, strict=False
            ):
                i = seq % count
                key = b"%d" % seq if seq_keys else keys[i]
                h = [(SENT_NS, b"%d" % ns), *pre[i], (SEQ, b"%d" % seq), *post[i]]
                produce(
                    topic, value_of(i), key, parts[i], None, None, ns // 1_000_000, h
                )
        except BufferError:
            return (seq - first) // stride
        return n

    return send
