# Two commands do all the setup on a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs isolab into it on first use.
#
# TORCH pins the CPU build that lies on this machine's disk; users with CUDA may override it,
# e.g. `make demo TORCH=torch` or install a CUDA torch into .venv first.
PYTHON ?= python3
VENV   ?= .venv
TORCH  ?= torch==2.13.0
PY      = $(VENV)/bin/python
ISOLAB  = $(VENV)/bin/isolab
STAMP   = $(VENV)/.isolab-installed

.PHONY: demo test test-all lint format ui clean install

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(ISOLAB) demo

test: $(STAMP)
	$(PY) -m pytest -m "not slow" -q

test-all: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check isolab tests benchmarks
	$(VENV)/bin/ruff format --check isolab tests benchmarks

format: $(STAMP)
	$(VENV)/bin/ruff format isolab tests benchmarks
	$(VENV)/bin/ruff check --fix isolab tests benchmarks

ui: $(STAMP)
	$(ISOLAB) ui

clean:
	rm -rf $(VENV) runs/mlflow.db runs/cache runs/artifacts
