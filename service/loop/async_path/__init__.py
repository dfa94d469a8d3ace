"""The async path: a team's async handler awaited on an event loop, at-least-once.

| module | holds |
| --- | --- |
| `loop` | `AsyncLoop`: consume, dispatch to ordered lanes, bound what is in flight, release |
| `handling` | one message: decoded, the handler awaited with its retries and its budget |
| `release` | each partition's finished prefix: written, confirmed, stored, counted |
| `inflight` | the messages in flight per partition, and the positions exactly-once commits |
| `event_loop` | uvloop's event loop, and the CPU an awaited handler spends in its own steps |

May import what `service.loop` may, and `service.loop.hotpath` (the same decode and
the same poison as the sync path).
"""
