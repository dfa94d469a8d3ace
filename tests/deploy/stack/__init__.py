"""The compose stack's load test (`make stack-test`): brought up, loaded, judged, torn down.

`python -m tests.deploy.stack` runs docker-compose.yml on the machine's engine (Docker or
podman, through deploy/compose.sh), workers A and B under the load generators for a set
time, then judges the stack from outside the containers: no message lost (read back by
`x-seq`), Prometheus's targets up, every recording rule and dashboard query answering,
`codec-ab staging` giving a verdict, each service's health, and nothing left after
`down`. Images the machine cannot pull are built as stand-ins (`images`,
tests/deploy/standins/). `--break lose|target|query` breaks one thing on purpose and
expects exactly that check to fail (`make stack-test-breaks`).

Modules: `engine` (deploy/compose.sh and the engine's CLI), `images` (pull or stand-in),
`readback` (the topics and groups read from the host), `checks` (the verdicts, pure
functions), `live` (Prometheus, health and the staging report), `run` (the phases).
"""
