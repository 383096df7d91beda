# contextengine: the two commands a newcomer needs are `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
TOOLS := $(CURDIR)/.tools/bin
GRPCURL_VERSION := v1.9.3
RUN_STAMP := $(VENV)/.stamp-run
DEV_STAMP := $(VENV)/.stamp-dev
# Three distributions: the client (clients/python: contextengine.client and the generated
# contextengine.v1), the ADK drop-ins (clients/adk_python: contextengine.adk) and the server (the
# root), installed together in one pip command.
PY_CLIENT := clients/python
PY_ADK := clients/adk_python
PROJECTS := pyproject.toml $(PY_CLIENT)/pyproject.toml $(PY_ADK)/pyproject.toml
TS_DIR := clients/typescript
TS_STAMP := $(TS_DIR)/node_modules/.stamp-ci
# The ADK TypeScript drop-ins (@contextengine/adk) on the TypeScript client's sources.
TS_ADK_DIR := clients/typescript-adk
TS_ADK_STAMP := $(TS_ADK_DIR)/node_modules/.stamp-ci
CONFORMANCE_REPORTS := $(CURDIR)/build/conformance
JAVA_DIR := clients/java
# Maven through the committed wrapper (Maven 3.9.16): the first build downloads into ~/.m2, later
# builds reuse it. One thread: the machines are small.
MVNW := cd $(JAVA_DIR) && ./mvnw -B -q -T1
KOTLIN_DIR := clients/kotlin
# The Kotlin client builds with the Java module's wrapper, on the Java jar (installed into ~/.m2);
# no Kotlin compile daemon is left running after Maven exits.
KOTLIN_MVNW := cd $(KOTLIN_DIR) && ../java/mvnw -B -q -T1 -Dkotlin.compiler.daemon=false
JAVA_JAR := target/contextengine-client-0.1.0-SNAPSHOT
# The ADK Java drop-ins, like the Kotlin client: the Java module's wrapper, on the installed Java jar.
JAVA_ADK_DIR := clients/java-adk
JAVA_ADK_MVNW := cd $(JAVA_ADK_DIR) && ../java/mvnw -B -q -T1

.PHONY: run test install install-dev gen check-gen lint fmt pytest bench tools clean postgres-server test-postgres
.PHONY: browser
.PHONY: ts-deps ts-gen ts-check test-ts conformance test-clients java-build java-install test-java java-example
.PHONY: kotlin-build test-kotlin kotlin-example proto-baseline
.PHONY: java-adk-build test-java-adk java-adk-example java-adk-bench java-adk-driver
.PHONY: ts-adk-deps ts-adk-check test-ts-adk ts-adk-example
.PHONY: check-deploy lock docs

# --- set-up -----------------------------------------------------------------------------------

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(RUN_STAMP): $(PROJECTS) | $(BIN)/python
	$(BIN)/pip install -q -e $(PY_CLIENT) -e $(PY_ADK) -e .
	touch $@

$(DEV_STAMP): $(PROJECTS) | $(BIN)/python
	$(BIN)/pip install -q -e $(PY_CLIENT) -e $(PY_ADK) -e ".[test,dev,docs]"
	touch $@ $(RUN_STAMP)

install: $(RUN_STAMP)
install-dev: $(DEV_STAMP)

$(TOOLS)/grpcurl:
	mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) GOFLAGS=-mod=mod go install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)

tools: $(TOOLS)/grpcurl

# The TypeScript client's dependencies, exactly as locked (cached in clients/typescript/node_modules,
# which is gitignored; refreshed when package.json or the lock changes).
$(TS_STAMP): $(TS_DIR)/package.json $(TS_DIR)/package-lock.json
	cd $(TS_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

ts-deps: $(TS_STAMP)

# The ADK TypeScript drop-ins' dependencies (@google/adk 2.0.0 and what it pulls), exactly as
# locked (cached in clients/typescript-adk/node_modules); they build on the TypeScript client's.
$(TS_ADK_STAMP): $(TS_ADK_DIR)/package.json $(TS_ADK_DIR)/package-lock.json | $(TS_STAMP)
	cd $(TS_ADK_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

ts-adk-deps: $(TS_ADK_STAMP)

# --- the two commands -------------------------------------------------------------------------

## Start the sidecar on its defaults: ./contextengine.db, 127.0.0.1:50151.
run: $(RUN_STAMP)
	$(BIN)/contextengine serve $(ARGS)

## Set up everything and run every check and test suite.
test: $(DEV_STAMP) tools check-gen lint check-deploy docs pytest test-clients

# --- pieces -----------------------------------------------------------------------------------

gen: $(DEV_STAMP)
	PYTHON=$(BIN)/python scripts/gen_proto.sh

check-gen: $(DEV_STAMP)
	PYTHON=$(BIN)/python scripts/check_gen.sh

## At a release: the API `buf breaking` compares with from then on (proto/baseline.json).
proto-baseline: $(DEV_STAMP)
	$(BIN)/buf build --exclude-source-info -o proto/baseline.json

# `buf breaking` compares proto/ with the released API, proto/baseline.json (a buf image of
# proto/ without source info, committed): every change since the release must be compatible on
# the wire and in JSON (buf's FILE rules). The baseline moves only at a release, deliberately:
# `make proto-baseline`. Offline, the same on main and on any branch. `make lint BUF_AGAINST=...`
# compares with something else (e.g. '.git#branch=main').
BUF_AGAINST ?= proto/baseline.json

lint: $(DEV_STAMP)
	$(BIN)/buf lint
	$(BIN)/buf breaking --against '$(BUF_AGAINST)'
	$(BIN)/ruff check server $(PY_CLIENT) $(PY_ADK) tests bench scripts clients/conformance examples
	$(BIN)/ruff format --check server $(PY_CLIENT) $(PY_ADK) tests bench scripts clients/conformance examples
	$(BIN)/mypy
	$(BIN)/mypy --python-version 3.10 -p contextengine.client
	$(BIN)/mypy --python-version 3.10 -p contextengine.adk
	$(BIN)/mypy --python-version 3.10 clients/conformance/python_runner.py $(PY_CLIENT)/conformance/runner.py
	$(BIN)/mypy clients/conformance/python_runner.py $(PY_CLIENT)/conformance/runner.py scripts/with_server.py \
	  clients/conformance/adk/python_driver.py clients/conformance/adk/compare.py \
	  clients/conformance/adk/generate.py clients/conformance/adk/generated.py
	$(BIN)/mypy examples/python
	$(BIN)/mypy examples/adk_python

fmt: $(DEV_STAMP)
	$(BIN)/ruff check --fix server $(PY_CLIENT) $(PY_ADK) tests bench scripts clients/conformance examples
	$(BIN)/ruff format server $(PY_CLIENT) $(PY_ADK) tests bench scripts clients/conformance examples

pytest: $(DEV_STAMP) tools postgres-server browser
	PATH="$(TOOLS):$$PATH" $(BIN)/pytest $(PYTEST_ARGS)

# The PostgreSQL server binaries the PostgreSQL suites run (tests/pg_server.py starts a server in a
# temp dir per run): apt-get install postgresql-15 on a fresh machine when root, before pytest.
postgres-server: $(DEV_STAMP)
	$(BIN)/python -m tests.pg_server

# Debian's Chromium, which the inspector's browser tests drive with Playwright (tests/browser.py):
# apt-get install chromium on a fresh machine when root, before pytest; a no-op when present.
# Playwright's own browser download is never used (`playwright install` is never run).
browser: $(DEV_STAMP)
	$(BIN)/python -m tests.browser

# The suites over the PostgreSQL store alone (also part of `make pytest`).
test-postgres: $(DEV_STAMP) postgres-server
	$(BIN)/pytest -q -k postgres tests/store tests/memory tests/service

# --- clients ----------------------------------------------------------------------------------

## TypeScript code generated from proto/ into clients/typescript/src/gen (gitignored), every build.
ts-gen: $(TS_STAMP)
	cd $(TS_DIR) && npm run --silent gen

## Biome (lint + format) and the strict type check of the TypeScript client.
ts-check: ts-gen
	cd $(TS_DIR) && node_modules/.bin/biome ci --error-on-warnings --colors=off .
	cd $(TS_DIR) && node_modules/.bin/tsc -p tsconfig.json

## Biome (lint + format) and the strict type check of the ADK TypeScript drop-ins.
ts-adk-check: ts-gen ts-adk-deps
	cd $(TS_ADK_DIR) && node_modules/.bin/biome ci --error-on-warnings --colors=off .
	cd $(TS_ADK_DIR) && node_modules/.bin/tsc -p tsconfig.json

PY_CONFORMANCE = '$(CURDIR)/$(BIN)/python clients/conformance/python_runner.py --target $$CONTEXTENGINE_TARGET --report $(CONFORMANCE_REPORTS)/python.jsonl clients/conformance/scenarios'
# The same scenarios through the Python client (ContextEngineClient), as the other languages' runners.
PY_CLIENT_CONFORMANCE = '$(CURDIR)/$(BIN)/python $(PY_CLIENT)/conformance/runner.py --target $$CONTEXTENGINE_TARGET --report $(CONFORMANCE_REPORTS)/python-client.jsonl clients/conformance/scenarios'
TS_CONFORMANCE = 'cd $(TS_DIR) && node_modules/.bin/tsx conformance/runner.ts --target $$CONTEXTENGINE_TARGET --report $(CONFORMANCE_REPORTS)/typescript.jsonl ../conformance/scenarios'
TS_UNIT = 'cd $(TS_DIR) && node --import tsx --test test/*.test.ts'
TS_ADK_UNIT = 'cd $(TS_ADK_DIR) && node --import tsx --test test/*.test.ts'
TS_ADK_EXAMPLE = 'cd $(TS_ADK_DIR) && node_modules/.bin/tsx examples/travel_agent.ts'
JAVA_CP = $$(cat target/test-classpath.txt):target/classes:target/test-classes
JAVA_CONFORMANCE = 'cd $(JAVA_DIR) && java -cp "$(JAVA_CP)" dev.contextengine.conformance.Runner --target $$CONTEXTENGINE_TARGET --report $(CONFORMANCE_REPORTS)/java.jsonl ../conformance/scenarios'
JAVA_UNIT = 'cd $(JAVA_DIR) && ./mvnw -B -ntp -T1 surefire:test'
KOTLIN_CP = $$(cat target/test-classpath.txt):target/classes:target/test-classes
KOTLIN_CONFORMANCE = 'cd $(KOTLIN_DIR) && java -cp "$(KOTLIN_CP)" dev.contextengine.conformance.KotlinRunner --target $$CONTEXTENGINE_TARGET --report $(CONFORMANCE_REPORTS)/kotlin.jsonl ../conformance/scenarios'
KOTLIN_UNIT = 'cd $(KOTLIN_DIR) && ../java/mvnw -B -ntp -T1 surefire:test'
JAVA_ADK_CP = $$(cat target/test-classpath.txt):target/classes:target/test-classes
JAVA_ADK_UNIT = 'cd $(JAVA_ADK_DIR) && ../java/mvnw -B -ntp -T1 surefire:test'
# The ADK Java parity driver (clients/conformance/adk/README.md contract); append its arguments
# (absolute paths: it runs in $(JAVA_ADK_DIR)). Needs java-adk-build.
JAVA_ADK_DRIVER = cd $(JAVA_ADK_DIR) && java -cp "$(JAVA_ADK_CP)" dev.contextengine.adk.parity.Driver

## The Java client: code generated from proto/, compiled with -Xlint:all -Werror, the jar in
## clients/java/target (tests compiled, not run: test-java and test-clients run them).
java-build:
	$(MVNW) -DskipTests package

## The Java client's own tests (JUnit; they start the servers they need).
test-java: $(DEV_STAMP) java-build
	$(BIN)/python scripts/with_server.py $(JAVA_UNIT)

## The Java example agent loop against `make run`'s sidecar (or CONTEXTENGINE_TARGET).
java-example: java-build
	cd $(JAVA_DIR) && java -cp "$(JAVA_CP)" dev.contextengine.examples.AgentLoop $(ARGS)

## The Java jar and its test jar installed into ~/.m2 as they are (no second Java build), for
## the Kotlin client and the ADK Java drop-ins. install-file takes one file per run (its
## -Dfiles/-Dclassifiers are deploy-file's: install-file ignores them).
java-install: java-build
	$(MVNW) install:install-file -Dfile=$(JAVA_JAR).jar -DpomFile=pom.xml
	$(MVNW) install:install-file -Dfile=$(JAVA_JAR)-tests.jar -DpomFile=pom.xml -Dclassifier=tests

## The Kotlin client (coroutines) on the installed Java jars: one kotlinc run with -Werror
## (tests compiled, not run).
kotlin-build: java-install
	$(KOTLIN_MVNW) -DskipTests package

## The Kotlin client's own tests (JUnit; they start the servers they need).
test-kotlin: $(DEV_STAMP) kotlin-build
	$(BIN)/python scripts/with_server.py $(KOTLIN_UNIT)

## The Kotlin example agent loop against `make run`'s sidecar (or CONTEXTENGINE_TARGET).
kotlin-example: kotlin-build
	cd $(KOTLIN_DIR) && java -cp "$(KOTLIN_CP)" dev.contextengine.examples.kotlin.AgentLoop $(ARGS)

## The ADK Java drop-ins (clients/java-adk, google-adk 1.8.0 from Maven Central) on the Java jar
## installed into ~/.m2, compiled with -Xlint:all -Werror (tests compiled, not run).
java-adk-build: java-install
	$(JAVA_ADK_MVNW) -DskipTests package

## The ADK Java drop-ins' tests (JUnit, against a real sidecar; the example runs in them too).
test-java-adk: $(DEV_STAMP) java-adk-build
	$(BIN)/python scripts/with_server.py $(JAVA_ADK_UNIT)

## The ADK Java example agent against `make run`'s sidecar (or CONTEXTENGINE_TARGET).
java-adk-example: java-adk-build
	cd $(JAVA_ADK_DIR) && java -cp "$(JAVA_ADK_CP)" dev.contextengine.adk.examples.TravelAgent $(ARGS)

## The ADK Java parity driver alone: make java-adk-driver ARGS="--target ... --out ..."
java-adk-driver: java-adk-build
	$(JAVA_ADK_DRIVER) $(ARGS)

## Per model call overhead of the ADK Java drop-ins vs ADK Java's in-memory service (not in `make test`).
java-adk-bench: $(DEV_STAMP) java-adk-build
	$(BIN)/python scripts/with_server.py 'cd $(JAVA_ADK_DIR) && java -cp "$(JAVA_ADK_CP)" dev.contextengine.adk.bench.Overhead $$CONTEXTENGINE_TARGET $(ARGS)'

## The TypeScript client's own tests (a real server is started for them).
test-ts: $(DEV_STAMP) ts-gen
	$(BIN)/python scripts/with_server.py $(TS_UNIT)

## The ADK TypeScript drop-ins' tests (a real server is started for them).
test-ts-adk: $(DEV_STAMP) ts-gen ts-adk-deps
	$(BIN)/python scripts/with_server.py $(TS_ADK_UNIT)

## The ADK TypeScript example agent against `make run`'s sidecar (or CONTEXTENGINE_TARGET).
ts-adk-example: ts-gen ts-adk-deps
	cd $(TS_ADK_DIR) && node_modules/.bin/tsx examples/travel_agent.ts $(ARGS)

## Every client's conformance runner against one real server (reports in build/conformance/).
conformance: $(DEV_STAMP) ts-gen java-build kotlin-build
	$(BIN)/python scripts/with_server.py $(PY_CONFORMANCE) $(PY_CLIENT_CONFORMANCE) $(TS_CONFORMANCE) \
	  $(JAVA_CONFORMANCE) $(KOTLIN_CONFORMANCE)

## What `make test` runs for the clients: one server, every conformance runner, every client's
## unit tests; any failure fails the build.
test-clients: $(DEV_STAMP) ts-check ts-adk-check java-build kotlin-build java-adk-build
	$(BIN)/python scripts/with_server.py $(PY_CONFORMANCE) $(PY_CLIENT_CONFORMANCE) $(TS_CONFORMANCE) $(TS_UNIT) \
	  $(TS_ADK_UNIT) $(TS_ADK_EXAMPLE) \
	  $(JAVA_CONFORMANCE) $(JAVA_UNIT) $(KOTLIN_CONFORMANCE) $(KOTLIN_UNIT) $(JAVA_ADK_UNIT)

# --- ADK ports: one history -------------------------------------------------------------------

# Every ADK port's driver runs clients/conformance/adk/conversation.json with its drop-ins against
# ONE sidecar (each on its own app), then compare.py checks every model request of every port
# against google-adk 2.13's contents builder and each port's session log against the Python run's.
ADK_PARITY := $(CURDIR)/build/adk-parity
ADK_PARITY_ARGS = --target $$CONTEXTENGINE_TARGET --conversation $(CURDIR)/clients/conformance/adk/conversation.json --user parity-user --session parity-session
ADK_PARITY_PYTHON = '$(CURDIR)/$(BIN)/python clients/conformance/adk/python_driver.py $(ADK_PARITY_ARGS) --app adk-parity-python --out $(ADK_PARITY)/python.jsonl'
ADK_PARITY_TYPESCRIPT = 'cd $(TS_ADK_DIR) && node_modules/.bin/tsx parity/driver.ts $(ADK_PARITY_ARGS) --app adk-parity-typescript --out $(ADK_PARITY)/typescript.jsonl'
ADK_PARITY_JAVA = 'cd $(JAVA_ADK_DIR) && java -cp "$(JAVA_ADK_CP)" dev.contextengine.adk.parity.Driver $(ADK_PARITY_ARGS) --app adk-parity-java --out $(ADK_PARITY)/java.jsonl'
ADK_PARITY_COMPARE = '$(CURDIR)/$(BIN)/python clients/conformance/adk/compare.py --target $$CONTEXTENGINE_TARGET --require python,java,typescript $(ADK_PARITY)/python.jsonl $(ADK_PARITY)/java.jsonl $(ADK_PARITY)/typescript.jsonl'

# Generated conversations (clients/conformance/adk/generate.py) through the three ports, judged
# call by call against google-adk and against each other: a handful in `make test`.
ADK_GENERATED := $(CURDIR)/build/adk-generated
SEEDS ?= 1-300
ADK_GENERATED_RUN = '$(CURDIR)/$(BIN)/python clients/conformance/adk/generated.py --target $$CONTEXTENGINE_TARGET --work $(ADK_GENERATED) --seeds'

## The cross-language ADK parity run: the scripted conversation and 6 generated ones through
## google-adk, ADK Java and ADK TypeScript on one sidecar (reports in build/adk-parity/ and
## build/adk-generated/); part of test-clients.
adk-parity: $(DEV_STAMP) ts-gen ts-adk-deps java-adk-build
	rm -rf $(ADK_PARITY) && mkdir -p $(ADK_PARITY)
	$(BIN)/python scripts/with_server.py $(ADK_PARITY_PYTHON) $(ADK_PARITY_JAVA) $(ADK_PARITY_TYPESCRIPT) \
	  $(ADK_PARITY_COMPARE) $(ADK_GENERATED_RUN)' 1-6'

## As many generated conversations as asked through the three ports (not in `make test`):
## make adk-parity-generated SEEDS=1-300 (about a second a conversation on 2 cores).
adk-parity-generated: $(DEV_STAMP) ts-gen ts-adk-deps java-adk-build
	$(BIN)/python scripts/with_server.py $(ADK_GENERATED_RUN)' $(SEEDS)'

test-clients: adk-parity
.PHONY: adk-parity adk-parity-generated

# --- documentation ----------------------------------------------------------------------------

# The documentation site (mkdocs.yml; the docs extra): docs/, the front page and the clients'
# guides as they are, the API reference generated from proto/ (scripts/docs_hooks.py), into
# build/site (git-ignored). --strict: a broken link or anchor, or a page left out of the
# navigation, fails the build. NO_MKDOCS_2_WARNING silences Material's banner about MkDocs 2.
docs: $(DEV_STAMP) ## Build the documentation site into build/site (mkdocs --strict)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# --- deployment -------------------------------------------------------------------------------

## The deployment files: the Kubernetes manifests (deploy/kubernetes/**.yaml) against the
## Kubernetes $(KUBERNETES_VERSION) JSON schemas, strictly (kubernetes-validate: the schemas are in
## its wheel, offline), the Dockerfile linted (hadolint), deploy/requirements.lock up to date.
KUBERNETES_VERSION := 1.33.0
check-deploy: $(DEV_STAMP)
	$(BIN)/kubernetes-validate --strict --quiet -k $(KUBERNETES_VERSION) \
	  $$(find deploy/kubernetes -name '*.yaml' ! -name 'kustomization.yaml' | sort)
	$(BIN)/hadolint Dockerfile
	$(BIN)/ruff check deploy
	$(BIN)/ruff format --check deploy
	$(BIN)/mypy deploy/lock.py
	$(BIN)/python deploy/lock.py --check

## Rewrite deploy/requirements.lock (the image's pinned runtime dependencies) from the venv.
lock: $(DEV_STAMP)
	$(BIN)/python deploy/lock.py

## Benchmarks (not part of `make test`): this engine against google-adk on the same machine.
bench: $(DEV_STAMP)
	$(BIN)/python -m bench $(ARGS)

clean:
	rm -rf $(VENV) .tools .pytest_cache .mypy_cache .ruff_cache build $(TS_DIR)/node_modules $(TS_ADK_DIR)/node_modules $(TS_DIR)/src/gen $(TS_DIR)/dist $(JAVA_DIR)/target $(KOTLIN_DIR)/target $(JAVA_ADK_DIR)/target
