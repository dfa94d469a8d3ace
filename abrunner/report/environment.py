"""The environment a report was measured in: versions and machine facts."""

from __future__ import annotations

import importlib.metadata
import os
import platform
from pathlib import Path
from typing import Final

from abrunner.results import Environment

_LIBRARIES: Final = (
    "msgspec",
    "pydantic",
    "pydantic-core",
    "orjson",
    "protobuf",
    "prometheus-client",
    "confluent-kafka",
)


def environment(kafka_version: str) -> Environment:
    """Versions and machine facts that make the figures reproducible."""
    import confluent_kafka

    from codec.protobuf_codec import protobuf_backend

    cpu = "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return Environment(
        python=platform.python_version(),
        platform=platform.platform(),
        cpu_count=os.cpu_count(),
        cpu_model=cpu,
        kafka=kafka_version,
        librdkafka=confluent_kafka.libversion()[0],
        protobuf_backend=protobuf_backend(),
        libraries={name: importlib.metadata.version(name) for name in _LIBRARIES},
    )
