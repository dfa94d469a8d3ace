"""The output topic's writer: each handled message's result, encoded by the codec.

Chosen once at construction (STYLE.md 26): with the stub logics the result is the
decoded message itself, re-encoded; with a team's handler (`--logic MODULE:CALLABLE`)
it is what the handler returned, and nothing is written when it returned None. A
returned object of the codec's own type is encoded as is; any other (a dict of the
schema's fields, another codec's object, e.g. a pydantic model the handler built) is
first converted to the codec's type (`from_builtins`, not for hot paths: it is the
team's choice to return another type). What does not fit the schema raises, and the
loop dead-letters the message as unencodable. The original headers are kept, with
the codec's `content-type`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from codec import Codec, native_to_builtins
from service.delivery.gated_writes import ConfirmedProducer
from service.kafka.headers import CONTENT_TYPE
from service.kafka.protocols import KafkaMessage

Emit = Callable[[KafkaMessage, Any, object], None]
"""Writes one handled message's result: (message, decoded object, step's return)."""


def emitter(
    codec: Codec[Any], producer: ConfirmedProducer, topic: str, *, results: bool
) -> Emit:
    """The writer for `topic`.

    Args:
        codec: the output codec (the worker's).
        producer: the confirmed producer the batch's writes go through.
        topic: the output topic.
        results: True for a team's handler: write its return value (None: nothing);
            False for the stubs: write the decoded message.
    """
    encode = codec.encode
    content_type = (CONTENT_TYPE, codec.content_type.encode())
    produce = producer.produce

    def headers_of(m: KafkaMessage) -> list[tuple[str, bytes]]:
        headers = [h for h in m.headers() or () if h[0] != CONTENT_TYPE]
        headers.append(content_type)
        return headers

    if not results:

        def emit_message(m: KafkaMessage, obj: Any, out: object) -> None:
            produce(
                topic, key=m.key(), value=encode(obj), headers=headers_of(m), source=m
            )

        return emit_message

    to_native = native_of(codec)

    def emit_result(m: KafkaMessage, obj: Any, out: object) -> None:
        if out is not None:
            value = encode(to_native(out))
            produce(topic, key=m.key(), value=value, headers=headers_of(m), source=m)

    return emit_result


def native_of(codec: Codec[Any]) -> Callable[[object], Any]:
    """What turns a handler's result into an object `codec.encode` takes."""
    native_type = codec.native_type
    from_builtins = codec.from_builtins

    def to_native(out: object) -> Any:
        if type(out) is native_type:
            return out
        data = out if isinstance(out, Mapping) else native_to_builtins(out)
        return from_builtins(dict(data))

    return to_native
