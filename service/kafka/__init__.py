"""The Kafka connection every tool shares, and the names the parts agree on.

| module | holds |
| --- | --- |
| `connection` | `[kafka]` fields, secrets and their librdkafka mapping |
| `security_check` | whether the cluster accepts this client's security settings, asked once |
| `listener` | what a listener speaks (TLS? SASL?), asked when a connection is dropped |
| `admin_topics` | topics through one AdminClient: exists, create, delete, list |
| `topic_hint` | the missing-topics line, its fix runnable as printed |
| `broker_record` | where `codec-kafka start` records the local broker, read by every tool |
| `headers` | the message headers of DESIGN.md (`x-seq`, `x-sent-ns`, ...) |
| `batch_probe` | where a batch librdkafka cannot read ends, asked by a consumer of its own |
| `protocols` | type aliases and Protocols for confluent-kafka's objects |

May import `service.lifecycle`, `service.telemetry` and `schemas`; `loadgen`,
`localkafka` and `abrunner` build on it.
"""
