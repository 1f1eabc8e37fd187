# tilecraft: the README's commands. Each one first makes sure the virtual environment .venv exists
# and holds this checkout (the first run installs; later runs start at once).
#
#   make report   the main job: measure this machine, run every suite, write out/report/report.html (+ .md, .json)
#   make test     the tests, kernels in the Triton interpreter (TRITON_INTERPRET=1); no GPU needed
#   make ladder   the seeds' Laplacian ladder: timed on a GPU, checked in the Triton interpreter on a CPU
#   make info     the device, versions and (GPU) measured ceilings
#   make sweep    the cache-cliff sweep (GPU only)
#
# Knobs:
#   TORCH_SPEC=...   what pip installs when the venv has no torch (default: the CPU build 2.13.0);
#                    on a GPU machine e.g. make TORCH_SPEC=torch==2.11.0 ladder (a CUDA build whose
#                    triton agrees with the triton==3.6.0 of constraints.txt)
#   TORCH_INDEX=URL  the index that torch alone comes from (a PyTorch CUDA or ROCm wheel index)
#   PYTHON=...       the interpreter that creates the venv (>= 3.10)
#   NOVENV=1         use $(PYTHON) as it is, with src/ on PYTHONPATH, and install nothing
#                    (a GPU image whose python3 already has torch, triton, typer, rich, matplotlib)
#   ARGS="..."       extra arguments: make report ARGS="--full", make ladder ARGS="--dtype fp32 --order 8",
#                    make test ARGS="-k cli"
#   JOBS=N           pytest-xdist workers for make test (default auto: one per core; JOBS=0 runs in one process)

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
PIP_FLAGS ?=
ARGS ?=
JOBS ?= auto

ifeq ($(NOVENV),1)
PY := $(PYTHON)
TILECRAFT := PYTHONPATH=$(CURDIR)/src$${PYTHONPATH:+:$$PYTHONPATH} $(PY) -m tilecraft
RUN_PY := PYTHONPATH=$(CURDIR)/src$${PYTHONPATH:+:$$PYTHONPATH} $(PY)
READY :=
else
PY := $(VENV)/bin/python
TILECRAFT := $(VENV)/bin/tilecraft
RUN_PY := $(PY)
READY := $(VENV)/.tilecraft-ready
# The venv is stale when its python does not run, or imports tilecraft from somewhere other than
# this checkout (a copied or moved tree, a venv made for another clone): forget the stamp then.
# find_spec locates the package without importing it (no torch import: this stays instant).
TILECRAFT_SRC := $(shell $(PY) -c 'import importlib.util as u, os; s = u.find_spec("tilecraft"); print(os.path.realpath(s.origin) if s and s.origin else "")' 2>/dev/null)
ifneq ($(TILECRAFT_SRC),$(realpath src/tilecraft/__init__.py))
$(shell rm -f $(READY))
endif
endif

.PHONY: help report ladder test info sweep venv clean-venv

help:
	@sed -n '3,9p' Makefile | sed 's/^# \{0,1\}//'

venv: $(READY)

$(VENV)/.tilecraft-ready: pyproject.toml constraints.txt
	@if ! $(PY) -c 'import sys; assert sys.version_info >= (3, 10)' 2>/dev/null; then \
	  echo "make: creating $(VENV) with $(PYTHON) ($$($(PYTHON) --version 2>&1))"; \
	  rm -rf $(VENV); \
	  $(PYTHON) -m venv $(VENV); \
	fi
	@if ! $(PY) -c 'import torch' 2>/dev/null; then \
	  echo "make: installing $(TORCH_SPEC) (set TORCH_SPEC for a CUDA or ROCm build)"; \
	  $(PY) -m pip install $(PIP_FLAGS) $(if $(TORCH_INDEX),--index-url '$(TORCH_INDEX)') '$(TORCH_SPEC)'; \
	fi
	@echo "make: installing tilecraft (editable) and its test tools, pinned by constraints.txt"
	$(PY) -m pip install $(PIP_FLAGS) -c constraints.txt -e '.[test]'
	@touch $@

report: $(READY)
	$(TILECRAFT) report $(ARGS)

ladder: $(READY)
	$(TILECRAFT) stencil ladder $(ARGS)

test: $(READY)
	TRITON_INTERPRET=1 $(RUN_PY) -m pytest -q $$($(RUN_PY) -c 'import xdist' 2>/dev/null && echo '-n $(JOBS)') $(ARGS)

info: $(READY)
	$(TILECRAFT) info $(ARGS)

sweep: $(READY)
	$(TILECRAFT) stencil sweep $(ARGS)

clean-venv:
	rm -rf $(VENV)
