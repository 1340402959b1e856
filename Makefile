# groupscale: `make demo` and `make test` do their own set-up on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-slow soak test-all bench lint docs docs-serve mutation clean

setup: $(STAMP)

# torch first, pinned. Without an NVIDIA GPU (no nvidia-smi) from PyTorch's CPU index (PyPI's torch
# brings several GB of CUDA libraries), falling back to the default index when that one cannot be
# reached; with a GPU from the default index (a CUDA build). TORCH_INDEX=URL make setup chooses.
TORCH_INDEX ?= $(if $(shell command -v nvidia-smi 2>/dev/null),,https://download.pytorch.org/whl/cpu)
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(if $(TORCH_INDEX),$(BIN)/pip install -q --index-url $(TORCH_INDEX) --retries 1 --timeout 20 torch==2.13.0 || )$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[all,dev]'
	touch $(STAMP)

demo: setup
	$(BIN)/groupscale demo

test: setup
	$(BIN)/pytest -m "not slow and not soak" -q --durations=15

# The slow suites alone: the e2e reliability suite on PostgreSQL and the fit calibration (CI runs it after `test`).
test-slow: setup
	$(BIN)/pytest -m slow -q --durations=15

# Repeated checks of a race (minutes each, not in CI): run before resolving work on what they repeat.
soak: setup
	$(BIN)/pytest -m soak -q

test-all: setup
	$(BIN)/pytest -q

bench: setup
	$(BIN)/pip install -q -e '.[bench]'
	@for b in $(filter-out bench/gpu_check.py bench/readme_picture.py bench/_%,$(wildcard bench/*.py)); do echo "== $$b"; $(BIN)/python $$b || exit 1; done

lint: setup
	$(BIN)/ruff check service workers sweeps tests bench
	$(BIN)/ruff format --check service workers sweeps tests bench
	$(BIN)/mypy sweeps workers/algos.py workers/groups.py

# The docs site (mkdocs-material, docs/ and mkdocs.yml): the reference pages are generated from the code first.
docs: setup
	$(BIN)/pip install -q -e '.[docs]'
	$(BIN)/python docs/gen_reference.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The site at http://127.0.0.1:8001 with its search, which needs a server (site/ opened from disk has every page and
# link, and no search); it rebuilds as docs/ changes. Ctrl-C stops it.
docs-serve: docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --strict -a 127.0.0.1:8001

# Mutation testing of the pure maths (mutmut; [tool.mutmut] in pyproject.toml): not part of `make test`.
# Prints the kill rate per module and `mutation_kill_rate: X` last (tests/mutation/report.py).
mutation: setup
	rm -rf mutants
	$(BIN)/mutmut run --max-children 2 > /dev/null
	$(BIN)/python tests/mutation/report.py --survivors

clean:
	rm -rf $(VENV) .groupscale .pytest_cache mutants site docs/reference
