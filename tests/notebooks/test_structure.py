"""Static checks of source/ch11 and release/ch11 (no kernel): conventions, points, no leaks, no outputs, and
each fact of an exercise written once (lmpolicy.notebook.catalogue)."""
import re

import pytest

from lmpolicy.notebook import catalogue, progress
from lmpolicy_grader import completeness

from .notebook_tools import (HIDDEN_TESTS, NOTEBOOK_NAMES, RELEASE_DIR, SOLUTION, SOURCE_DIR, exercise_key,
                             grade_id, is_autograded_test, is_code_answer, is_manual_answer, nbgrader_meta,
                             points, read, region_lines, stated_total)

pytestmark = pytest.mark.skipif(not NOTEBOOK_NAMES, reason="no source notebooks yet")


@pytest.fixture(scope="module", params=NOTEBOOK_NAMES)
def name(request):
    return request.param


def test_every_nbgrader_cell_belongs_to_an_exercise_of_this_notebook(name):
    for cell in read(SOURCE_DIR / f"{name}.ipynb").cells:
        meta = nbgrader_meta(cell)
        if not (meta.get("grade") or meta.get("solution") or meta.get("locked")):
            continue
        key = exercise_key(cell)
        assert key, f"{name}: grade_id {grade_id(cell)!r} must be '<exercise key>__<name>'"
        assert progress.exercise(key).notebook == name, (
            f"{name}: {grade_id(cell)} belongs to {progress.exercise(key).notebook} in lmpolicy.notebook.progress")
        assert meta.get("schema_version") == 3
        if meta.get("grade"):
            assert points(cell) > 0, f"{name}: graded cell {grade_id(cell)} has no points"


def test_every_exercise_is_complete(name):
    """Declared in its module of lmpolicy.exercises, a check cell of a heading and one call (and one hidden call),
    typical wrong answers or example written answers in the corpus: what `make check-notebook` checks first."""
    assert completeness.problems(name) == []


def test_autograded_tests_record_progress_then_hold_hidden_tests(name):
    nb = read(SOURCE_DIR / f"{name}.ipynb")
    answers = {exercise_key(c) for c in nb.cells if is_code_answer(c)}
    for cell in filter(is_autograded_test, nb.cells):
        key, source = exercise_key(cell), cell.source
        assert region_lines(source, HIDDEN_TESTS), f"{grade_id(cell)}: the hidden tests are empty"
        assert key in answers, f"{grade_id(cell)}: no answer cell {key}__... with a solution"
    for cell in nb.cells:
        if is_code_answer(cell):
            assert region_lines(cell.source, SOLUTION), f"{grade_id(cell)}: answer cell without a solution region"


def test_manual_answers_carry_a_mark_scheme_inside_the_solution(name):
    for cell in filter(is_manual_answer, read(SOURCE_DIR / f"{name}.ipynb").cells):
        scheme = "\n".join(region_lines(cell.source, SOLUTION))
        assert re.search(r"Mark scheme \((\d+) points?\)", scheme), f"{grade_id(cell)}: no mark scheme"
        stated = int(re.search(r"Mark scheme \((\d+) points?\)", scheme).group(1))
        assert stated == points(cell), f"{grade_id(cell)}: mark scheme says {stated} points, the cell {points(cell)}"


def test_the_exercises_facts_agree_and_the_header_table_is_derived_from_them(name):
    """Keys of a known form, points on every graded cell, a title per exercise, the header table as
    `python -m lmpolicy.notebook.catalogue write-headers` writes it (what `make check-notebook` checks first)."""
    assert catalogue.problems(SOURCE_DIR, [name]) == []


def test_the_header_states_the_total_of_the_cells_points(name):
    nb = read(SOURCE_DIR / f"{name}.ipynb")
    total = sum(points(cell) for cell in nb.cells)
    assert stated_total(nb) == total, f"{name}: the first cell must state the total, '{total:g} points'"


def test_the_release_shows_the_header_of_the_source(name):
    source, release = read(SOURCE_DIR / f"{name}.ipynb").cells[0], read(RELEASE_DIR / f"{name}.ipynb").cells[0]
    assert release.source == source.source, f"release/{name}'s header is not the source's: run `make release`"


@pytest.mark.parametrize("folder", [SOURCE_DIR, RELEASE_DIR], ids=["source", "release"])
def test_committed_notebooks_carry_no_outputs(name, folder):
    path = folder / f"{name}.ipynb"
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make release`")
    for cell in read(path).cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: a cell has outputs"


def test_release_holds_no_solution_hidden_test_or_mark_scheme(name):
    source = read(SOURCE_DIR / f"{name}.ipynb")
    release_text = "\n".join(cell.source for cell in read(RELEASE_DIR / f"{name}.ipynb").cells)
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "Mark scheme"):
        assert marker not in release_text, f"release/{name}: {marker!r} survived"
    public = set()
    secret = []
    for cell in source.cells:
        hidden = region_lines(cell.source, SOLUTION) + region_lines(cell.source, HIDDEN_TESTS)
        secret += hidden
        public |= set(cell.source.splitlines()) - set(hidden)
    leaks = [line for line in secret if len(line.strip()) >= 25 and line not in public and line in release_text]
    assert not leaks, f"release/{name} shows solution or hidden-test lines: {leaks[:3]}"


def test_the_exercises_are_read_from_these_notebooks():
    assert progress.catalogue_folder() == SOURCE_DIR
    assert progress.chapter().notebooks == tuple(NOTEBOOK_NAMES)
    every_key = {exercise_key(cell) for name in NOTEBOOK_NAMES for cell in read(SOURCE_DIR / f"{name}.ipynb").cells
                 if points(cell) > 0}
    assert {exercise.key for exercise in progress.EXERCISES} == every_key


def test_release_has_exactly_the_source_notebooks():
    assert sorted(p.name for p in RELEASE_DIR.glob("*.ipynb")) == [f"{n}.ipynb" for n in NOTEBOOK_NAMES], \
        "release/ch11 is out of date: run `make release`"
