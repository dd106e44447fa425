"""The example submissions hand in what students hand in: solutions without nbgrader's markers, the release's
locked and test cells, and written answers of three qualities in a student's words, never the mark scheme."""
from __future__ import annotations

import ast
import shutil

import nbformat
import pytest

from lmpolicy_grader.__main__ import release
from lmpolicy_grader.class_grading.examples_course import NO_EXAMPLE_ANSWER, mistake_rounds, place_examples, written_answers
from lmpolicy_grader.class_grading.grading import grade_class
from lmpolicy_grader.class_grading.status import Status
from lmpolicy_grader.corpus.written_answers import QUALITIES, WRITTEN_ANSWERS
from lmpolicy_grader.corpus.wrong_answers import WRONG_ANSWERS

from .. import tiny_course
from ..conftest import committed_notebooks
from ..scenarios.test_ch11_corpus import _autograded

# What only an instructor's copy holds: nbgrader's markers and the mark schemes' headings.
INSTRUCTOR_ONLY = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "**Mark scheme",
                   "**Model answer")


def _course(root, repo_root, notebooks):
    for folder in ("source", "release"):
        (root / folder / "ch11").mkdir(parents=True)
        for notebook in notebooks:
            shutil.copy(repo_root / folder / "ch11" / notebook.name, root / folder / "ch11" / notebook.name)
    shutil.copy(repo_root / "nbgrader_config.py", root / "nbgrader_config.py")
    return root


@pytest.fixture(scope="module")
def placed(tmp_path_factory, repo_root):
    """(course root, student ids) with the examples placed for every committed ch11 notebook."""
    root = _course(tmp_path_factory.mktemp("examples"), repo_root, committed_notebooks(repo_root))
    return root, place_examples(root)


def _written_cells(notebook):
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in notebook.cells
            if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("solution")}


def _submitted(root, student):
    return {p.stem: nbformat.read(p, as_version=4) for p in sorted((root / "submitted" / student / "ch11").glob("*.ipynb"))}


def test_no_placed_submission_holds_a_solution_marker_hidden_test_or_mark_scheme(placed):
    root, students = placed
    assert {"reference", "blank", "mistakes"} <= set(students)
    files = sorted((root / "submitted").glob("*/ch11/*.ipynb"))
    assert len(files) > len(students)
    leaks = [(p.parent.parent.name, p.stem, marker) for p in files for marker in INSTRUCTOR_ONLY
             if marker in p.read_text()]
    assert leaks == []


def test_every_written_exercise_of_ch11_has_three_distinct_example_answers(repo_root):
    in_source = {(p.stem, grade_id) for p in committed_notebooks(repo_root)
                 for grade_id in _written_cells(nbformat.read(p, as_version=4))}
    in_corpus = [(a.notebook, a.cell) for a in WRITTEN_ANSWERS]
    assert len(in_corpus) == len(set(in_corpus)), "two example answer sets for one cell"
    assert set(in_corpus) == in_source
    for answer in WRITTEN_ANSWERS:
        texts = [getattr(answer, quality) for quality in QUALITIES]
        assert len(set(texts)) == len(texts), answer.cell
        assert answer.good.strip() and answer.partial.strip(), answer.cell
        assert len(answer.good) > len(answer.partial), f"{answer.cell}: the good answer should say more"


def test_each_example_student_carries_written_answers_of_its_own_quality(placed):
    root, students = placed
    quality_of = {"reference": "good", "mistakes": "partial"} | {s: "wrong" for s in students if s.startswith("mistakes-")}
    assert len(quality_of) == len(students) - 1  # all but blank
    seen = set()
    for student, quality in quality_of.items():
        for name, notebook in _submitted(root, student).items():
            expected = written_answers(name, quality)
            assert _written_cells(notebook) == expected, (student, name)
            seen |= {quality} if expected else set()
    assert seen == set(QUALITIES)
    release = {p.stem: _written_cells(nbformat.read(p, as_version=4)) for p in (root / "release" / "ch11").glob("*.ipynb")}
    assert {name: _written_cells(nb) for name, nb in _submitted(root, "blank").items()} == release


def test_handed_in_notebooks_keep_the_release_locked_cells_and_parse(placed):
    root, students = placed
    for name, notebook in _submitted(root, "reference").items():
        release = nbformat.read(root / "release" / "ch11" / f"{name}.ipynb", as_version=4)
        locked = {c.metadata["nbgrader"]["grade_id"]: c.source for c in release.cells
                  if c.metadata.get("nbgrader", {}).get("grade_id") and not c.metadata["nbgrader"].get("solution")}
        mine = {c.metadata["nbgrader"]["grade_id"]: c.source for c in notebook.cells
                if c.metadata.get("nbgrader", {}).get("grade_id") in locked}
        assert mine == locked, name
        for cell in notebook.cells:
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
                ast.parse(cell.source)  # the solution code survives losing its markers
    # the wrong code answers still land in the mistakes students' cells
    first_round = mistake_rounds(WRONG_ANSWERS)[0]
    mistakes = _submitted(root, "mistakes")
    for answer in first_round:
        if answer.notebook in mistakes:
            cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in mistakes[answer.notebook].cells}
            assert cells[answer.cell] == answer.source


def test_a_course_without_example_answers_gets_a_placeholder_never_the_mark_scheme(tmp_path):

    root = tiny_course.make_course(tmp_path)
    release(root)
    place_examples(root)
    reference = nbformat.read(root / "submitted" / "reference" / "ch11" / f"{tiny_course.NOTEBOOK}.ipynb", as_version=4)
    assert list(_written_cells(reference).values()) == [NO_EXAMPLE_ANSWER]


@pytest.mark.slow
def test_the_handed_in_reference_still_earns_every_autograded_point(tmp_path, repo_root):
    notebook = repo_root / "source" / "ch11" / "01_policy_softmax.ipynb"
    root = _course(tmp_path, repo_root, [notebook])
    release(root)  # puts ch11 into the gradebook
    place_examples(root)
    outcomes = grade_class(root, students=["reference"], workers=1, feedback=False, log=lambda _: None)
    assert [(o.student, o.status) for o in outcomes] == [("reference", Status.GRADED)]
    scores = _autograded(root, "reference")
    assert scores and {key: s for key, (s, m) in scores.items() if s != m} == {}
