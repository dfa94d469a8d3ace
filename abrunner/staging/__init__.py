"""The staging verdict: two live deployments read from Prometheus, slice by slice.

| module | holds |
| --- | --- |
| `cli` | `codec-ab staging`: the command, its flags and its exit codes |
| `slices` | each side's counters and histograms read slice by slice |
| `figures` | slices grouped into blocks, blocks into a report's rows |
| `report` | a staging run as the lab run's `Report` |
| `prometheus_api` | a minimal client of the Prometheus HTTP API |

May import `abrunner.config`, `abrunner.plan`, `abrunner.results`, `abrunner.report`
and the packages below `abrunner`; never `abrunner.lab` (nothing runs here).
"""
