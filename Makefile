# contextengine: the two commands a newcomer needs are `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
TOOLS := $(CURDIR)/.tools/bin
GRPCURL_VERSION := v1.9.3
RUN_STAMP := $(VENV)/.stamp-run
DEV_STAMP := $(VENV)/.stamp-dev

.PHONY: run test install install-dev gen check-gen lint fmt pytest bench tools clean

# --- set-up -----------------------------------------------------------------------------------

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(DEV_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[test,dev]"
	touch $@ $(RUN_STAMP)

install: $(RUN_STAMP)
install-dev: $(DEV_STAMP)

$(TOOLS)/grpcurl:
	mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) GOFLAGS=-mod=mod go install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)

tools: $(TOOLS)/grpcurl

# --- the two commands -------------------------------------------------------------------------

## Start the sidecar on its defaults: ./contextengine.db, 127.0.0.1:50151.
run: $(RUN_STAMP)
	$(BIN)/contextengine serve $(ARGS)

## Set up everything and run every check and test suite.
test: $(DEV_STAMP) tools check-gen lint pytest

# --- pieces -----------------------------------------------------------------------------------

gen: $(DEV_STAMP)
	PYTHON=$(BIN)/python scripts/gen_proto.sh

check-gen: $(DEV_STAMP)
	PYTHON=$(BIN)/python scripts/check_gen.sh

lint: $(DEV_STAMP)
	$(BIN)/buf lint
	$(BIN)/ruff check server tests bench scripts
	$(BIN)/ruff format --check server tests bench scripts
	$(BIN)/mypy

fmt: $(DEV_STAMP)
	$(BIN)/ruff check --fix server tests bench scripts
	$(BIN)/ruff format server tests bench scripts

pytest: $(DEV_STAMP) tools
	PATH="$(TOOLS):$$PATH" $(BIN)/pytest $(PYTEST_ARGS)

## Benchmarks (not part of `make test`): this engine against google-adk on the same machine.
bench: $(DEV_STAMP)
	$(BIN)/python -m bench $(ARGS)

clean:
	rm -rf $(VENV) .tools .pytest_cache .mypy_cache .ruff_cache
