"""A small real class of ch11, graded once per session by the parallel grader, for the report's pitfalls and the
LMS export: notebooks 01 and 02 (both fast), handed in by students written from the corpus
(``lmpolicy_grader.corpus``): the reference answers, three typical wrong softmaxes, one student who handed in 01
only, one whose 01 is not a notebook; the reference student's written answers then marked by hand."""
from __future__ import annotations

import shutil

import nbformat
import pytest

from lmpolicy_grader.__main__ import release
from lmpolicy_grader.class_grading.course import load_config
from lmpolicy_grader.class_grading.grading import grade_class
from lmpolicy_grader.class_grading.examples_course import as_handed_in, with_answers, written_answers
from lmpolicy_grader.corpus.wrong_answers import WRONG_ANSWERS

NOTEBOOKS = ("01_policy_softmax", "02_temperature")
SOFTMAX = "nb01_softmax__answer"


def _wrong(why_starts: str):
    """The corpus's wrong softmax whose ``why`` starts so (found by its words, not its place in the list)."""
    return next(a for a in WRONG_ANSWERS if a.cell == SOFTMAX and a.why.startswith(why_starts))


# student -> {notebook: the corpus's wrong answers in it}; every notebook of NOTEBOOKS is handed in unless said
WRONG = {
    "reference": {},
    # one pitfall ("normalise along `dim`"), two different wrong answers: their checks fail on different inputs
    # with different numbers (dim=0 / dim=-1, another index, another sum)
    "whole_tensor": {"01_policy_softmax": [_wrong("normalises over the whole tensor")]},
    "last_dim_only": {"01_policy_softmax": [_wrong("ignores the `dim` argument")]},
    "no_max": {"01_policy_softmax": [_wrong("the formula as written, without subtracting the maximum")]},
    "only_01": {},
}
HANDED_IN_ONLY = {"only_01": ["01_policy_softmax"]}
NOT_A_NOTEBOOK = "not_a_notebook"  # 01 is broken JSON (FAILED), 02 the reference's


def mark_every_written_answer(root, student: str) -> None:
    """Give ``student`` full marks on every answer graded by hand, as an instructor does in formgrader."""
    from nbgrader.api import Gradebook

    config = load_config(root)
    with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id) as gradebook:
        for notebook in NOTEBOOKS:
            for grade in gradebook.find_submission_notebook(notebook, "ch11", student).grades:
                if grade.needs_manual_grade:
                    grade.manual_score, grade.needs_manual_grade = grade.max_score, False
        gradebook.db.commit()


@pytest.fixture(scope="session")
def wrong_answers_class(tmp_path_factory, repo_root):
    """(course root, outcomes): the class above, graded; the reference's written answers marked."""
    root = tmp_path_factory.mktemp("wrong-answers-class")
    (root / "source" / "ch11").mkdir(parents=True)
    for notebook in NOTEBOOKS:
        shutil.copy(repo_root / "source" / "ch11" / f"{notebook}.ipynb", root / "source" / "ch11")
    shutil.copy(repo_root / "nbgrader_config.py", root / "nbgrader_config.py")
    release(root)
    good = {name: as_handed_in(nbformat.read(root / "source" / "ch11" / f"{name}.ipynb", as_version=4),
                               nbformat.read(root / "release" / "ch11" / f"{name}.ipynb", as_version=4),
                               written_answers(name, "good")) for name in NOTEBOOKS}
    for student, wrong in WRONG.items():
        folder = root / "submitted" / student / "ch11"
        folder.mkdir(parents=True)
        for name in HANDED_IN_ONLY.get(student, NOTEBOOKS):
            nbformat.write(with_answers(good[name], wrong.get(name, [])), folder / f"{name}.ipynb")
    folder = root / "submitted" / NOT_A_NOTEBOOK / "ch11"
    folder.mkdir(parents=True)
    (folder / "01_policy_softmax.ipynb").write_text('{"cells": [ this is not json')
    nbformat.write(good["02_temperature"], folder / "02_temperature.ipynb")
    outcomes = grade_class(root, workers=2, feedback=False, log=lambda _: None)
    mark_every_written_answer(root, "reference")
    return root, outcomes
