# Helmr: one entry point for building, running and testing.
# `make help` lists the targets.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
HELMR_CACHE ?= $(HOME)/.cache/helmr
export PATH := $(HELMR_CACHE)/bin/current:$(CURDIR)/$(VENV)/bin:$(PATH)

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

.PHONY: deps
deps: ## Install the Debian packages the build and cluster need (as root; cached), check Go
	hack/install-deps.sh

.PHONY: venv
venv: $(VENV)/.installed ## Create the virtualenv with every extra

.PHONY: build
build: ## Build the pinned Kubernetes components, etcd, helm, CoreDNS, the storage stack; unpack promtool (cached)
	hack/build.sh

.PHONY: images
images: ## Build the local images (pause, python, runner, operator, coredns; cached)
	hack/build-images.sh

.PHONY: cluster-up
cluster-up: ## Bring up the local single-node cluster (idempotent)
	hack/cluster-up.sh

.PHONY: cluster-down
cluster-down: ## Tear the local cluster down (state kept; hack/cluster-down.sh --purge removes it)
	hack/cluster-down.sh

.PHONY: cluster-status
cluster-status: ## Say what of the local cluster runs
	hack/cluster-status.sh

.PHONY: crds
crds: venv ## Regenerate crds/ from the pydantic models
	$(PY) -m helmr.resources

.PHONY: lint
lint: venv ## ruff, mypy --strict, import-linter, shellcheck, CRDs in step with the models
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(PY) -m helmr.resources --check
	@command -v shellcheck >/dev/null || { echo "shellcheck is missing: run hack/install-deps.sh as root"; exit 1; }
	shellcheck hack/*.sh hack/lib/*.sh .ci/run

# The unit tests in UNIT_WORKERS processes (pytest-xdist): they wait on
# subprocesses, databases and sockets more than they compute, so two workers on
# two cores take about two thirds of one's time. The cluster tests run after
# them in one process: they share one cluster, and their timings need its CPU.
UNIT_WORKERS ?= 2

.PHONY: unit
unit: venv ## Unit tests only (no cluster)
	$(VENV)/bin/pytest -m "not cluster" -n $(UNIT_WORKERS)

.PHONY: test
test: export HELMR_REQUIRE_HELM = 1
test: export HELMR_REQUIRE_PROMTOOL = 1
test: export HELMR_REQUIRE_POSTGRES = 1
test: deps venv lint ## Every test, cluster tests included (brings the local cluster up)
	$(VENV)/bin/pytest -m "not cluster" -n $(UNIT_WORKERS) --durations=15
	$(VENV)/bin/pytest -m cluster --durations=25
	hack/go-test.sh

.PHONY: demo
demo: deps venv ## Helm-install Helmr on the local cluster and drive a demo session
	hack/demo.sh
