# The course in two commands: `make lab` (work) and `make test` (check everything).
PYTHON   ?= python3
VENV     := .venv
BIN      := $(CURDIR)/$(VENV)/bin
# Shells started from here (recipes, the terminals of `make lab`) find the venv's jupyter, nbgrader
# and python first, and JupyterHub its proxy; Python processes of the grader need no help
# (nbgrader_config.py sees to alembic).
export PATH := $(BIN):$(CURDIR)/node_modules/.bin:$(PATH)
export PYTHONHASHSEED := 0

.PHONY: install install-all lab work-copy instructor test test-fast test-corpus grade release check-notebook bench clean

# --- what each target installs ------------------------------------------------------------------------
# One set of pins per file (requirements.txt says which is which); each set is installed with the sets it
# builds on, so that pip resolves them together, and only when one of its files changed since. A student
# needs python3 and make: npm (JupyterHub's proxy) is installed for the tests alone.
PIP          := $(BIN)/python -m pip install --quiet --disable-pip-version-check
SET_student  := requirements.txt
SET_grader   := $(SET_student) requirements-grader.txt
SET_hub      := $(SET_grader) requirements-hub.txt
SET_test     := $(SET_hub) requirements-test.txt
STUDENT_VENV := $(VENV)/.installed
GRADER       := $(VENV)/.pins-grader
EVERYTHING   := $(STUDENT_VENV) $(VENV)/.pins-test node_modules/.installed

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip

.SECONDEXPANSION:
$(VENV)/.pins-%: $$(SET_$$*) | $(VENV)/bin/python
	$(PIP) $(addprefix -r ,$(SET_$*))
	touch $@

# the student's set, then this package (lib/: lmpolicy and lmpolicy_grader), editable; pyproject.toml
# holds its entry points, so a change there reinstalls the package, never the pins
$(STUDENT_VENV): $(VENV)/.pins-student pyproject.toml
	$(PIP) --no-deps --no-build-isolation -e .
	touch $@

# each larger set after the one beneath it: never two pip processes in one venv (make -j)
$(VENV)/.pins-grader: | $(STUDENT_VENV)
$(VENV)/.pins-hub: | $(VENV)/.pins-grader
$(VENV)/.pins-test: | $(VENV)/.pins-hub

# JupyterHub's configurable-http-proxy (package.json), for the deployment tests
node_modules/.installed: package.json package-lock.json
	npm install --no-audit --no-fund --loglevel=error
	touch $@

install: $(STUDENT_VENV)
install-all: $(EVERYTHING)

# Extra server flags (tests/browser starts these same targets with --no-browser, a port and a token).
LAB_ARGS ?=
JUPYTER_LAB := $(BIN)/jupyter lab --notebook-dir=$(CURDIR) $(if $(filter 0,$(shell id -u)),--allow-root)
# The student's copies, in their work folder, so that using the course changes no tracked file (a later
# `git pull` of course updates never conflicts): the assignment from release/ch11 into CH11_COPY, and the
# start page, the two demos and the optional study from notebooks/ into the folder above it (WORK_DIR),
# where the start page's links `ch11/...` reach the assignment. Each is copied once: a notebook already
# there is never overwritten (one added to the course later is copied in). A path inside the course folder.
CH11_COPY ?= work/ch11
WORK_DIR  := $(patsubst %/,%,$(dir $(CH11_COPY)))
START_PAGE := $(WORK_DIR)/00_start_here.ipynb
STUDENT_ENV = $(if $(STUDENT),LMPOLICY_STUDENT_ID="$(STUDENT)") LMPOLICY_WORK_DIR="$(CURDIR)/$(CH11_COPY)"

work-copy:
	@mkdir -p $(CH11_COPY)
	@for notebook in release/ch11/*.ipynb; do \
	    test -e "$(CH11_COPY)/$${notebook##*/}" || cp "$$notebook" "$(CH11_COPY)/"; done
	@for notebook in notebooks/*.ipynb; do \
	    test -e "$(WORK_DIR)/$${notebook##*/}" || cp "$$notebook" "$(WORK_DIR)/"; done

# A student's JupyterLab: nbgrader's Validate, but not the instructor's tools (jupyter-config/student).
# `make lab STUDENT=<id>`: the student's own numbers in the numeric exercises (lib/lmpolicy/per_student/variants.py).
# The server shows the start page with who the student is and their progress as of the moment it is opened
# (jupyter-config/student: lmpolicy.notebook.served_notebooks); the browser, and the URL printed with
# --no-browser, open that page (default_url).
lab: $(STUDENT_VENV) work-copy
	$(STUDENT_ENV) JUPYTER_CONFIG_PATH="$(CURDIR)/jupyter-config/student$(if $(JUPYTER_CONFIG_PATH),:$(JUPYTER_CONFIG_PATH))" \
	$(JUPYTER_LAB) --LabApp.default_url=/lab/tree/$(START_PAGE) $(LAB_ARGS)

# The instructor's JupyterLab: nbgrader's Formgrader, Create Assignment and Assignment List as installed, and
# formgrader's pages of a submission guarded (jupyter-config/instructor: lmpolicy_grader.formgrader_guard).
instructor: $(STUDENT_VENV) $(GRADER)
	JUPYTER_CONFIG_PATH="$(CURDIR)/jupyter-config/instructor$(if $(JUPYTER_CONFIG_PATH),:$(JUPYTER_CONFIG_PATH))" \
	$(JUPYTER_LAB) $(LAB_ARGS)

test: $(EVERYTHING)
	$(BIN)/python -m pytest -n 2 --dist loadgroup --no-loadscope-reorder -q --durations=40

test-fast: $(EVERYTHING)
	$(BIN)/python -m pytest -q -m "not slow and not browser"

# The ch11 class graded with every round of typical mistakes (`make test` grades the first: one per exercise)
test-corpus: $(EVERYTHING)
	LMPOLICY_WHOLE_CORPUS=1 $(BIN)/python -m pytest -q tests/lmpolicy_grader/scenarios/test_ch11_corpus.py

# nbgrader alone: nbgrader_config.py imports no grader-only package (tests/test_environment.py)
release: $(STUDENT_VENV)
	cd $(CURDIR) && $(BIN)/nbgrader generate_assignment ch11 --force --log-level=WARN

# One notebook checked after a change (docs/instructors.md, "Adding an exercise"): first what its exercises lack,
# one line each (lmpolicy_grader.completeness), then its release, structure, validation, execution in both modes,
# every typical wrong answer, and the notebook alone graded by the real grader (the ch11 corpus, every round).
NB ?=
check-notebook: $(EVERYTHING)
	@test -n "$(NB)" || { echo "usage: make check-notebook NB=02_temperature"; exit 2; }
	$(BIN)/python -m lmpolicy_grader.completeness $(NB)
	$(MAKE) --no-print-directory release
	LMPOLICY_WHOLE_CORPUS=1 LMPOLICY_CORPUS_NOTEBOOKS=$(NB) $(BIN)/python -m pytest -q -n 2 --dist loadgroup \
	    tests/notebooks tests/lmpolicy_grader/scenarios/test_ch11_corpus.py \
	    -k "test_ch11_corpus or $$($(BIN)/python -m lmpolicy.notebook.catalogue pytest-k $(NB))"

grade: $(STUDENT_VENV) $(GRADER)
	$(BIN)/python -m lmpolicy_grader grade

bench: $(EVERYTHING)
	for script in bench/bench_*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache
