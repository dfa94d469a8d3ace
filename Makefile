# Codec A/B service: every entry point a developer or CI needs. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := help

help:  ## List the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

$(STAMP): requirements/dev.txt requirements/bootstrap.txt pyproject.toml deploy/local-kafka/pom.xml deploy/local-registry/pom.xml scripts/install-system-deps.sh
	bash scripts/install-system-deps.sh
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --require-hashes -r requirements/bootstrap.txt
	$(UV) pip install -q --python $(PY) --require-hashes -r requirements/dev.txt
	$(UV) pip install -q --python $(PY) --no-deps --no-build-isolation -e .
	$(PY) -m localkafka resolve
	$(PY) -m localkafka registry resolve
	$(PY) -c "from codec import check_form; [check_form('flatbuffers', s) for s in ('small', 'medium', 'large')]"
	touch $(STAMP)

setup: $(STAMP)  ## Install everything: locked Python packages, the project, Kafka's jars

lock:  ## Re-resolve the hashed lock files from pyproject.toml
	$(UV) pip compile pyproject.toml --generate-hashes --python-version 3.11 -q -o requirements/runtime.txt
	$(UV) pip compile pyproject.toml --all-extras --group dev --generate-hashes --python-version 3.11 -q -o requirements/dev.txt

proto: setup  ## Regenerate schemas/builtin/pb from schemas/builtin/messages.proto
	$(PY) -m grpc_tools.protoc -I schemas/builtin --python_out=schemas/builtin/pb --pyi_out=schemas/builtin/pb schemas/builtin/messages.proto

format: setup  ## Format the code
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

lint: setup  ## ruff format --check and ruff check
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .

typecheck: setup  ## mypy --strict
	$(VENV)/bin/mypy schemas codec service loadgen abrunner localkafka codecbench schematool tests scripts/docs_reference.py

test-unit: setup  ## Unit tests (no network)
	$(PY) -m pytest tests/unit

test-integration: setup  ## Integration tests against a real broker (started if none is given)
	$(PY) -m pytest tests/integration

TEST_WORKERS ?= 3

test: setup  ## Everything CI runs: lint, types, unit, integration tests and the fault suite's fast set
	$(MAKE) --no-print-directory lint typecheck
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope --durations=20

check: lint typecheck test-unit  ## Fast pre-commit checks

AB_ARGS ?= --duration 20 --warmup 5

ab: setup  ## The main job: codec A/B of every wire codec on a local Kafka (report in ab-results/)
	$(PY) -m abrunner --out ab-results $(AB_ARGS)

sample-report: setup  ## Regenerate docs/sample-report/: the full default run (40k msg/s, 30 s)
	$(PY) -m abrunner --out docs/sample-report
	rm -rf docs/sample-report/logs

bench: setup  ## Worker vs a bare per-message loop for every wire codec, msgs per CPU-second
	$(PY) -m tests.perf.bench_worker

bench-fixed-rate: setup  ## Worker vs a bare loop on the same traffic at 2k, 20k and 40k msg/s: CPU and latency
	$(PY) -m tests.perf.bench_worker --fixed-rate

bench-loop-parts: setup  ## Where the worker's fixed cost at 2k msg/s goes: bare twins, the timer wait, settings, loop, metrics, worker on one load
	$(PY) -m tests.perf.bench_loop_parts

bench-overhead: setup  ## What the worker's loop adds to a bare decode loop, in-process, every codec
	$(PY) -m tests.perf.bench_overhead

bench-registry: setup  ## confluent-kafka's schema-registry deserializers vs the framed codecs, same framed messages
	$(PY) -m tests.perf.bench_registry_peers

bench-instructions: setup  ## Instructions per message the worker's loop adds to a bare decode loop (callgrind, deterministic)
	$(PY) -m tests.perf.bench_instructions

bench-async: setup  ## An async handler: the worker's async path vs bare asyncio and AIOConsumer loops, every codec (BENCH_ARGS="--rate 20000")
	$(PY) -m tests.perf.bench_async $(BENCH_ARGS)

bench-gc: setup  ## What the GC policy (freeze, thresholds, collect between batches) does per codec
	$(PY) -m tests.perf.bench_gc

codec-bench: setup  ## In-process decode/encode cost per codec and profile (no Kafka)
	$(PY) -m codecbench

faults: setup  ## The full fault suite against a local broker (24-35 min on 2 shared cores; D12/D13 need root); rewrites docs/reliability.md
	$(PY) -m tests.faults

faults-fast: setup  ## The fault suite's fast set (~4 min), as CI runs it
	$(PY) -m pytest tests/faults

FUZZ_ARGS ?=

acceptance: setup  ## Issue 29's "Done when" on the inventory fixture: a recorded replay with lax values and naive datetimes, and its shadow decode (~1-2 min)
	CODEC_AB_ACCEPTANCE=1 $(PY) -m pytest tests/integration/test_replay_inventory.py -q

fuzz-models: setup  ## The model generator's long run: 1,500 random pydantic models through every codec (MODEL_GEN_PROFILE=long)
	MODEL_GEN_PROFILE=long $(PY) -m pytest tests/unit/test_model_generator.py -q

fuzz: setup  ## Coverage-guided fuzzing (atheris) of each codec's decode path, 60 s each (FUZZ_ARGS="--codec protobuf --seconds 20")
	$(PY) -m tests.fuzz $(FUZZ_ARGS)

bench-loadgen: setup  ## Load generator: one-process maximum, then 60 s at 40k msg/s beside a worker
	$(PY) -m tests.perf.bench_loadgen

DOCS_ENV := DISABLE_MKDOCS_2_WARNING=true NO_MKDOCS_2_WARNING=1

docs: setup  ## Build the docs site strictly, then serve it on 127.0.0.1:8000 (Ctrl-C stops)
	$(DOCS_ENV) $(VENV)/bin/mkdocs build --strict
	$(DOCS_ENV) $(VENV)/bin/mkdocs serve --strict --dev-addr 127.0.0.1:8000

docs-build: setup  ## Build the docs site strictly into site/ (broken links and anchors fail)
	$(DOCS_ENV) $(VENV)/bin/mkdocs build --strict

kafka-start: setup  ## Start the local KRaft broker in the background (prints its address)
	$(PY) -m localkafka start

kafka-stop: setup  ## Stop the local broker
	$(PY) -m localkafka stop

up:  ## Run the compose A/B stack on Docker or podman (deploy/compose.sh; SERVICES="..." for some)
	bash deploy/compose.sh up

down:  ## Stop the compose stack; drop its containers, networks and volumes
	bash deploy/compose.sh down

STACK_ARGS ?=

stack-test: setup  ## The compose stack for real (Docker or podman): build, up, load 4 min, check from outside, down (6-7 min; 15 min the first time, building stand-in images)
	bash scripts/install-system-deps.sh --stack
	$(PY) -m tests.deploy.stack $(STACK_ARGS)

stack-test-breaks: setup  ## The stack test three times with one fault each (lost messages, a target down, an empty query): each must fail on its check
	bash scripts/install-system-deps.sh --stack
	@for fault in lose target query; do \
	  echo "== stack test with --break $$fault (it must exit 1)"; \
	  $(PY) -m tests.deploy.stack --break $$fault $(STACK_ARGS); status=$$?; \
	  if [ $$status -ne 1 ]; then echo "--break $$fault: exit $$status, not 1"; exit 1; fi; \
	done; echo "each fault failed the stack test on its own check"

clean:  ## Remove the virtualenv and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

.PHONY: help docs docs-build ab sample-report setup lock proto format lint typecheck test-unit test-integration test check bench bench-fixed-rate bench-loop-parts bench-overhead bench-instructions bench-async bench-registry bench-gc codec-bench bench-loadgen faults faults-fast fuzz fuzz-models acceptance kafka-start kafka-stop up down stack-test stack-test-breaks clean
