# stream-perceptron: every target sets up .venv on first use (Python 3.11+ as $(PYTHON)).
PYTHON ?= python3
# the suite's processes (pytest-xdist, work stealing): most of its time is spent waiting on
# brokers, so two nearly halve it on two cores; TEST_WORKERS=0 runs it in one process
TEST_WORKERS ?= 2
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.DEFAULT_GOAL := help
.PHONY: help install demo test test-tansu unit integration kafka kafka-jars registry registry-jars lint lock bench bench-worker clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)  ## create .venv and install the package with its dev tools

demo: $(STAMP)  ## the main job: river's Shuttle through a worker on an embedded broker, with a plot
	$(BIN)/stream-perceptron demo

test: $(STAMP)  ## the whole suite: unit, doctests and the real-broker integration tests
	$(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal --durations=30

test-tansu: $(STAMP)  ## the whole suite with tansu as the broker (apache_kafka tests: Apache Kafka)
	SP_TEST_BROKER=tansu $(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal --durations=30

unit: $(STAMP)  ## the fast tests only (no broker)
	$(BIN)/pytest tests/unit stream_perceptron

integration: $(STAMP)  ## the broker tests only
	$(BIN)/pytest tests/integration

kafka-jars: $(STAMP)  ## fetch Apache Kafka's jars with Maven into ~/.cache/stream-perceptron (once)
	$(BIN)/python -m tests.apache_kafka --fetch

kafka: $(STAMP)  ## run a local Apache Kafka (KRaft, from its jars; NODES=3, SECURE=1) until Ctrl-C
	$(BIN)/python -m tests.apache_kafka --nodes $(or $(NODES),1) $(if $(SECURE),--secure)

registry-jars: $(STAMP)  ## fetch the schema registry (Apicurio Registry) with Maven into ~/.cache/stream-perceptron (once)
	$(BIN)/python -m tests.schema_registry --fetch

registry: $(STAMP)  ## run a local schema registry (Apicurio, Confluent-compatible API) until Ctrl-C
	$(BIN)/python -m tests.schema_registry

lint: $(STAMP)  ## ruff and mypy (strict) on the package
	$(BIN)/ruff check stream_perceptron tests bench
	$(BIN)/mypy

# The image's lock (deploy/Dockerfile): every extra it may install, and the build backend that makes
# the project's wheel (build-system.requires, read from stdin), for its Python (3.11) on Linux, with
# the hashes of every file of each pinned version.
lock: $(STAMP)  ## re-pin deploy/requirements.lock from PyPI, with hashes (docs/install.md)
	$(BIN)/python -m pip install --quiet 'uv>=0.5'
	$(BIN)/python -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['build-system']['requires'], sep='\n')" \
	| $(BIN)/uv pip compile --quiet pyproject.toml - --extra all --generate-hashes \
	    --python-version 3.11 --python-platform linux -o deploy/requirements.lock

bench: $(STAMP)  ## the model against river: progressive validation, each call on dict rows, learn_many
	$(BIN)/python -m bench.bench_river_api --json bench/results/river_api.json

bench-worker: $(STAMP)  ## the worker end to end against the bare pipes and a river loop (~30–35 min)
	$(BIN)/python -m bench.bench_worker --json bench/results/worker.json --markdown bench/results/worker.md

clean:  ## remove .venv and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
