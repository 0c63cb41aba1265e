# The two quick-start commands: `make demo` (a personal pool running a demo cluster) and
# `make test` (the whole test suite). Both create .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test install broker browser bench docs lint cluster cluster-stop

$(BIN)/gridbus: pyproject.toml setup.py agents/startd/_spawn.c
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(BIN)/gridbus

install: $(BIN)/gridbus

broker:
	bash scripts/ensure-broker.sh

# Debian's chromium and chromedriver, for the web console's browser test (it skips without them).
browser:
	bash scripts/ensure-browser.sh

demo: install broker
	$(BIN)/python scripts/demo.py

test: install broker browser
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check .

bench: install broker
	$(BIN)/python bench/run_all.py

docs: install
	$(BIN)/python -m gridbus.schema > docs/schema.md

# A 3-node RabbitMQ cluster on this machine (ports 5781-5783, management 15781-15783), apart from
# the default node; it prints the GRIDBUS_URL that lists its nodes.
cluster: install
	$(BIN)/python -m tests.rabbit_cluster start

cluster-stop: install
	$(BIN)/python -m tests.rabbit_cluster stop
