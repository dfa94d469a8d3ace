"""The hot path: consume a batch, decode, handle and drop each message, store offsets.

| module | holds |
| --- | --- |
| `batch_loop` | `BatchLoop`: consume a batch, run it, update the metrics once, store offsets |
| `hotpath` | `MessagePath`: the per-message decode and logic, with no per-message overhead |
| `partition_starts` | where a partition with no committed offset starts under `latest` |
| `heap_trim` | large payloads handed back to the kernel once a burst ends |
| `shutdown_budget` | what a SIGTERM may still cost: the last batch, the flush, the close |
| `message_budget` | the per-message budget for decode plus logic: a timer, not a per-message cost |
| `backstop` | the budget's hard backstop: a call stuck in C exits; the restarts dead-letter it |
| `timer_overhead` | the clock's own cost, taken off each timed sample |
| `worker_loops` | which loop a worker runs: sync batches, or the async path for an async handler |
| `async_path/` | a team's async handler awaited on an event loop (`service.loop.async_path`) |
| `registry_wait` | a framed message whose schema the registry cannot give: its partition waits, no dead letter |

May import `service.delivery`, `service.kafka`, `service.lifecycle`, `service.logic`,
`service.telemetry`, and `schemas`/`codec`; nothing imports it but `service.app`.
"""
