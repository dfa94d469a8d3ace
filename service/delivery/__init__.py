"""What the loop writes whose acknowledgement gates the source offset.

| module | holds |
| --- | --- |
| `dead_letters` | poison messages: the reason, the error headers, DLQ or a stop |
| `gated_writes` | dead letters and outputs produced and confirmed before offsets move |
| `letter_headers` | a dead letter's `x-dlq-*` error context |
| `letter_ladder` | a dead letter refused for what it is: cut to its essentials, then spooled |
| `unreadable` | consumer errors: fatal, unreadable data (dead-lettered, skipped), or logged |
| `batch_writes` | the loop's writers and delivery strategy, built once from the settings |
| `transactions` | exactly-once: one Kafka transaction per batch (results, dead letters, offsets) |
| `txn_calls` | a transactional call's deadline (librdkafka #5456) and its error's class |
| `outputs` | the output topic's writer: the message, or a team's handler's result |
| `held_partitions` | a batch whose writes failed: rewind, pause, retry with back-off |

May import `service.kafka`, `service.settings`, `service.telemetry`, and `schemas`.
"""
