# Two entry points (README): `make study` runs the default study end to end,
# `make test` runs the test suite. Both build .venv on first use.
VENV  := .venv
BIN   := $(CURDIR)/$(VENV)/bin
# The CPU wheel of torch; on a GPU machine: make TORCH=torch study
TORCH ?= torch==2.13.0
CORES ?= 2

export PATH := $(BIN):$(PATH)

.PHONY: study test lint figures-from-cache clean

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@

study: $(VENV)/.installed
	snakemake --cores $(CORES)

test: $(VENV)/.installed
	python -m pytest

lint: $(VENV)/.installed
	ruff check src tests benchmarks analysis

clean:
	rm -rf results .snakemake
