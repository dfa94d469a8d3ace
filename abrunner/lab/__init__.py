"""The lab run: a worker per codec under the same load on a broker the runner owns.

| module | holds |
| --- | --- |
| `runner` | the cases: for each profile, repeat and codec, one measured worker |
| `processes` | the `codec-worker` and `codec-loadgen` processes a case runs |
| `worker_probe` | a running worker measured from outside: /metrics and the kernel's accounting |
| `case_figures` | a case's figures from its snapshots |
| `loss_check` | committed offsets and `x-seq` read back after a case |
| `payload_sizing` | pools and backlogs bounded by bytes |
| `inprocess_bench` | each codec's in-process decode cost, beside the Kafka path's |
| `peer_decode` | the framed cases' decode beside confluent-kafka's deserializers, on the run's framed messages |
| `capacity` | whether the machine can carry every codec's worker at once |
| `paired` | paired runs: every codec of a repeat at once, sampled window by window |
| `precision` | `--precision`: more paired repeats until every CPU ratio is as precise as asked |
| `waits` | waiting on running workers, sampling them |

May import `abrunner.plan`, `abrunner.results`, `abrunner.report`, and every package
below `abrunner` (`localkafka` included).
"""
