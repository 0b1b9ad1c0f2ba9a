# Lattice Operator — developer entry points. `make dev` and `make test` are all a newcomer needs.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
LATTICE := $(VENV)/bin/lattice
# The venv is rebuilt only when the dependency pins change.
VENV_STAMP := $(VENV)/.stamp-$(shell cat pyproject.toml devtools/pyproject.toml requirements.lock 2>/dev/null | sha256sum | cut -c1-12)
PYTEST_ARGS ?=
# The suite's workers (pytest-xdist; 0: one process). Each has its own control plane, Sprites
# server and operators, nothing shared; a file's tests stay on one worker (module fixtures).
# One process on a given $KUBECONFIG: two workers' operators would share its cluster-wide
# webhook configurations.
TEST_WORKERS ?= $(if $(KUBECONFIG),0,2)
# Long set-up steps say what they do, how far along they are and how long each took.
PROGRESS := $(PYTHON) hack/progress.py

.PHONY: help setup setup-dev setup-go setup-apt venv tools sprite-rootfs browser prometheus github-fixtures node-tools registry image chart-package chart dashboards test unit lint typecheck crds crds-check cluster-up cluster-down node-up node-down dev bench soak node-test clean

help: ## Show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s "$$(printf '\t')"

# The set-up's cache root (the binaries, the image, mypy's cache and uv live there).
CACHE := $(or $(LATTICE_CACHE),$(HOME)/.cache/lattice-operator)
# uv makes the virtualenv: from its cache (~/.cache/uv) a clean clone's venv takes about 16 s
# with its bytecode compiled on both cores, where pip took 64 s (25 s of it compiling on one).
# uv itself is installed once per machine, pinned, by pip into the cache.
UV_VERSION := 0.13.9
UV := $(CACHE)/uv-$(UV_VERSION)/bin/uv

$(UV):
	@mkdir -p $(CACHE) && tmp="$$(mktemp -d $(CACHE)/uv-install.XXXXXX)" \
	  && $(PYTHON) -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target "$$tmp" uv==$(UV_VERSION) \
	  && rm -rf $(CACHE)/uv-$(UV_VERSION) && mv "$$tmp" $(CACHE)/uv-$(UV_VERSION)

# Both distributions, editable: the operator (with its test and dev extras) and the dev tools.
$(VENV_STAMP): pyproject.toml devtools/pyproject.toml requirements.lock | $(UV)
	@test -x $(PY) || UV_PYTHON_DOWNLOADS=never $(UV) venv --quiet --python $(PYTHON) $(VENV)
	UV_PYTHON_DOWNLOADS=never $(UV) pip install --quiet --compile-bytecode --python $(PY) -c requirements.lock -e '.[test,dev]' -e ./devtools
	@rm -f $(VENV)/.stamp-* && touch $@

venv: $(VENV_STAMP) ## Create/refresh the virtualenv from the pinned lock file
	@:

# On a fresh machine the set-up steps overlap in lanes: the Go builds one after another (they
# share one build cache and packages, and each uses both cores), the Debian packages one after
# another (one dpkg lock; hack/apt-pinned.sh also waits for it), the virtualenv, the sprites'
# root filesystem and the npm fixtures. Warm, every step only checks its cache.
setup: ## Everything make test needs, independent steps at once (cached; once per machine)
	@$(MAKE) --no-print-directory -j4 venv setup-go setup-apt github-fixtures

setup-dev: ## Everything make dev needs, the same way
	@$(MAKE) --no-print-directory -j2 venv tools sprite-rootfs

setup-go:
	@for step in tools node-tools registry; do $(MAKE) --no-print-directory $$step || exit 1; done

setup-apt:
	@for step in sprite-rootfs browser prometheus; do $(MAKE) --no-print-directory $$step || exit 1; done

tools: ## Build the pinned Kubernetes binaries (cached outside the clone; once per machine)
	@$(PROGRESS) tools --steps 6 -- bash hack/build-tools.sh >/dev/null

sprite-rootfs: ## Build the sprites' Debian root filesystem for the local Sprites server (cached; once per machine)
	@$(PROGRESS) sprite-rootfs -- bash hack/build-sprite-rootfs.sh >/dev/null

browser: ## Install the pinned headless Chromium the live page's test drives (Debian package)
	@bash -c 'source hack/browser.env && bash hack/apt-pinned.sh $$BROWSER_PACKAGES' >/dev/null

prometheus: ## Install the pinned Prometheus and promtool the monitoring tests run (Debian package)
	@bash -c 'source hack/prometheus.env && bash hack/apt-pinned.sh $$PROMETHEUS_PACKAGES' >/dev/null

node-tools: ## Build the node's binaries: kubelet, kube-scheduler, kube-proxy (cached like tools)
	@$(PROGRESS) node-tools --steps 4 -- bash hack/build-node-tools.sh >/dev/null

registry: ## Build the node tests' registry (CNCF distribution), crane and htpasswd (pinned Go modules; cached like tools)
	@$(PROGRESS) registry --steps 3 -- bash hack/build-registry.sh >/dev/null

github-fixtures: ## GitHub's OpenAPI description and webhook examples for the local GitHub (npm, pinned; cached)
	@$(PROGRESS) github-fixtures -- bash hack/github-fixtures.sh >/dev/null

image: ## Build the operator image as an OCI archive, daemonless (cached; path on the last line)
	@$(PROGRESS) image --steps 4 -- bash hack/build-image.sh

chart-package: tools ## Package the chart pinned to a pushed image: make chart-package IMAGE_REPOSITORY=host/lattice/lattice-operator IMAGE_DIGEST=sha256:... (path on the last line)
	@bash hack/package-chart.sh "$(IMAGE_REPOSITORY)" "$(IMAGE_DIGEST)" $(CHART_DESTINATION)

chart: venv tools ## Static checks of charts/lattice-operator: helm lint --strict, template matrix, strict server dry run
	$(PY) -m pytest tests/chart $(PYTEST_ARGS)

lint: venv ## ruff lint and format check; the import layering (import-linter contracts)
	$(VENV)/bin/ruff check operator adapters devtools dashboards tests
	$(VENV)/bin/ruff format --check operator adapters devtools dashboards tests
	$(VENV)/bin/lint-imports --no-cache

# mypy's incremental cache lives outside the clone, beside the built binaries: a fresh clone's
# check reuses what an earlier one checked (mypy checks again every file whose content differs).
MYPY_CACHE := $(CACHE)/mypy

typecheck: venv ## mypy --strict on the operator's packages, the dev tools and the dashboard code
	MYPY_CACHE_DIR=$(MYPY_CACHE) $(VENV)/bin/mypy operator/lattice_operator adapters/lattice_adapters devtools/lattice_devtools dashboards

crds: venv ## Regenerate crds/ from the models (and the Helm chart's copy)
	$(LATTICE) crds --output crds
	rm -f charts/lattice-operator/crds/*.yaml && cp crds/*.yaml charts/lattice-operator/crds/

dashboards: venv ## Regenerate dashboards/ (and the Helm chart's copy) with the Grafana Foundation SDK
	$(PY) -m dashboards.lattice

crds-check: venv
	$(LATTICE) crds --output crds --check

unit: venv ## Only the tests that need no cluster
	$(PY) -m pytest tests/unit tests/test_layout.py $(PYTEST_ARGS)

# The node tests start first, in the background (they mostly wait on a real node); the static
# checks run beside the suite; their reports (checks.log, node-test.log) are printed after it.
test: setup ## Everything: lint, types, unit, contract, e2e and node tests (root)
	$(PY) -m tests.support.make_test --workers $(TEST_WORKERS) --checks "$(MAKE) --no-print-directory lint typecheck crds-check" $(PYTEST_ARGS)

cluster-up: venv tools ## Start the local control plane (kubeconfig in .lattice/cluster/)
	$(LATTICE) cluster up

cluster-down: venv ## Stop the local control plane started by cluster-up
	$(LATTICE) cluster down

node-up: venv tools node-tools ## A single-node cluster (kubelet, containerd) in a network namespace; root
	$(LATTICE) cluster up --node --state-dir .lattice/node

node-down: venv ## Stop the node cluster started by node-up
	$(LATTICE) cluster down --state-dir .lattice/node

dev: setup-dev ## The whole stack on this machine, with a sample driven to completion
	$(LATTICE) dev

node-test: venv tools sprite-rootfs prometheus node-tools registry ## Only the node tests (part of make test): the chart on a real node in a network namespace; root
	$(PY) -m pytest -m node tests/node $(PYTEST_ARGS)

bench: venv tools sprite-rootfs prometheus ## Benchmarks; figures go to bench-results/, issue 17's table printed last
	$(PY) -m pytest -m bench tests/bench $(PYTEST_ARGS)
	@$(PY) -m tests.bench.report

ROUNDS ?= 5
soak: venv tools sprite-rootfs browser prometheus github-fixtures ## Contract and e2e suites ROUNDS times (default 5) under a bounded CPU hog; failures per test in soak-results/
	$(PY) -m tests.support.soak --rounds $(ROUNDS) $(PYTEST_ARGS)

clean: ## Remove the virtualenv and local state (not the binary cache)
	-$(LATTICE) cluster down 2>/dev/null
	rm -rf $(VENV) .lattice bench-results soak-results node-test.log checks.log .pytest_cache .mypy_cache .ruff_cache
