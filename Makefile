# Two entry points (README): `make study` runs the default study end to end,
# `make test` runs the test suite. Both build .venv on first use.
VENV  := .venv
BIN   := $(CURDIR)/$(VENV)/bin
# The CPU wheel of torch; on a GPU machine: make TORCH=torch study
DEFAULT_TORCH := torch==2.13.0
TORCH ?= $(DEFAULT_TORCH)
# Every core the machine offers; each job trains on one torch thread.
CORES ?= $(shell nproc)

export PATH := $(BIN):$(PATH)

.PHONY: study test test-slow measure lint figures-from-cache readme-figure clean slurm-test gpu-check example FORCE

# The virtualenv follows TORCH: one built with another spec ($(VENV)/.torch; a
# virtualenv without it was built with the default) is built again from
# scratch, since pip keeps an installed torch that satisfies the new spec
# (`torch` over the CPU build).
BUILT_TORCH := $(or $(shell cat $(VENV)/.torch 2>/dev/null),$(DEFAULT_TORCH))
ifneq ($(TORCH),$(BUILT_TORCH))
$(VENV)/.installed: FORCE
endif

# Everything but torch at the exact versions of requirements/lock.txt, so that a
# clone installs the same packages next year; the package itself without
# resolving again.
$(VENV)/.installed: pyproject.toml requirements/lock.txt
	[ "$(TORCH)" = "$(BUILT_TORCH)" ] || rm -rf $(VENV)
	python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -r requirements/lock.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	echo "$(TORCH)" > $(VENV)/.torch
	touch $@

study: $(VENV)/.installed
	snakemake --cores $(CORES)

# The tests spread over the cores, at most 8 workers (pytest-xdist; TEST_WORKERS=0:
# one process).
TEST_WORKERS ?= auto
XDIST = -n $(TEST_WORKERS) --maxprocesses 8

test: $(VENV)/.installed
	python -m pytest $(XDIST)

# The opt-in slow checks (coverage studies, DDP, kills in every stage, the ladder benchmark).
test-slow: $(VENV)/.installed
	python -m pytest -m slow $(XDIST)

# docs/analysis.md's rate tables measured again: false holds, false refutations, the
# claims' power and the planner against simulation, each over hundreds of simulated
# studies (opt-in; the fast suite checks each on a few; about 15 min on 2 cores).
measure: $(VENV)/.installed
	python -m pytest -m measure $(XDIST) -s

# The worked example of docs/extending.md, its commands as written there: a
# plugin architecture (examples/hyena) installed into the venv, and its study
# at smoke size beside the transformer and S4 (tests/test_docs_extending.py
# checks these lines are the doc's).
example: $(VENV)/.installed
	python -m pip install --quiet --no-deps -e examples/hyena
	snakemake --cores 2 --configfile examples/hyena/study.yaml examples/hyena/smoke.yaml

# The smoke study on a real SLURM scheduler started on this machine (installs
# slurm-wlm and munge from Debian if missing; root), then the example plugin's
# study there: tools/slurm/slurm-test.sh
slurm-test: $(VENV)/.installed
	python -m pip install --quiet --no-deps -e examples/hyena
	tools/slurm/slurm-test.sh

lint: $(VENV)/.installed
	ruff check src tests benchmarks tools analysis

# What only a GPU can confirm of the GPU path (tools/gpu_check.py; ~4 min, at most 8, on one
# H100 or H200): the report goes to results/gpu_check.json, a summary to the
# terminal. With a CUDA torch: make TORCH=torch gpu-check. Where torch sees no
# GPU it stops with one line; its CPU form is `python tools/gpu_check.py --device cpu`.
gpu-check: $(VENV)/.installed
	python tools/gpu_check.py --device cuda --out results/gpu_check.json

# Every figure, table and claims.md of a cached study (a collected runs.parquet),
# and its frontier/ when it has budgets, without training and without torch: the
# analysis install (pip install -e .) is enough.
#   make figures-from-cache                                    -> results/cache/default/
#   make figures-from-cache CACHE=data/cache/<name>.parquet   -> results/cache/<name>/
CACHE ?= data/cache/default.parquet
# OUT=<dir> writes elsewhere; FIT_ARGS passes options to `scalestudy analyse`
# (e.g. FIT_ARGS="--x params --n-boot 2000").
figures-from-cache:
	scalestudy analyse "$(CACHE)" --out-dir "$(or $(OUT),results/cache/$(basename $(notdir $(CACHE))))" $(FIT_ARGS)

# The README's figure: the default study's headline (scaling_overview), drawn
# from its committed cache. After the default study is run again:
#   cp results/default/runs.parquet data/cache/default.parquet && make readme-figure
README_FIGURE := docs/images/scaling_overview.png
readme-figure:
	$(MAKE) --no-print-directory figures-from-cache CACHE=data/cache/default.parquet OUT=results/cache/default
	mkdir -p $(dir $(README_FIGURE))
	cp results/cache/default/figures/scaling_overview.png $(README_FIGURE)

clean:
	rm -rf results .snakemake
