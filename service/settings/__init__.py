"""One settings system for every tool: TOML, environment, flags, clear errors.

| module | holds |
| --- | --- |
| `sources` | TOML sections, environment variables, precedence and the exit-2 errors |
| `cli_flags` | the command-line flags over those settings, one shape for every tool |
| `worker`, `processing` | the worker's own `[worker.*]` sections beside the shared `[kafka]`; `[worker.processing]` |
| `registry` | the shared `[registry]` section: a schema registry and the client's bounds |
| `registry_start` | the registry reached at every tool's start; the worker's output schema registered |

May import `service` (its version), `service.kafka`, `service.logic`, `schemas` and
`codec`; `loadgen`, `abrunner` and the other tools build their settings on it.
"""
