"""Every exception the project raises on purpose, in one tree.

It lives in the bottom package so that every part (schemas, codecs, worker, load
generator, A/B runner, local broker) raises from the same tree without importing
a layer above it.

```
ServiceError
├── ConfigError              bad configuration: exit status 2, Kafka untouched
├── CodecError
│   ├── DecodeError          a payload that cannot become a message (poison)
│   └── EncodeError          a message that cannot become bytes
├── LogicError               the business logic failed on one message (poison)
├── DeliveryError            a dead-letter or output write was not acknowledged
├── FatalError               the worker's loop cannot go on (batch not stored)
├── LoadgenError             a load-generation run could not start or a producer died
├── RecordingError           a file is not a valid traffic recording
├── LocalKafkaError          the local broker could not be resolved, started or stopped
└── RunnerError              an A/B case could not be measured
```

Error texts never include payload bytes or decoded values: they name the codec, the
exception type and, where the library gives one, the path of the bad field.
"""

from __future__ import annotations


class ServiceError(Exception):
    """Root of every error the service raises on purpose."""


class ConfigError(ServiceError):
    """The configuration is invalid; the message names the field, value and rule."""


class CodecError(ServiceError):
    """A codec failed.

    Attributes:
        codec: the registry key of the codec that failed.
        reason: a short, bounded label (used as a metric label and DLQ header).
        cause_type: the qualified name of the library exception, if any.
    """

    def __init__(
        self, message: str, *, codec: str, reason: str, cause_type: str = ""
    ) -> None:
        super().__init__(message)
        self.codec = codec
        self.reason = reason
        self.cause_type = cause_type


class DecodeError(CodecError):
    """A payload could not be decoded into a message."""


class EncodeError(CodecError):
    """A message could not be encoded."""


class LogicError(ServiceError):
    """The business logic raised while handling one decoded message."""


class DeliveryError(ServiceError):
    """A produce to the dead-letter or output topic was not acknowledged."""


class FatalError(ServiceError):
    """The worker's loop cannot go on; offsets of the current batch were not stored."""


class LoadgenError(ServiceError):
    """A load-generation run could not start, or a producer process failed."""


class RecordingError(ServiceError, ValueError):
    """A file is not a valid traffic recording."""


class LocalKafkaError(ServiceError, RuntimeError):
    """The local broker could not be resolved, started or stopped."""


class RunnerError(ServiceError, RuntimeError):
    """An A/B case could not be measured (a worker or load generator failed)."""
