# The course in two commands: `make lab` (work) and `make test` (check everything).
PYTHON   ?= python3
VENV     := .venv
BIN      := $(CURDIR)/$(VENV)/bin
STAMP    := $(VENV)/.installed
# nbgrader runs `alembic` as a subprocess: the venv's bin/ must be on PATH.
export PATH := $(BIN):$(PATH)
export PYTHONHASHSEED := 0

.PHONY: install lab test test-fast grade release bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(VENV)/bin/python requirements.txt pyproject.toml
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/jupyter labextension list 2>&1 | grep -q nbgrader || true
	touch $(STAMP)

install: $(STAMP)

# Extra server flags (tests/browser starts this same target with --no-browser, a port and a token).
LAB_ARGS ?=

lab: install
	$(BIN)/jupyter lab --notebook-dir=$(CURDIR) $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS) notebooks/00_start_here.ipynb

test: install
	$(BIN)/python -m pytest -n 2 --dist loadgroup -q

test-fast: install
	$(BIN)/python -m pytest -q -m "not slow and not browser"

release: install
	cd $(CURDIR) && $(BIN)/nbgrader generate_assignment ch11 --force --log-level=WARN

grade: install
	$(BIN)/python -m lmpolicy_grader grade

bench: install
	for script in bench/bench_*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache
