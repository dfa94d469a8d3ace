"""The framed cases' in-process figures beside the peers' path: `PeerDecode`.

Kept out of `abrunner.results` (at its size limit); report.json holds them as
`Report.peers`.
"""

from __future__ import annotations

import msgspec


class PeerDecode(msgspec.Struct, frozen=True, kw_only=True):
    """One framed codec on one profile: the same sample of the run's framed
    messages decoded in process three ways, CPU microseconds per message (best
    of the samples, `time.thread_time_ns`), one process, a moment apart.

    Attributes:
        codec: the framed case (`avro+confluent`).
        profile: the payload profile's label.
        messages: the sample's size: the first of the load generator's pool
            (the measured seed), framed as the load generator frames them, with
            the id the run's registry gave.
        unframed_us: the unframed codec's `decode_unchecked` on the same values,
            unframed (the twin's decode).
        framed_us: the framed codec's `decode_unchecked` (the worker's call).
        peer_us: confluent-kafka's deserializer for the schema type
            (`AvroDeserializer`, `ProtobufDeserializer`, `JSONDeserializer`), as
            Quix Streams and Bytewax call it with a registry configured.
        peer: which deserializer.
        error: why the figures are missing (then the figures are 0).
    """

    codec: str
    profile: str
    messages: int
    unframed_us: float
    framed_us: float
    peer_us: float
    peer: str
    error: str | None = None
