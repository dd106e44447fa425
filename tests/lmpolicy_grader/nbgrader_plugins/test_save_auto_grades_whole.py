"""A gradebook lost in the middle of a notebook keeps none of that notebook's grades, not some of them."""
from __future__ import annotations

import nbformat
import pytest
from nbgrader.api import Gradebook
from nbgrader.preprocessors import SaveAutoGrades

from lmpolicy_grader.__main__ import release
from lmpolicy_grader.nbgrader_plugins import SaveAutoGradesWhole

from .. import tiny_course

STUDENT = "s1"


class ServerGone(Exception):
    """What the gradebook raises when its server went away (GradebookUnavailable, in the grader)."""


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tiny_course.make_course(tmp_path_factory.mktemp("save-whole"))
    release(root)
    return root


@pytest.fixture
def url(course):
    return fresh_submission(course)


def fresh_submission(course) -> str:
    """The URL of the course's gradebook, with a fresh, ungraded submission of STUDENT in it."""
    url = f"sqlite:///{course / 'gradebook.db'}"
    with Gradebook(url, "lm-policy") as gradebook:
        gradebook.update_or_create_student(STUDENT)
        if any(s.student.id == STUDENT for s in gradebook.find_assignment("ch11").submissions):
            gradebook.remove_submission("ch11", STUDENT)
        gradebook.add_submission("ch11", STUDENT)
    return url


def graded(course, failed: str | None = None):
    """The released notebook as GradingExecute leaves it, answers unchanged: every test cell passed (no error
    output), except ``failed``."""
    nb = nbformat.read(course / "release" / "ch11" / f"{tiny_course.NOTEBOOK}.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    if failed is not None:
        nb.cells[tiny_course.cell_index(nb, failed)].outputs = [nbformat.v4.new_output(
            "error", ename="AssertionError", evalue="hidden check failed", traceback=[])]
    return nb


def save(preprocessor_class, url, nb, monkeypatch, lose_server_at_grade: int | None = None):
    """Save ``nb``'s grades; with ``lose_server_at_grade`` = k, the server goes away when the k-th grade is looked up."""
    with monkeypatch.context() as patch:
        if lose_server_at_grade is not None:
            find_grade, calls = Gradebook.find_grade, []

            def find_grade_until_the_server_goes(self, *args, **kwargs):
                calls.append(args)
                if len(calls) == lose_server_at_grade:
                    raise ServerGone("the gradebook server closed the connection")
                return find_grade(self, *args, **kwargs)
            patch.setattr(Gradebook, "find_grade", find_grade_until_the_server_goes)
        resources = {"nbgrader": {"notebook": tiny_course.NOTEBOOK, "assignment": "ch11", "student": STUDENT,
                                  "db_url": url}}
        preprocessor_class().preprocess(nb, resources)


def auto_scores(url) -> dict:
    with Gradebook(url, "lm-policy") as gradebook:
        notebook = gradebook.find_submission_notebook(tiny_course.NOTEBOOK, "ch11", STUDENT)
        return {g.name: g.auto_score for g in notebook.grades if g.name in ("ex1__tests", "ex2__tests")}


def test_stock_save_auto_grades_leaves_a_notebook_half_graded(course, url, monkeypatch):
    # what the course's preprocessor is for: stock commits ex1 before the server goes at ex2
    with pytest.raises(ServerGone):
        save(SaveAutoGrades, url, graded(course), monkeypatch, lose_server_at_grade=2)
    assert auto_scores(url) == {"ex1__tests": 2.0, "ex2__tests": None}


def test_a_server_lost_in_the_middle_of_a_notebook_stores_none_of_it(course, url, monkeypatch):
    with pytest.raises(ServerGone):
        save(SaveAutoGradesWhole, url, graded(course), monkeypatch, lose_server_at_grade=2)
    assert auto_scores(url) == {"ex1__tests": None, "ex2__tests": None}


def stored(url) -> dict:
    """Every grade and comment of the submission, as the gradebook holds them."""
    with Gradebook(url, "lm-policy") as gradebook:
        notebook = gradebook.find_submission_notebook(tiny_course.NOTEBOOK, "ch11", STUDENT)
        return {"grades": {g.name: (g.auto_score, g.needs_manual_grade) for g in notebook.grades},
                "comments": {c.name: c.auto_comment for c in notebook.comments}}


@pytest.mark.parametrize("failed", [None, "ex1__tests"])
def test_a_notebook_saved_whole_stores_what_stock_stores(course, url, monkeypatch, failed):
    save(SaveAutoGrades, url, graded(course, failed), monkeypatch)
    stock = stored(url)
    assert stock["grades"]["ex1__tests"] == ((0.0 if failed else 2.0), False)
    save(SaveAutoGradesWhole, fresh_submission(course), graded(course, failed), monkeypatch)
    assert stored(url) == stock


def test_a_regrade_lost_midway_keeps_the_previous_grades_whole(course, url, monkeypatch):
    save(SaveAutoGradesWhole, url, graded(course), monkeypatch)
    # the re-grade fails ex1 and loses the server at ex2: the old grades stay whole, not ex1 new beside ex2 old
    with pytest.raises(ServerGone):
        save(SaveAutoGradesWhole, url, graded(course, failed="ex1__tests"), monkeypatch, lose_server_at_grade=2)
    assert auto_scores(url) == {"ex1__tests": 2.0, "ex2__tests": 3.0}
    save(SaveAutoGradesWhole, url, graded(course, failed="ex1__tests"), monkeypatch)
    assert auto_scores(url) == {"ex1__tests": 0.0, "ex2__tests": 3.0}
