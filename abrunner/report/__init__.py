"""The A/B report: tables, decisions, intervals, charts and the `--compare` gate.

| module | holds |
| --- | --- |
| `answer` | the answer first: a sentence per candidate, the short table |
| `tables`, `environment` | one row per codec, ratios to a baseline, the files; the versions and machine |
| `decisions`, `stats` | cores at a target rate; ratios with 95 % intervals, also window by window in blocks (staging's slices, the lab's paired windows) |
| `decode_share` | the decode's share of each codec's CPU per message |
| `rejections` | what each codec refused of the traffic |
| `logic_verdicts` | a team's handler per codec: works, differs, fails, beside its cost |
| `notes` | the prose around the tables: warnings, the legend |
| `charts` | the PNG charts (matplotlib, the `report` extra) |
| `terminal` | the answer, tables and notes printed at the end of a run |
| `paired`, `order` | a paired run's window-by-window ratios; a sequential run's order effect |
| `compare` | one report against an older one, as a CI gate |
| `framing/` | framed cases beside their unframed twins and confluent-kafka's deserializers |

May import `abrunner.plan`, `abrunner.results`, `abrunner.peer_figures` and the packages below `abrunner`:
the report is built from results, so the lab run and staging both feed it.
"""
