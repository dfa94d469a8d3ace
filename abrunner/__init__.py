"""The codec A/B runner (`codec-ab`): a worker per codec under the same load, then one report.

| part | holds |
| --- | --- |
| `plan`, `schema_fit`, `results`, `peer_figures`, `config` | what is asked (the typed plan; which codecs a team's schema lets run, and what they skip), what was measured (report.json's Structs; the framed cases' in-process figures), the `[ab]` settings |
| `report` | tables, decisions with intervals, charts and the `--compare` gate, built from results |
| `lab` | the lab run: a worker and a load generator per case on a broker the runner owns |
| `staging` | the staging verdict: two live deployments read from Prometheus |
| `framing` | `--framing confluent`: each codec framed beside its unframed twin, a local registry if none is given |
| `guarantees` | `--processing-guarantee both`: the same load under each guarantee, exactly-once's cost per codec |
| `interrupts` | Ctrl-C and SIGTERM during a run: stop the case, write the report |
| `cli` | `codec-ab` and `codec-ab staging` |

Each part may import only those above it in this table (`report` never imports `lab`),
and every package below `abrunner`; nothing imports `abrunner`.
"""
