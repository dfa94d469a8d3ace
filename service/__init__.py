"""Codec A/B stream-processing worker for Kafka (`codec-worker`).

Folders name the worker's parts; each may import only the parts below it:

| part | holds |
| --- | --- |
| `lifecycle`, `telemetry`, `logic` | signals and child processes; metrics, the control server, lag, logs; the business logic |
| `kafka` | the connection every tool shares, topics, headers, confluent-kafka Protocols |
| `settings` | one settings system for every tool (TOML, environment, flags) |
| `delivery`, `shadow` | dead letters and gated writes; shadow decoding |
| `loop` | the hot path: consume, decode, handle, store offsets |
| `app`, `cli`, `console` | the wiring and lifecycle; the command line; the console script |

The package imports `schemas` and `codec` only; `loadgen`, `localkafka`, `schematool`,
`codecbench` and `abrunner` build on it. This module holds the version and imports
nothing, so any part may read it.
"""

__version__ = "0.1.0"
