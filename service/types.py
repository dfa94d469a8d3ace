"""Shared type aliases and Protocols for confluent-kafka objects.

confluent-kafka's `Message` cannot be created from Python, so the service describes
what it uses with Protocols; tests pass fakes that satisfy them.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeAlias

Headers: TypeAlias = list[tuple[str, bytes | None]]
"""Kafka record headers as confluent-kafka returns them."""


class KafkaMessage(Protocol):
    """The parts of `confluent_kafka.Message` the worker reads."""

    def error(self) -> Any: ...
    def topic(self) -> str | None: ...
    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def headers(self) -> Any: ...
    def timestamp(self) -> tuple[int, int]: ...


class KafkaConsumer(Protocol):
    """The parts of `confluent_kafka.Consumer` the worker's loop calls."""

    def consume(self, num_messages: int = ..., timeout: float = ...) -> list[Any]: ...
    def store_offsets(
        self, message: Any = ..., offsets: list[Any] | None = ...
    ) -> None: ...
    def assignment(self) -> list[Any]: ...
    def position(self, partitions: list[Any]) -> list[Any]: ...


class KafkaProducer(Protocol):
    """The parts of `confluent_kafka.Producer` the worker calls."""

    def produce(
        self,
        topic: str,
        value: str | bytes | None = ...,
        key: str | bytes | None = ...,
        partition: int = ...,
        callback: Any = ...,
        on_delivery: Any = ...,
        timestamp: int = ...,
        headers: Any = ...,
    ) -> None: ...
    def poll(self, timeout: float = ...) -> int: ...
    def flush(self, timeout: float = ...) -> int: ...
