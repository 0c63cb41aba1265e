# The two quick-start commands: `make demo` (a personal pool running a demo cluster) and
# `make test` (the whole test suite). Both create .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

# test-fast: the unit tier (no broker, no pool), tests/unit/test_tiers.py keeps the markers true;
# its property tests draw a fifth of their examples (tests/hypothesis_profiles.py), make test all.
.PHONY: demo test test-fast install broker node-deps containers browser bench docs lint cluster cluster-stop tutorials-as-user

$(BIN)/gridbus: pyproject.toml setup.py agents/startd/_spawn.c
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(BIN)/gridbus

install: $(BIN)/gridbus

broker:
	bash scripts/ensure-broker.sh

# podman, runc and busybox-static for the docker and container universe tests (they skip without).
containers:
	bash scripts/ensure-containers.sh

# Debian's chromium and chromedriver, for the web console's browser test (it skips without them).
browser:
	bash scripts/ensure-browser.sh

demo: install broker
	$(BIN)/python scripts/demo.py

# The npm packages of tests/node (amqplib, @msgpack/msgpack, @asyncapi/specs); skipped, saying so,
# where node or npm is missing.
node-deps:
	bash scripts/ensure-node-deps.sh

# The suite in 4 pytest-xdist workers (tests/conftest.py hands whole groups of tests that share
# something of the machine to one worker, one after the other); `.venv/bin/python -m pytest -q`
# runs it in one process (about twice as long). A worker that crashes ends the run, failed, naming
# the test: pytest-xdist would run that test's whole group again in a new worker, crash after
# crash (and once, the crash near the end, hung with every worker idle).
test: install broker node-deps containers browser
	$(BIN)/python -m pytest -q -n 4 --max-worker-restart=0 --durations=15

test-fast: install
	$(BIN)/python -m pytest -q -n 2 --max-worker-restart=0 -m "not broker and not e2e" --hypothesis-profile=fast

lint: install
	$(BIN)/ruff check .
	$(BIN)/python scripts/typecheck.py

bench: install broker
	$(BIN)/pip install -q -e '.[test,bench]'
	$(BIN)/python bench/run_all.py

# Both references of the bus, generated from schemas/*.toml.
docs: install
	$(BIN)/python -m gridbus.schemadoc > docs/schema.md
	$(BIN)/python -m gridbus.asyncapi > docs/asyncapi.yaml

# A 3-node RabbitMQ cluster on this machine (ports 5781-5783, management 15781-15783), apart from
# the default node; it prints the GRIDBUS_URL that lists its nodes.
cluster: install
	$(BIN)/python -m tests.rabbit_cluster start

cluster-stop: install
	$(BIN)/python -m tests.rabbit_cluster stop

# HTCondor's tutorials run as a plain Unix user against that user's personal pools (as root:
# `sudo make tutorials-as-user TUTORIAL_USER=alice`).
tutorials-as-user: broker
	TUTORIAL_USER=$(TUTORIAL_USER) bash scripts/tutorials-as-user.sh
