# The course in two commands: `make lab` (work) and `make test` (check everything).
PYTHON   ?= python3
VENV     := .venv
BIN      := $(CURDIR)/$(VENV)/bin
STAMP    := $(VENV)/.installed
# Shells started from here (recipes, the terminals of `make lab`) find the venv's jupyter, nbgrader
# and python first, and JupyterHub its proxy; Python processes of the grader need no help
# (nbgrader_config.py sees to alembic).
export PATH := $(BIN):$(CURDIR)/node_modules/.bin:$(PATH)
export PYTHONHASHSEED := 0

.PHONY: install lab work-copy instructor test test-fast grade release bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(VENV)/bin/python requirements.txt pyproject.toml package.json
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	npm install --no-audit --no-fund --loglevel=error   # JupyterHub's configurable-http-proxy (package.json)
	touch $(STAMP)

install: $(STAMP)

# Extra server flags (tests/browser starts these same targets with --no-browser, a port and a token).
LAB_ARGS ?=
JUPYTER_LAB := $(BIN)/jupyter lab --notebook-dir=$(CURDIR) $(if $(filter 0,$(shell id -u)),--allow-root)
# The student's copy of the assignment, made from release/ch11 once: a notebook already there is
# never overwritten (one added to the release later is copied in). A path inside the course folder.
CH11_COPY ?= work/ch11

work-copy:
	@mkdir -p $(CH11_COPY)
	@for notebook in release/ch11/*.ipynb; do \
	    test -e "$(CH11_COPY)/$${notebook##*/}" || cp "$$notebook" "$(CH11_COPY)/"; done

# A student's JupyterLab: nbgrader's Validate, but not the instructor's tools (jupyter-config/student).
lab: install work-copy
	JUPYTER_CONFIG_PATH="$(CURDIR)/jupyter-config/student$(if $(JUPYTER_CONFIG_PATH),:$(JUPYTER_CONFIG_PATH))" \
	LMPOLICY_WORK_DIR="$(CURDIR)/$(CH11_COPY)" \
	$(JUPYTER_LAB) $(LAB_ARGS) notebooks/00_start_here.ipynb

# The instructor's JupyterLab: nbgrader's Formgrader, Create Assignment and Assignment List as installed.
instructor: install
	$(JUPYTER_LAB) $(LAB_ARGS)

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
