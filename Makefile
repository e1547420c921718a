# stream-perceptron: every target sets up .venv on first use (Python 3.11+ as $(PYTHON)).
PYTHON ?= python3
# the suite's processes (pytest-xdist, work stealing): much of its time is spent waiting on
# brokers and timeouts, so three keep two cores busier than two do (on two cores: 12:20 with
# three, 14:21 with two, 165% and 122% CPU); TEST_WORKERS=0 runs it in one process
TEST_WORKERS ?= 3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.DEFAULT_GOAL := help
.PHONY: help install native peer-venv bench-peer demo test test-tansu unit integration kafka kafka-jars registry registry-jars lint lock bench bench-worker clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

# The compiled part (native/, Rust: the dense input reader, the dense learning pass, the prediction encoder, ADWIN's loop, a dict row's score) is
# built where cargo is found (on PATH or in ~/.cargo/bin); NATIVE=0 skips it. Without it the package
# runs its pure-Python paths, which give the same bytes, more slowly (docs/install.md).
NATIVE ?= 1
CARGO  := $(or $(shell command -v cargo 2>/dev/null),$(wildcard $(HOME)/.cargo/bin/cargo))

$(STAMP): pyproject.toml native/Cargo.toml native/Cargo.lock native/src/lib.rs
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@$(MAKE) --no-print-directory native
	touch $(STAMP)

install: $(STAMP)  ## create .venv and install the package with its dev tools (and the compiled part)

native:  ## build and install the compiled part into .venv (needs cargo; NATIVE=0: remove it)
	@if [ "$(NATIVE)" = 0 ]; then \
	    $(BIN)/python -m pip uninstall --quiet --yes stream-perceptron-native 2>/dev/null; \
	    echo "compiled part not installed (NATIVE=0): the pure-Python paths run"; \
	elif [ -z "$(CARGO)" ]; then \
	    echo "cargo not found: the compiled part is not built; the pure-Python paths run (docs/install.md)"; \
	else \
	    PATH="$(dir $(CARGO)):$$PATH" $(BIN)/python -m pip install --quiet ./native \
	    && echo "compiled part built and installed (stream_perceptron_native)"; \
	fi

demo: $(STAMP)  ## the main job: river's Shuttle through a worker on an embedded broker, with a plot
	$(BIN)/stream-perceptron demo

test: $(STAMP) .venv-peer/.installed-stamp  ## the whole suite: unit, doctests and the real-broker integration tests
	$(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal --durations=30

test-tansu: $(STAMP) .venv-peer/.installed-stamp  ## the whole suite with tansu as the broker (apache_kafka tests: Apache Kafka)
	SP_TEST_BROKER=tansu $(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal --durations=30

unit: $(STAMP)  ## the fast tests only (no broker)
	$(BIN)/pytest tests/unit stream_perceptron

integration: $(STAMP) .venv-peer/.installed-stamp  ## the broker tests only
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

peer-venv: .venv-peer/.installed-stamp  ## the benchmarks' peer, Quix Streams + river, in .venv-peer

.venv-peer/.installed-stamp: pyproject.toml
	$(PYTHON) -m venv .venv-peer
	.venv-peer/bin/python -m pip install --quiet --upgrade pip
	.venv-peer/bin/python -m pip install --quiet 'quixstreams>=3.28,<3.29' 'river>=0.22'
	touch $@

bench-peer: $(STAMP) .venv-peer/.installed-stamp  ## the worker against Quix Streams + river at checkpoints every 2,000 and 10,000
	$(BIN)/python -m bench.bench_peer --json bench/results/peer.json

bench-worker: $(STAMP) .venv-peer/.installed-stamp  ## the worker end to end against the bare pipes and the Quix Streams + river peer (~30–35 min)
	$(BIN)/python -m bench.bench_worker --json bench/results/worker.json --markdown bench/results/worker.md

clean:  ## remove .venv and caches
	rm -rf $(VENV) .venv-peer .pytest_cache .mypy_cache .ruff_cache .hypothesis
