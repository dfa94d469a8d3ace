"""What a run sends: the payload pool (`Source`), built once before the first message.

A synthetic run encodes `pool_size` seeded payloads with the settings' codec; a
replay builds its `Source` from a recording (`loadgen.replay`). Message seq `k`
sends entry `k mod len(values)`, so the pool cycles for as long as the run lasts.

With `--framing confluent`, `writer_codec` registers the model's schema (derived for
the codec: Avro JSON, a protobuf descriptor, a JSON Schema) under the subject
`[registry] subject_strategy` names (TopicNameStrategy by default: `<topic>-value`),
once per process (an equal schema registered again keeps its id), and the values
carry the frame.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from codec import Codec, get_codec
from loadgen.config import LoadgenSettings
from loadgen.payloads import entity_field, make_payloads
from schemas.errors import LoadgenError
from schemas.registry import Schema
from schemas.user import synthetic
from schemas.user.loader import UserSchema

_ENTITY: Final = {"small": "id", "medium": "order_id", "large": "plan_id"}
"""The field each built-in profile keys its messages by (`key = "entity"`)."""


@dataclass
class Source:
    """What to send, indexed by seq modulo its length (built once, before the run).

    Attributes:
        values: encoded payloads.
        keys: message keys (None: no key).
        content_type: the one `content-type` of every message, if they share one.
        content_types: per message (a replay without transcoding), else None.
        extra_headers: recorded headers kept as they were (replay), else None.
        partitions: partition per message (replay with kept partitions), else None.
        times_s: recorded send times for a paced replay, else None.
        period_s: a paced replay's length, gap to its first message included.
        builtins: payloads to encode per message (`encode_live`), else None.
        not_carried: a replay's records left out, by `"<path>: <reason>"`.
        as_recorded: a replay's records sent byte for byte as recorded.
    """

    values: list[bytes | None]
    keys: list[bytes | None]
    content_type: bytes | None = None
    content_types: list[bytes | None] | None = None
    extra_headers: list[tuple[tuple[str, bytes | None], ...]] | None = None
    partitions: list[int] | None = None
    times_s: list[float] | None = None
    period_s: float = 0.0
    builtins: list[dict[str, Any]] | None = None
    not_carried: dict[str, int] = field(default_factory=dict)
    as_recorded: int = 0


def synthetic_source(s: LoadgenSettings) -> Source:
    """A pool of `pool_size` seeded payloads, encoded with the settings' codec.

    A user's schema gets payloads made from its types, sized by `s.synth_options`.
    """
    forms = s.forms
    codec = writer_codec(s, forms)
    if isinstance(forms, Schema):
        payloads = make_payloads(
            forms.name, s.pool_size, seed=s.seed, large_bytes=s.large_bytes
        )
        field = _ENTITY[forms.name]
    else:
        payloads = synthetic.make_payloads(
            forms.shape, s.pool_size, seed=s.seed, options=s.synth_options
        )
        field = entity_field(forms.shape) or ""
    values: list[bytes | None] = [
        codec.encode(codec.from_builtins(p)) for p in payloads
    ]
    entity = s.key_kind == "entity"
    keys = [str(p[field]).encode() if entity else None for p in payloads]
    return Source(
        values,
        keys,
        content_type=codec.content_type.encode(),
        builtins=payloads if s.encode_live else None,
    )


def value_bytes_sent(source: Source, s: LoadgenSettings, shard: int, sent: int) -> int:
    """Value bytes of seqs shard, shard+stride, ... (computed once, at the end).

    Seq s sends payload s mod L, so the payloads cycle every L / gcd(stride, L)
    messages: one cycle is summed, not every message of an hour-long run.
    """
    if s.encode_live and source.builtins is not None:
        codec = writer_codec(s, s.forms)
        sizes = np.array(
            [len(codec.encode(codec.from_builtins(b))) for b in source.builtins]
        )
    else:
        sizes = np.array([len(v or b"") for v in source.values])
    pool, stride = len(sizes), s.processes
    cycle = sizes[(shard + np.arange(pool // math.gcd(stride, pool)) * stride) % pool]
    laps, rest = divmod(sent, len(cycle))
    return int(laps * cycle.sum() + cycle[:rest].sum())


_IDS: Final[dict[tuple[str, str, str, str], int]] = {}
"""(registry URL, subject, codec, schema) -> the id registered in this process."""


def writer_codec(s: LoadgenSettings, forms: Schema | UserSchema) -> Codec[Any]:
    """The codec that writes the run's values: framed, with the registered id, if
    `s.framing` is `confluent`.

    Raises:
        LoadgenError: the registry did not answer, or refused the schema.
    """
    codec = get_codec(s.codec, forms)
    if s.framing == "none":
        return codec
    from codec.registry import RegistryClient, frame_codec
    from codec.registry.client import RegistryUnavailable

    framed = frame_codec(codec, RegistryClient(s.registry.access()))
    subject = s.registry.subject(s.topic, framed.record_name())
    key = (s.registry.url or "", subject, s.codec, s.schema_spec)
    if (known := _IDS.get(key)) is not None:
        framed.use_writer(known)
        return framed
    try:
        _IDS[key] = framed.register(subject)
    except (RegistryUnavailable, ValueError) as exc:
        raise LoadgenError(f"cannot register {subject!r}: {exc}") from None
    return framed
