# Inquire workbench: one way to install, run, test and benchmark.
#   make run [PROFILE=smoke|cpu|gpu]   execute every notebook with papermill
#   make test                          the pytest suite
#   make bench                         every benchmarks/*.py
#   make lab                           JupyterLab on the repo
#   make strip                         clear outputs of notebooks/*.ipynb

PROFILE ?= cpu
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Installed on their own, before the project: with these two in place pip never resolves another
# torch (which would be a multi-GB CUDA download). Keep equal to the pins in pyproject.toml.
TORCH_PINS := torch==2.14.1 torchvision==0.29.1
BENCHMARKS := $(filter-out benchmarks/_%,$(sort $(wildcard benchmarks/*.py)))
# JupyterLab refuses to start as root unless told.
LAB_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: install run test bench lab strip

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

# The stamp makes a second `make test` skip pip entirely until pyproject.toml changes.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install $(TORCH_PINS)
	$(BIN)/python -m pip install -e '.[test]'
	touch $@

install: $(STAMP)

run: $(STAMP)
	$(BIN)/inquire run --profile $(PROFILE)

# Tests never reach a model hub: everything they need is built offline.
test: $(STAMP)
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m pytest -q tests

bench: $(STAMP)
	@test -n "$(BENCHMARKS)" || { echo "no benchmarks/*.py to run" >&2; exit 1; }
	@set -e; for b in $(BENCHMARKS); do echo "== $$b"; $(BIN)/python $$b; done

lab: $(STAMP)
	$(BIN)/jupyter lab $(LAB_ROOT) --notebook-dir=.

strip: $(STAMP)
	$(BIN)/python tools/strip_notebooks.py
