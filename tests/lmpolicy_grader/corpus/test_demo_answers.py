"""Issue 20, end to end: answers of 11.9(a), (c) and (d) taken from a demo (the corpus's FROM_DEMO answers)
fail ``nbgrader validate`` with the demo's message before hand-in, and score 0 when graded, with that
message on the answer cell of the graded notebook, while every other exercise keeps its points."""
from __future__ import annotations

import io
import re

import nbformat
import pytest
from nbgrader.validator import Validator

from lmpolicy.notebook.catalogue import label
from lmpolicy_grader.__main__ import release
from lmpolicy_grader.class_grading.grading import grade_class
from lmpolicy_grader.class_grading.status import Status
from lmpolicy_grader.class_grading.examples_course import as_handed_in, with_answers, written_answers
from lmpolicy_grader.corpus.wrong_answers import DEMO_MESSAGE, WRONG_ANSWERS, Kind

from ..scenarios.test_ch11_corpus import _autograded
from ..class_grading.test_examples_course import _course

FROM_DEMO = [w for w in WRONG_ANSWERS if w.kind == Kind.FROM_DEMO]
NOTEBOOKS = sorted({w.notebook for w in FROM_DEMO})
STUDENT = "reads-the-demo"


@pytest.fixture(scope="module")
def course(tmp_path_factory, repo_root):
    """A course of notebooks 05 and 06, released from source, with one submission: every answer right, those
    of 11.9(a), (c), (d) taken from the demos in the answer cell."""
    root = _course(tmp_path_factory.mktemp("demo-answers"), repo_root,
                   [repo_root / "source" / "ch11" / f"{name}.ipynb" for name in NOTEBOOKS])
    release(root)
    folder = root / "submitted" / STUDENT / "ch11"
    folder.mkdir(parents=True)
    for name in NOTEBOOKS:
        source = nbformat.read(root / "source" / "ch11" / f"{name}.ipynb", as_version=4)
        released = nbformat.read(root / "release" / "ch11" / f"{name}.ipynb", as_version=4)
        handed_in = as_handed_in(source, released, written_answers(name, "good"))
        nbformat.write(with_answers(handed_in, [w for w in FROM_DEMO if w.notebook == name]), folder / f"{name}.ipynb")
    return root


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_validate_fails_exactly_the_answers_taken_from_a_demo_with_its_message(course, name, monkeypatch):
    monkeypatch.chdir(course / "submitted" / STUDENT / "ch11")
    validator = Validator()
    validator.stream = io.StringIO()  # what `nbgrader validate` prints (it exits 0 either way)
    validator.validate_and_print(f"{name}.ipynb")
    printed = validator.stream.getvalue()
    expected = [w for w in FROM_DEMO if w.notebook == name]
    assert f"VALIDATION FAILED ON {len(expected)} CELL(S)!" in printed, printed
    assert printed.lower().count(DEMO_MESSAGE.lower()) == len(expected), printed
    for wrong in expected:
        assert f"# Checks of {label(wrong.exercise)}:" in printed


@pytest.fixture(scope="module")
def graded(course):
    """The course, its one submission graded (in the sandbox where the course config says so), with feedback."""
    outcomes = grade_class(course, students=[STUDENT], workers=1, feedback=True, log=lambda _: None)
    assert {(o.notebook, o.status) for o in outcomes} == {(name, Status.GRADED) for name in NOTEBOOKS}
    return course


def _shown(notebook: nbformat.NotebookNode, grade_id: str) -> str:
    cell = next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    return re.sub(r"\x1b\[[0-9;]*m", "", "\n".join("\n".join(o.get("traceback", [])) for o in cell.get("outputs", [])))


@pytest.mark.slow
def test_graded_each_answer_taken_from_a_demo_scores_0_and_says_why_where_it_ran(graded):
    scores = _autograded(graded, STUDENT)
    from_demo = {(w.notebook, w.exercise) for w in FROM_DEMO}
    assert {key: scores[key][0] for key in from_demo} == {key: 0.0 for key in from_demo}
    lost = {key: score for key, (score, most) in scores.items() if score != most and key not in from_demo}
    assert lost == {}, "an exercise not taken from a demo lost points"
    for name in NOTEBOOKS:  # the graded notebook, as formgrader shows it: the answer cell's own error
        autograded = nbformat.read(graded / "autograded" / STUDENT / "ch11" / f"{name}.ipynb", as_version=4)
        for wrong in (w for w in FROM_DEMO if w.notebook == name):
            assert DEMO_MESSAGE.lower() in _shown(autograded, wrong.cell).lower(), wrong.cell


@pytest.mark.slow
def test_graded_the_feedback_says_why_an_answer_taken_from_a_demo_scores_0(graded):
    for name in NOTEBOOKS:
        feedback = (graded / "feedback" / STUDENT / "ch11" / f"{name}.html").read_text()
        assert feedback.lower().count(DEMO_MESSAGE.lower()) >= len([w for w in FROM_DEMO if w.notebook == name])
