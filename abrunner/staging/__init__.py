"""The staging verdict: two live deployments read from Prometheus, slice by slice.

| module | holds |
| --- | --- |
| `cli` | `codec-ab staging`: the command, its flags and its exit codes |
| `slices` | each side's identity, counters, histograms and gauges, slice by slice |
| `counters` | counters' raw samples cut at slice edges, reset-aware: slices that add up |
| `backlog` | a side's backlog over the whole window, and its stalls |
| `figures` | slices grouped into blocks, blocks into a report's rows |
| `report` | a staging run as the lab run's `Report` |
| `comparability` | the warnings and notes: why the sides may not be comparable |
| `sections` | the report's Markdown: window, warnings, table with legend, ratios |
| `prometheus_api` | a minimal client of the Prometheus HTTP API |

May import `abrunner.config`, `abrunner.plan`, `abrunner.results`, `abrunner.report`
and the packages below `abrunner`; never `abrunner.lab` (nothing runs here).
"""
