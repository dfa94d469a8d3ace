"""What the worker tells the world: metrics, the control server, lag, logs.

| module | holds |
| --- | --- |
| `metrics` | every metric of DESIGN.md, built against an injected registry |
| `batch_counters`, `histogram` | per-batch counters and histograms, cheaper than prometheus_client's |
| `consumer_lag` | `worker_consumer_lag_messages` from the first second |
| `control_server` | `/metrics`, `/healthz`, `/readyz` from one small thread |
| `summary_line` | the periodic one-line summary |
| `log_setup` | the only `structlog.configure` call, and librdkafka's lines in it |

May import `service` (its version) and the libraries only: every other part of the
worker reports through it, and `loadgen` and `abrunner` share its histograms.
"""
