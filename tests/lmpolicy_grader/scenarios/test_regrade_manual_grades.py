"""A manual grade after a re-grade: formgrader and the report agree on what is left to do.

nbgrader's ``SaveAutoGrades`` sets ``needs_manual_grade`` on every cell that already has a manual score
whenever the notebook is autograded again (the gradebook keeps no copy of the answer the score was given
for, so it cannot tell whether the answer changed). The score is kept, and formgrader shows it highlighted
with a "Resolve" button. The report must then say "re-check in formgrader" for exactly those cells (not
"graded", not "to grade by hand"), keep the score in the score so far, and return to complete once the
grader resolves them in formgrader.
"""
from __future__ import annotations

import csv
import subprocess
import sys

import pytest
from nbgrader.api import Gradebook

from lmpolicy_grader.__main__ import release
from lmpolicy_grader.class_grading.grading import grade_class
from lmpolicy_grader.class_grading.course import load_config, load_outcomes
from lmpolicy_grader.class_grading.report import exercise_rows, format_report, student_summaries
from lmpolicy_grader.class_grading.status import Status

from .. import tiny_course

pytestmark = pytest.mark.slow

MANUAL = "ex3__manual"
MANUAL_SCORE = 1.5
AUTOGRADED = tiny_course.POINTS["ex1"] + tiny_course.POINTS["ex2"]  # ada's reference answers earn all of it


def _gradebook(root):
    config = load_config(root)
    return Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id)


def _save_in_formgrader(root, student: str, score: float) -> None:
    """What formgrader's grade API (PUT /formgrader/api/grade/<id>) does when a score is typed in or
    "Resolve" is clicked: the manual score, and the flag cleared since the grade now has a score."""
    with _gradebook(root) as gradebook:
        grade = gradebook.find_grade(MANUAL, tiny_course.NOTEBOOK, "ch11", student)
        grade.manual_score, grade.extra_credit = score, None
        grade.needs_manual_grade = grade.manual_score is None and grade.auto_score is None
        gradebook.db.commit()


def _gradebook_flags(root, student: str) -> tuple[bool, float | None, bool]:
    """(the cell's needs_manual_grade, its manual score, the notebook's needs_manual_grade): what formgrader
    shows on the grading page and in its submission lists."""
    with _gradebook(root) as gradebook:
        grade = gradebook.find_grade(MANUAL, tiny_course.NOTEBOOK, "ch11", student)
        notebook = gradebook.find_submission_notebook(tiny_course.NOTEBOOK, "ch11", student)
        return grade.needs_manual_grade, grade.manual_score, notebook.needs_manual_grade


def _report(root):
    rows = exercise_rows(root, load_outcomes(root))
    return {r.exercise: r for r in rows}, student_summaries(rows)["ada"], format_report(rows)


def _export_row(root) -> dict:
    done = subprocess.run([sys.executable, "-m", "nbgrader", "export"], cwd=root, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    with open(root / "nbgrader_export.csv") as handle:
        return {r["student_id"]: r for r in csv.DictReader(handle)}["ada"]


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tiny_course.make_course(tmp_path_factory.mktemp("regrade"))
    release(root)
    tiny_course.submit(root, "ada", tiny_course.replace_answer(
        tiny_course.source_notebook(), MANUAL, "Because x*x is a product of two numbers of the same sign."))
    grade_class(root, workers=1, log=lambda _: None)
    return root


def test_a_manual_grade_kept_through_a_regrade_reads_re_check_until_resolved(course):
    # first grading: the written answer waits for a grader
    rows, summary, _ = _report(course)
    assert (rows["ex3"].status, rows["ex3"].waiting, rows["ex3"].recheck) == (Status.PENDING, 1, 0)
    assert _gradebook_flags(course, "ada") == (True, None, True)

    # graded by hand in formgrader: complete, everywhere
    _save_in_formgrader(course, "ada", MANUAL_SCORE)
    rows, summary, _ = _report(course)
    assert (rows["ex3"].status, rows["ex3"].score, summary.status) == (Status.GRADED, MANUAL_SCORE, Status.COMPLETE)
    assert _gradebook_flags(course, "ada") == (False, MANUAL_SCORE, False)

    # graded again (same submission): nbgrader keeps the score and flags it for review
    grade_class(course, workers=1, log=lambda _: None)
    assert _gradebook_flags(course, "ada") == (True, MANUAL_SCORE, True)
    rows, summary, printed = _report(course)
    assert (rows["ex3"].status, rows["ex3"].waiting, rows["ex3"].recheck) == (Status.PENDING, 0, 1)
    assert rows["ex3"].score == MANUAL_SCORE and "re-check in formgrader" in rows["ex3"].reason
    assert (rows["ex1"].status, rows["ex2"].status) == (Status.GRADED, Status.GRADED)  # only that cell
    assert summary.status == Status.PENDING_GRADING
    assert summary.score == AUTOGRADED + MANUAL_SCORE  # the kept score counts
    assert summary.open() == "1 manual grade(s) to re-check in formgrader"
    ada_line = next(line for line in printed.splitlines() if line.startswith("ada "))
    assert "pending manual grading" in ada_line and "1 manual grade(s) to re-check in formgrader" in ada_line
    export = _export_row(course)
    assert (export["status"], export["open"]) == (Status.PENDING_GRADING, "1 manual grade(s) to re-check in formgrader")
    assert float(export["score"]) == AUTOGRADED + MANUAL_SCORE

    # "Resolve" in formgrader saves the same score: complete again, in the report and the export
    _save_in_formgrader(course, "ada", MANUAL_SCORE)
    rows, summary, _ = _report(course)
    assert (rows["ex3"].status, rows["ex3"].recheck, summary.status) == (Status.GRADED, 0, Status.COMPLETE)
    assert _export_row(course)["status"] == Status.COMPLETE
