"""The framed cases beside the peers' path: confluent-kafka's deserializers on the
run's own framed messages, in process, after the Kafka cases.

For each framed case (`<codec>+confluent`) and built-in profile: a sample of the
load generator's pool (its first `SAMPLE` payloads, the measured seed), framed as
the load generator frames them (the schema registered in the run's registry,
which gives back the id the cases used), then decoded three ways in one process:
the unframed codec on the unframed values, the framed codec (the worker's call),
and confluent-kafka's deserializer for the schema type, fetching the writer's
schema from the same registry (Avro) or given it (Protobuf's generated class, the
JSON Schema), as Quix Streams and Bytewax do with a registry configured. CPU time
(`time.thread_time_ns`), best of `SAMPLES` passes after a warm-up pass (schemas
fetched, caches filled). Taken after the cases, never during them: a tight loop
here would steal the CPU the workers are measured on. confluent-kafka's Avro and
JSON deserializers return dicts, the codecs typed objects; its JSON deserializer
validates each value against the JSON Schema.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from rich.console import Console

from abrunner.config import AbSettings
from abrunner.peer_figures import PeerDecode
from abrunner.plan import MEASURED_SEED, Case, Plan
from abrunner.results import Report
from codec import get_codec
from codec.registry import REGISTRY_TYPES, RegistryAccess, RegistryClient, frame_codec
from loadgen.payloads import DEFAULT_LARGE_BYTES, make_payloads

SAMPLE: Final = 200
"""Messages decoded per pass: a pass of the slowest (confluent-kafka's JSON
deserializer, ~0.4 ms a medium message here) stays under 0.1 s."""
SAMPLES: Final = 5
"""Passes kept (the best is reported), after one warm-up pass."""
SUBJECT: Final = "codec-ab-peers-{codec}-value"
"""Where the sample's schema is registered: an equal schema keeps its id."""

_PEERS: Final = {
    "AVRO": "AvroDeserializer",
    "PROTOBUF": "ProtobufDeserializer",
    "JSON": "JSONDeserializer",
}


def best_us(decode: Callable[[bytes], Any], wire: Sequence[bytes]) -> float:
    """CPU microseconds per message of ``decode`` over ``wire``: the best pass."""
    for data in wire:  # warm-up: the schema fetched, caches filled
        decode(data)
    best = float("inf")
    for _ in range(SAMPLES):
        t0 = time.thread_time_ns()
        for data in wire:
            decode(data)
        best = min(best, (time.thread_time_ns() - t0) / len(wire) / 1000)
    return best


def _peer(kind: str, plain: Any, framed: Any, sr: Any) -> Callable[[bytes], Any]:
    """confluent-kafka's deserializer for schema type ``kind``, bound to a context."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    ctx = SerializationContext("codec-ab-peers", MessageField.VALUE)
    deserializer: Any
    if kind == "AVRO":
        deserializer = AvroDeserializer(sr)
    elif kind == "PROTOBUF":
        conf = {"use.deprecated.format": False}
        deserializer = ProtobufDeserializer(plain.native_type, conf)
    else:
        deserializer = JSONDeserializer(framed.schema_text())
    return functools.partial(deserializer, ctx=ctx)


def _their_client(access: RegistryAccess) -> Any:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    conf: dict[str, Any] = {"url": access.url}
    if access.username is not None:
        conf["basic.auth.user.info"] = f"{access.username}:{access.password or ''}"
    if access.ca_file:
        conf["ssl.ca.location"] = access.ca_file
    return SchemaRegistryClient(conf)


def measure_one(case: Case, access: RegistryAccess, sr: Any) -> PeerDecode:
    """The three decodes of ``case``'s sample (see the module)."""
    profile, name = case.profile, case.wire_codec
    plain = get_codec(name, profile.schema)  # type: ignore[arg-type]
    framed = frame_codec(get_codec(name, profile.schema), RegistryClient(access))  # type: ignore[arg-type]
    framed.register(SUBJECT.format(codec=name))
    payloads = make_payloads(
        profile.schema,  # type: ignore[arg-type]
        SAMPLE,
        seed=MEASURED_SEED,
        large_bytes=profile.large_bytes or DEFAULT_LARGE_BYTES,
    )
    natives = [plain.from_builtins(p) for p in payloads]
    kind = REGISTRY_TYPES[name]
    return PeerDecode(
        codec=case.codec,
        profile=profile.label,
        messages=len(natives),
        unframed_us=best_us(plain.decode_unchecked, [plain.encode(n) for n in natives]),
        framed_us=best_us(
            framed.decode_unchecked, wire := [framed.encode(n) for n in natives]
        ),
        peer_us=best_us(_peer(kind, plain, framed, sr), wire),
        peer=_PEERS[kind],
    )


def measure(plan: Plan, access: RegistryAccess, console: Console) -> list[PeerDecode]:
    """Every framed case's figures; a case that cannot be measured says why.

    A user's schema or a replay gets none (built-in payloads only)."""
    framed = {
        (c.codec, c.profile.label): c
        for c in plan.cases()
        if c.framed and not c.profile.user and plan.replay is None
    }
    if not framed:
        return []
    console.print(
        f"decoding {SAMPLE} framed messages per framed case in process: the framed "
        "codec and confluent-kafka's deserializer ..."
    )
    found = []
    sr = _their_client(access)
    try:
        for case in framed.values():
            try:
                found.append(measure_one(case, access, sr))
            except Exception as exc:  # an optional figure must not cost the run
                found.append(
                    PeerDecode(
                        codec=case.codec,
                        profile=case.profile.label,
                        messages=0,
                        unframed_us=0.0,
                        framed_us=0.0,
                        peer_us=0.0,
                        peer=_PEERS[REGISTRY_TYPES[case.wire_codec]],
                        error=f"{type(exc).__name__}: {exc}",
                    )
                )
    finally:
        sr.__exit__(None, None, None)
    return found


def for_report(
    settings: AbSettings, plan: Plan, report: Report, console: Console
) -> list[PeerDecode]:
    """`measure` for a framed run, against the run's registry; the report's own
    (none) for an unframed or interrupted run."""
    if plan.registry_url is None or report.interrupted:
        return report.peers
    registry = settings.registry.model_copy(update={"url": plan.registry_url})
    return measure(plan, registry.access(), console)
