# contextengine: the two commands a newcomer needs are `make run` and `make test`; `make check`
# is the fast loop while working, and `make help` lists every target: each has a `## ` comment on
# its line, which is what `make help` prints (tests/test_makefile.py checks that none lacks it).
SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
TOOLS := $(CURDIR)/.tools/bin
GRPCURL_VERSION := v1.9.3
RUN_STAMP := $(VENV)/.stamp-run
DEV_STAMP := $(VENV)/.stamp-dev
# Three distributions: the client (clients/python: contextengine.client and the generated
# contextengine.v1), the ADK drop-ins (clients/adk_python: contextengine.adk) and the server (the
# root), installed together by uv from one lock, uv.lock (docs/dependencies.md).
PY_CLIENT := clients/python
PY_ADK := clients/adk_python
PROJECTS := pyproject.toml $(PY_CLIENT)/pyproject.toml $(PY_ADK)/pyproject.toml
# uv, at the version pyproject.toml requires, in its own environment under .tools (made once, from
# PyPI). Its cache (~/.cache/uv) keeps every wheel it downloaded: a new environment, or the same
# one made again, downloads nothing twice. No Python is ever downloaded: uv uses the ones given.
UV_VERSION := 0.13.8
UV := $(TOOLS)/uv
export UV_PYTHON_DOWNLOADS := never
# The oldest and the newest supported Python (pyenv's, as this machine has them; or on PATH):
# `make test-pythons` runs the engine's core and store suites on each, in an environment of its
# own from the same lock (.venv-py3.10, .venv-py3.13; not committed).
PYENV_ROOT ?= $(HOME)/.pyenv
PYTHON_OLDEST ?= $(or $(lastword $(sort $(wildcard $(PYENV_ROOT)/versions/3.10.*/bin/python3.10))),$(shell command -v python3.10))
PYTHON_NEWEST ?= $(or $(lastword $(sort $(wildcard $(PYENV_ROOT)/versions/3.13.*/bin/python3.13))),$(shell command -v python3.13))
# What they run: the modules of these suites (on 3.10, those that do not need google-adk, which
# needs 3.11: tests/conftest.py), the PostgreSQL cases on the server tests/pg_server.py starts;
# not the differential tests against google-adk (parity) nor the multi-sidecar suite (scaling),
# which moved into these folders.
PYTHONS_SUITES ?= tests/core tests/store
PYTHONS_MARKERS ?= not scaling and not parity
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
# The ADK Java drop-ins, like the Kotlin client: the Java module's wrapper, on the installed Java jar.
JAVA_ADK_DIR := clients/java-adk
JAVA_ADK_MVNW := cd $(JAVA_ADK_DIR) && ../java/mvnw -B -q -T1

.PHONY: run test install install-dev gen check-gen lint fmt pytest bench tools clean postgres-server test-postgres
.PHONY: browser
.PHONY: ts-deps ts-gen ts-check test-ts test-ts-outside conformance test-clients java-build test-java java-example test-jvm-consumers
.PHONY: kotlin-build test-kotlin kotlin-example proto-baseline
.PHONY: java-adk-build test-java-adk java-adk-example java-adk-bench java-adk-driver
.PHONY: ts-adk-deps ts-adk-check test-ts-adk ts-adk-example
.PHONY: check-deploy lock help check lint-py pytest-fast check-commits hooks test-pythons docs fmt-jvm

# --- help -------------------------------------------------------------------------------------

help: ## List the targets, one line each (the default goal)
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) \
	  | sed -E 's/^([a-zA-Z0-9_-]+):.*## (.*)$$/\1\t\2/' \
	  | awk -F'\t' '{ printf "  %-22s %s\n", $$1, $$2 }'

# --- set-up -----------------------------------------------------------------------------------

$(UV):
	mkdir -p $(TOOLS)
	$(PYTHON) -m venv $(CURDIR)/.tools/uv
	$(CURDIR)/.tools/uv/bin/pip install -q uv==$(UV_VERSION)
	ln -sf $(CURDIR)/.tools/uv/bin/uv $@

# `uv sync --frozen` installs what uv.lock says, and nothing else (it never resolves: a lock that
# no longer matches the pyproject files fails `uv lock --check` in `make check-deploy`; `make
# lock`). The server, the client and the ADK drop-ins are installed editable. The run
# environment adds what it lacks and removes nothing (--inexact): a development one stays one.
$(RUN_STAMP): $(PROJECTS) uv.lock | $(UV)
	$(UV) sync --frozen --inexact --python $(PYTHON) --quiet
	touch $@

$(DEV_STAMP): $(PROJECTS) uv.lock | $(UV)
	$(UV) sync --frozen --all-extras --python $(PYTHON) --quiet
	touch $@ $(RUN_STAMP)

install: $(RUN_STAMP) ## The server's environment (.venv) from uv.lock, for `make run`
install-dev: $(DEV_STAMP) ## The development environment (.venv): every extra, from uv.lock

$(TOOLS)/grpcurl:
	mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) GOFLAGS=-mod=mod go install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)

tools: $(TOOLS)/grpcurl ## grpcurl (go install, into .tools/bin)

# The TypeScript client's dependencies, exactly as locked (cached in clients/typescript/node_modules,
# which is gitignored; refreshed when package.json or the lock changes).
$(TS_STAMP): $(TS_DIR)/package.json $(TS_DIR)/package-lock.json
	cd $(TS_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

ts-deps: $(TS_STAMP) ## The TypeScript client's npm dependencies, as locked

# The ADK TypeScript drop-ins' dependencies (@google/adk 2.0.0 and what it pulls), exactly as
# locked (cached in clients/typescript-adk/node_modules); they build on the TypeScript client's.
$(TS_ADK_STAMP): $(TS_ADK_DIR)/package.json $(TS_ADK_DIR)/package-lock.json | $(TS_STAMP)
	cd $(TS_ADK_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

ts-adk-deps: $(TS_ADK_STAMP) ## The ADK TypeScript drop-ins' npm dependencies, as locked

# --- the two commands -------------------------------------------------------------------------

run: $(RUN_STAMP) ## Start the sidecar on its defaults: ./contextengine.db, 127.0.0.1:50151
	$(BIN)/contextengine serve $(ARGS)

# The one full gate, which CI runs (.ci/run): every check, every suite, every client, and the core
# and store suites on the oldest and the newest supported Python.
test: $(DEV_STAMP) tools check-gen lint check-deploy docs pytest test-pythons test-clients ## Set up everything; run every check and test suite (CI's gate)

# The fast loop (issue #35): commit subjects, ruff, mypy and the Python tests that need no
# PostgreSQL and no browser (pytest starts no JVM and no Node: the clients' suites are
# test-clients'), without those marked slow (process kills, many clients) or parity (the
# differential suites against google-adk): about 2,400 of the 3,100 tests, on both cores
# (pytest-xdist) beside lint and types; the wall time at the end. `make test` runs them all.
CHECK_MARKERS ?= not postgres and not browser and not slow and not parity
check: $(DEV_STAMP) ## The fast loop: commit subjects, ruff, mypy, most Python tests (not PostgreSQL/browser/slow/parity)
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory -j2 --output-sync=target check-commits lint-py pytest-fast; \
	status=$$?; \
	echo "make check: $$(( $$(date +%s) - start )) s wall time$$([ $$status = 0 ] || echo ', FAILED')"; \
	exit $$status

lint-py: $(DEV_STAMP) ## Ruff (lint and format check) and mypy --strict: `make lint` without buf
	$(BIN)/ruff check $(RUFF_PATHS)
	$(BIN)/ruff format --check $(RUFF_PATHS)
	$(MYPY_ALL)

pytest-fast: $(DEV_STAMP) ## make check's tests: not PostgreSQL, browser, slow or parity; two workers
	$(BIN)/pytest -q -p no:cacheprovider -n 2 -m "$(CHECK_MARKERS)" $(PYTEST_ARGS)

# scripts/check_commits.py: the commits since origin/main's merge base (or main's), never those
# before scripts/commit-baseline (where the rule began); a shallow clone checks what it has.
check-commits: ## Commit subjects on this branch: at most 72 characters (detail in the body)
	$(PYTHON) scripts/check_commits.py

hooks: ## Install the commit-msg hook that checks each new commit's subject
	ln -sf "$(CURDIR)/scripts/commit-msg" "$$(git rev-parse --git-path hooks)/commit-msg"

# The oldest and the newest supported Python, each in its environment from uv.lock (the test extra:
# on 3.10 without google-adk, which needs 3.11), running $(PYTHONS_SUITES).
.venv-py%/.stamp-test: $(PROJECTS) uv.lock | $(UV)
	@test -n "$(PYTHON_$(if $(filter 3.10,$*),OLDEST,NEWEST))" \
	  || { echo "no Python $* (pyenv install $*, or PYTHON_OLDEST/PYTHON_NEWEST=...)" >&2; exit 1; }
	UV_PROJECT_ENVIRONMENT=.venv-py$* $(UV) sync --frozen --extra test \
	  --python $(PYTHON_$(if $(filter 3.10,$*),OLDEST,NEWEST)) --quiet
	touch $@

test-pythons: .venv-py3.10/.stamp-test .venv-py3.13/.stamp-test postgres-server ## The core and store suites on Python 3.10 and 3.13 (part of `make test`)
	.venv-py3.10/bin/pytest -q -p no:cacheprovider -m "$(PYTHONS_MARKERS)" $(PYTHONS_SUITES)
	.venv-py3.13/bin/pytest -q -p no:cacheprovider -m "$(PYTHONS_MARKERS)" $(PYTHONS_SUITES)

# --- pieces -----------------------------------------------------------------------------------

gen: $(DEV_STAMP) ## Regenerate the Python code from proto/ (committed)
	PYTHON=$(BIN)/python scripts/gen_proto.sh

check-gen: $(DEV_STAMP) ## Fail when the committed generated Python is stale
	PYTHON=$(BIN)/python scripts/check_gen.sh

# At a release: the API `buf breaking` compares with from then on (proto/baseline.json).
proto-baseline: $(DEV_STAMP) ## At a release: the API that buf breaking compares with from then on
	$(BIN)/buf build --exclude-source-info -o proto/baseline.json

# `buf breaking` compares proto/ with the released API, proto/baseline.json (a buf image of
# proto/ without source info, committed): every change since the release must be compatible on
# the wire and in JSON (buf's FILE rules). The baseline moves only at a release, deliberately:
# `make proto-baseline`. Offline, the same on main and on any branch. `make lint BUF_AGAINST=...`
# compares with something else (e.g. '.git#branch=main').
BUF_AGAINST ?= proto/baseline.json

RUFF_PATHS := server $(PY_CLIENT) $(PY_ADK) tests bench scripts clients/conformance examples
# mypy --strict: the engine and the client at Python 3.10, the floor (pyproject.toml), with the
# programs that run on the client alone; what needs google-adk (the drop-ins, the tests, the
# benchmarks, the parity drivers, the examples) at 3.11, google-adk 2.13's floor; the core and
# store suites, which `make test-pythons` runs on 3.10 too, at 3.10 as well (without the module
# that needs google-adk, which 3.10 does not collect).
# the multi-sidecar suite of tests/store/postgres, which test-pythons leaves out (marked scaling),
# uses asyncio.timeout (3.11+)
PYTHONS_MYPY_EXCLUDED := tests/store/postgres/(holder|sidecars|test_(faults|feed|interleavings|pg_faults|sidecars|since_sidecars))\.py
MYPY_ALL = $(BIN)/mypy \
	&& $(BIN)/mypy --python-version 3.10 clients/conformance/driver.py \
	  $(PY_CLIENT)/conformance/harness.py scripts/with_server.py scripts/check_commits.py \
	  scripts/jvm_consumer.py \
	&& $(BIN)/mypy --python-version 3.11 -p contextengine.adk -p tests -p bench \
	&& $(BIN)/mypy --python-version 3.10 tests/core tests/store tests/conftest.py tests/pg_server.py \
	  --exclude 'tests/core/test_compaction_pins\.py|$(PYTHONS_MYPY_EXCLUDED)' \
	&& $(BIN)/mypy --python-version 3.11 clients/conformance/adk/python_driver.py \
	  clients/conformance/adk/compare.py clients/conformance/adk/generate.py \
	  clients/conformance/adk/generated.py \
	&& $(BIN)/mypy --python-version 3.11 examples/python \
	&& $(BIN)/mypy --python-version 3.11 examples/adk_python

lint: $(DEV_STAMP) ## buf lint and breaking, ruff (lint, format), mypy --strict
	$(BIN)/buf lint
	$(BIN)/buf breaking --against '$(BUF_AGAINST)'
	$(BIN)/ruff check $(RUFF_PATHS)
	$(BIN)/ruff format --check $(RUFF_PATHS)
	$(MYPY_ALL)

fmt: $(DEV_STAMP) ## Apply ruff's fixes and formatting
	$(BIN)/ruff check --fix $(RUFF_PATHS)
	$(BIN)/ruff format $(RUFF_PATHS)

# The JVM clients' formatter (spotless-maven-plugin): google-java-format, GOOGLE style, for
# clients/java and clients/java-adk; ktfmt, kotlinlang style, for clients/kotlin. Each module's
# build checks it (spotless:check at process-sources: java-build, kotlin-build and java-adk-build
# fail on an unformatted file, as ts-check does with Biome); this applies it.
fmt-jvm: ## Apply google-java-format (Java) and ktfmt (Kotlin) to the JVM clients' sources
	$(MVNW) spotless:apply
	$(KOTLIN_MVNW) spotless:apply
	$(JAVA_ADK_MVNW) spotless:apply

pytest: $(DEV_STAMP) tools postgres-server browser ## Every Python test (PostgreSQL and Chromium included)
	PATH="$(TOOLS):$$PATH" $(BIN)/pytest $(PYTEST_ARGS)

# The PostgreSQL server binaries the PostgreSQL suites run (tests/pg_server.py starts a server in a
# temp dir per run): apt-get install postgresql-15 on a fresh machine when root, before pytest.
postgres-server: $(DEV_STAMP) ## PostgreSQL's server binaries for the tests (apt-get when root)
	$(BIN)/python -m tests.pg_server

# Debian's Chromium, which the inspector's browser tests drive with Playwright (tests/browser.py):
# apt-get install chromium on a fresh machine when root, before pytest; a no-op when present.
# Playwright's own browser download is never used (`playwright install` is never run).
browser: $(DEV_STAMP) ## Debian's Chromium for the browser tests (apt-get when root)
	$(BIN)/python -m tests.browser

# The suites over the PostgreSQL store alone (also part of `make pytest`): the PostgreSQL cases
# and tests/store/postgres, without its multi-sidecar suite (marked scaling; `make pytest` runs it).
test-postgres: $(DEV_STAMP) postgres-server ## The suites over the PostgreSQL store alone
	$(BIN)/pytest -q -k postgres -m "not scaling" tests/store tests/memory tests/service

# --- clients ----------------------------------------------------------------------------------

## TypeScript code generated from proto/ into clients/typescript/src/gen (gitignored), every build.
ts-gen: $(TS_STAMP) ## TypeScript code generated from proto/ (gitignored)
	cd $(TS_DIR) && npm run --silent gen

## Biome (lint + format) and the strict type check of the TypeScript client.
ts-check: ts-gen ## Biome and the strict type check of the TypeScript client
	cd $(TS_DIR) && node_modules/.bin/biome ci --error-on-warnings --colors=off .
	cd $(TS_DIR) && node_modules/.bin/tsc -p tsconfig.json

## Biome (lint + format) and the strict type check of the ADK TypeScript drop-ins.
ts-adk-check: ts-gen ts-adk-deps ## Biome and the strict type check of the ADK TypeScript drop-ins
	cd $(TS_ADK_DIR) && node_modules/.bin/biome ci --error-on-warnings --colors=off .
	cd $(TS_ADK_DIR) && node_modules/.bin/tsc -p tsconfig.json

# The conformance driver (clients/conformance/driver.py): scenarios, variables, matching and reports,
# once; each runner is the driver with one harness (a process speaking JSON lines, README.md).
# Without --harness it uses its built-in reference harness over raw gRPC stubs.
CONFORMANCE_DRIVER = $(CURDIR)/$(BIN)/python clients/conformance/driver.py --target $$CONTEXTENGINE_TARGET
CONFORMANCE_SCENARIOS = $(CURDIR)/clients/conformance/scenarios
PY_CONFORMANCE = '$(CONFORMANCE_DRIVER) --report $(CONFORMANCE_REPORTS)/python.jsonl $(CONFORMANCE_SCENARIOS)'
# The same scenarios through the Python client (ContextEngineClient), as the other languages' harnesses.
PY_CLIENT_CONFORMANCE = '$(CONFORMANCE_DRIVER) --name python-client --harness "$(CURDIR)/$(BIN)/python $(PY_CLIENT)/conformance/harness.py" --report $(CONFORMANCE_REPORTS)/python-client.jsonl $(CONFORMANCE_SCENARIOS)'
TS_CONFORMANCE = '$(CONFORMANCE_DRIVER) --name typescript --harness "cd $(TS_DIR) && exec node_modules/.bin/tsx conformance/harness.ts" --report $(CONFORMANCE_REPORTS)/typescript.jsonl $(CONFORMANCE_SCENARIOS)'
TS_UNIT = 'cd $(TS_DIR) && node --import tsx --test test/*.test.ts'
TS_ADK_UNIT = 'cd $(TS_ADK_DIR) && node --import tsx --test test/*.test.ts'
# The TypeScript client as an outside project installs it, from its guide: npm pack, a fresh
# directory, npm install of the tarball, strict tsc, a context fetched (test/outside/).
TS_OUTSIDE = 'cd $(TS_DIR) && node --import tsx --test test/outside/*.test.ts' \
  'cd $(TS_ADK_DIR) && node --import tsx --test test/outside/*.test.ts'
TS_ADK_EXAMPLE = 'cd $(TS_ADK_DIR) && node_modules/.bin/tsx examples/travel_agent.ts'
JAVA_CP = $$(cat target/test-classpath.txt):target/classes:target/test-classes
# A JVM harness's class path, read by the harness command's shell (after its cd), not the driver's.
JVM_HARNESS_CP = \$$(cat target/test-classpath.txt):target/classes:target/test-classes
JAVA_CONFORMANCE = '$(CONFORMANCE_DRIVER) --name java --harness "cd $(JAVA_DIR) && exec java -cp \"$(JVM_HARNESS_CP)\" dev.contextengine.conformance.Harness" --report $(CONFORMANCE_REPORTS)/java.jsonl $(CONFORMANCE_SCENARIOS)'
JAVA_UNIT = 'cd $(JAVA_DIR) && ./mvnw -B -ntp -T1 surefire:test'
KOTLIN_CP = $$(cat target/test-classpath.txt):target/classes:target/test-classes
KOTLIN_CONFORMANCE = '$(CONFORMANCE_DRIVER) --name kotlin --harness "cd $(KOTLIN_DIR) && exec java -cp \"$(JVM_HARNESS_CP)\" dev.contextengine.conformance.KotlinHarness" --report $(CONFORMANCE_REPORTS)/kotlin.jsonl $(CONFORMANCE_SCENARIOS)'
KOTLIN_UNIT = 'cd $(KOTLIN_DIR) && ../java/mvnw -B -ntp -T1 surefire:test'
# The outside projects of the Java, Kotlin and ADK Java guides (scripts/jvm_consumer.py): each
# guide's pom and first block, built in a fresh directory against the installed jars, run against
# the sidecar (the ADK Java one with a scripted model).
JVM_CONSUMERS = '$(CURDIR)/$(BIN)/python scripts/jvm_consumer.py java kotlin java-adk'
JAVA_ADK_CP = $$(cat target/test-classpath.txt):target/classes:target/test-classes
JAVA_ADK_UNIT = 'cd $(JAVA_ADK_DIR) && ../java/mvnw -B -ntp -T1 surefire:test'
# The ADK Java parity driver (clients/conformance/adk/README.md contract); append its arguments
# (absolute paths: it runs in $(JAVA_ADK_DIR)). Needs java-adk-build.
JAVA_ADK_DRIVER = cd $(JAVA_ADK_DIR) && java -cp "$(JAVA_ADK_CP)" dev.contextengine.adk.parity.Driver

## The Java client: code generated from proto/, compiled with -Xlint:all -Werror, the jar in
## clients/java/target (tests compiled, not run: test-java and test-clients run them), installed
## with its test jar into the local Maven repository (~/.m2, or MAVEN_ARGS' maven.repo.local):
## what the guide tells an outside project to depend on, and what the Kotlin client and the ADK
## Java drop-ins build on.
java-build: ## The Java client's jar, installed into ~/.m2 (-Xlint:all -Werror; tests compiled, not run)
	$(MVNW) -DskipTests install

## The Java client's own tests (JUnit; they start the servers they need).
test-java: $(DEV_STAMP) java-build ## The Java client's own tests
	$(BIN)/python scripts/with_server.py $(JAVA_UNIT)

## The Java, Kotlin and ADK Java guides' outside projects (pom and first block, a fresh directory,
## the installed jars), run against a real sidecar; part of test-clients.
test-jvm-consumers: $(DEV_STAMP) java-build kotlin-build java-adk-build ## Build the JVM guides' outside projects; fetch a context with each
	$(BIN)/python scripts/with_server.py $(JVM_CONSUMERS)

## The Java example agent loop against `make run`'s sidecar (or CONTEXTENGINE_TARGET).
java-example: java-build ## The Java example agent loop against a running sidecar
	cd $(JAVA_DIR) && java -cp "$(JAVA_CP)" dev.contextengine.examples.AgentLoop $(ARGS)


## The Kotlin client (coroutines) on the installed Java jars: one kotlinc run with -Werror
## (tests compiled, not run).
kotlin-build: java-build ## The Kotlin client's jar, installed into ~/.m2 (-Werror; tests compiled, not run)
	$(KOTLIN_MVNW) -DskipTests install

## The Kotlin client's own tests (JUnit; they start the servers they need).
test-kotlin: $(DEV_STAMP) kotlin-build ## The Kotlin client's own tests
	$(BIN)/python scripts/with_server.py $(KOTLIN_UNIT)

## The Kotlin example agent loop against `make run`'s sidecar (or CONTEXTENGINE_TARGET).
kotlin-example: kotlin-build ## The Kotlin example agent loop against a running sidecar
	cd $(KOTLIN_DIR) && java -cp "$(KOTLIN_CP)" dev.contextengine.examples.kotlin.AgentLoop $(ARGS)

## The ADK Java drop-ins (clients/java-adk, google-adk 1.8.0 from Maven Central) on the Java jar
## installed into ~/.m2, compiled with -Xlint:all -Werror (tests compiled, not run).
java-adk-build: java-build ## The ADK Java drop-ins' jar, installed into ~/.m2 (google-adk 1.8.0)
	$(JAVA_ADK_MVNW) -DskipTests install

## The ADK Java drop-ins' tests (JUnit, against a real sidecar; the example runs in them too).
test-java-adk: $(DEV_STAMP) java-adk-build ## The ADK Java drop-ins' tests, against a real sidecar
	$(BIN)/python scripts/with_server.py $(JAVA_ADK_UNIT)

## The ADK Java example agent against `make run`'s sidecar (or CONTEXTENGINE_TARGET).
java-adk-example: java-adk-build ## The ADK Java example agent against a running sidecar
	cd $(JAVA_ADK_DIR) && java -cp "$(JAVA_ADK_CP)" dev.contextengine.adk.examples.TravelAgent $(ARGS)

## The ADK Java parity driver alone: make java-adk-driver ARGS="--target ... --out ..."
java-adk-driver: java-adk-build ## The ADK Java parity driver alone (ARGS=...)
	$(JAVA_ADK_DRIVER) $(ARGS)

## Per model call overhead of the ADK Java drop-ins vs ADK Java's in-memory service (not in `make test`).
java-adk-bench: $(DEV_STAMP) java-adk-build ## Per-call overhead of the ADK Java drop-ins (not in make test)
	$(BIN)/python scripts/with_server.py 'cd $(JAVA_ADK_DIR) && java -cp "$(JAVA_ADK_CP)" dev.contextengine.adk.bench.Overhead $$CONTEXTENGINE_TARGET $(ARGS)'

## The TypeScript client's own tests (a real server is started for them).
test-ts: $(DEV_STAMP) ts-gen ## The TypeScript client's own tests
	$(BIN)/python scripts/with_server.py $(TS_UNIT)

## The TypeScript client packed, installed in a fresh project as its guide says, and used.
test-ts-outside: $(DEV_STAMP) ts-deps ts-adk-deps ## The TS client and ADK drop-ins from tarballs in a fresh project, as their guides say
	$(BIN)/python scripts/with_server.py $(TS_OUTSIDE)

## The ADK TypeScript drop-ins' tests (a real server is started for them).
test-ts-adk: $(DEV_STAMP) ts-gen ts-adk-deps ## The ADK TypeScript drop-ins' tests
	$(BIN)/python scripts/with_server.py $(TS_ADK_UNIT)

## The ADK TypeScript example agent against `make run`'s sidecar (or CONTEXTENGINE_TARGET).
ts-adk-example: ts-gen ts-adk-deps ## The ADK TypeScript example agent against a running sidecar
	cd $(TS_ADK_DIR) && node_modules/.bin/tsx examples/travel_agent.ts $(ARGS)

## The conformance driver with every client's harness against one real server (reports in
## build/conformance/).
conformance: $(DEV_STAMP) ts-gen java-build kotlin-build ## Every client's conformance runner against one server
	$(BIN)/python scripts/with_server.py $(PY_CONFORMANCE) $(PY_CLIENT_CONFORMANCE) $(TS_CONFORMANCE) \
	  $(JAVA_CONFORMANCE) $(KOTLIN_CONFORMANCE)

## What `make test` runs for the clients: one server, the conformance driver with every harness, every client's
## unit tests; any failure fails the build.
test-clients: $(DEV_STAMP) ts-check ts-adk-check java-build kotlin-build java-adk-build adk-parity ## Every client's conformance and unit tests, the ADK parity run
	$(BIN)/python scripts/with_server.py $(PY_CONFORMANCE) $(PY_CLIENT_CONFORMANCE) $(TS_CONFORMANCE) $(TS_UNIT) \
	  $(TS_OUTSIDE) $(TS_ADK_UNIT) $(TS_ADK_EXAMPLE) \
	  $(JAVA_CONFORMANCE) $(JAVA_UNIT) $(KOTLIN_CONFORMANCE) $(KOTLIN_UNIT) $(JAVA_ADK_UNIT) \
	  $(JVM_CONSUMERS)

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
adk-parity: $(DEV_STAMP) ts-gen ts-adk-deps java-adk-build ## The cross-language ADK parity run (part of test-clients)
	rm -rf $(ADK_PARITY) && mkdir -p $(ADK_PARITY)
	$(BIN)/python scripts/with_server.py $(ADK_PARITY_PYTHON) $(ADK_PARITY_JAVA) $(ADK_PARITY_TYPESCRIPT) \
	  $(ADK_PARITY_COMPARE) $(ADK_GENERATED_RUN)' 1-6'

## As many generated conversations as asked through the three ports (not in `make test`):
## make adk-parity-generated SEEDS=1-300 (about a second a conversation on 2 cores).
adk-parity-generated: $(DEV_STAMP) ts-gen ts-adk-deps java-adk-build ## More generated conversations through the three ports (SEEDS=1-300)
	$(BIN)/python scripts/with_server.py $(ADK_GENERATED_RUN)' $(SEEDS)'

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
## its wheel, offline), the Dockerfile linted (hadolint), uv.lock up to date with the pyproject
## files (the lock the image installs from).
KUBERNETES_VERSION := 1.33.0
check-deploy: $(DEV_STAMP) ## Kubernetes manifests, Dockerfile lint, uv.lock up to date
	$(BIN)/kubernetes-validate --strict --quiet -k $(KUBERNETES_VERSION) \
	  $$(find deploy/kubernetes -name '*.yaml' ! -name 'kustomization.yaml' | sort)
	$(BIN)/hadolint Dockerfile
	$(UV) lock --check --quiet

## Resolve uv.lock again after a pyproject change (versions already locked are kept when they
## still fit; `make lock ARGS=--upgrade` moves everything to the newest that fits).
lock: | $(UV) ## Resolve uv.lock again (after a change to a pyproject.toml)
	$(UV) lock $(ARGS)

## Benchmarks (not part of `make test`): this engine against google-adk on the same machine.
bench: $(DEV_STAMP) ## Benchmarks against google-adk (not part of make test)
	$(BIN)/python -m bench $(ARGS)

clean: ## Remove every environment, cache and build output
	rm -rf $(VENV) .venv-py3.10 .venv-py3.13 .tools .pytest_cache .mypy_cache .ruff_cache build $(TS_DIR)/node_modules $(TS_ADK_DIR)/node_modules $(TS_DIR)/src/gen $(TS_DIR)/dist $(JAVA_DIR)/target $(KOTLIN_DIR)/target $(JAVA_ADK_DIR)/target
