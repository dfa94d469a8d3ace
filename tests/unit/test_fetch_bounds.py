"""The consumer's fetch sizes, in bytes of the wire and of inflated data, and the
memory they bound (`service.settings.consumer.memory_bound`)."""

from __future__ import annotations

import pytest

from schemas.errors import ConfigError
from service.settings.consumer import INFLATION, ConsumerSettings, memory_bound
from service.settings.worker import load_settings

MIB = 1 << 20


class TestFetchSettings:
    """Each bound reaches librdkafka; one that librdkafka would refuse is named."""

    def test_defaults_reach_the_consumer(self) -> None:
        conf = load_settings().consumer_config()
        assert conf["fetch.max.bytes"] == 16 * MIB
        assert conf["max.partition.fetch.bytes"] == 64 * 1024
        assert conf["receive.message.max.bytes"] == 32 * MIB
        assert conf["queued.max.messages.kbytes"] == 64 * 1024

    def test_a_response_smaller_than_a_fetch_is_refused(self) -> None:
        with pytest.raises(ConfigError, match="receive_message_max_bytes"):
            load_settings(
                {
                    "consumer": {
                        "fetch_max_bytes": 8 * MIB,
                        "receive_message_max_bytes": 8 * MIB,
                    }
                }
            )


class TestMemoryBound:
    """Prefetch, plus twice a fetch's worst inflation per partition."""

    def test_defaults(self) -> None:
        gzip_per_partition = int(64 * 1024 * INFLATION["gzip"])  # 66 MB > 32 MiB zstd
        assert memory_bound(ConsumerSettings(), 2) == 64 * MIB + 4 * gzip_per_partition

    def test_zstd_cap_when_fetches_are_small(self) -> None:
        c = ConsumerSettings(max_partition_fetch_bytes=1024)
        assert memory_bound(c, 1) == 64 * MIB + 2 * 32 * MIB

    def test_a_batch_larger_than_a_fetch_counts_whole(self) -> None:
        assert memory_bound(ConsumerSettings(), 1, 500 * MIB) == 64 * MIB + 1000 * MIB
