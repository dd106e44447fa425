"""The report's "what the class got wrong": the failing reasons the checks named, counted across the class.

Unit tests on autograded notebooks written here (no grading), and the report of a real class graded with the
corpus's typical wrong answers (``conftest.wrong_answers_class``): two students whose different wrong softmaxes
fall into one pitfall, with different numbers in their checks' messages, are counted together."""
from __future__ import annotations

import re

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from lmpolicy_grader.class_grading.course import load_outcomes
from lmpolicy_grader.class_grading.pitfalls import Reason, common_pitfalls, normalised
from lmpolicy_grader.class_grading.report import ExerciseRow, exercise_rows, format_report
from lmpolicy_grader.class_grading.status import Status


def test_a_reason_keeps_no_number_of_the_student():
    one = ("the sum along dim=-1 of softmax(torch.tensor([[2., 1., 0.], [0., 3., 1.]]), dim=-1) is off at index (0,): "
           "expected 1, got 0.31816")
    other = ("the sum along dim=0 of softmax(torch.tensor([[2., 1.], [0., 3.]]), dim=0) is off at index (2,): "
             "expected 1, got 2.04e-01")
    assert normalised(one) == normalised(other)
    assert not re.search(r"\d", normalised(one))
    assert normalised("returned  -inf\n where 1e+03 was expected") == "returned -inf where # was expected"
    assert normalised("x1 and shape2 stay") == "x1 and shape2 stay"  # a digit inside a name is not a number


def _autograded(root, student, notebook, failures):
    """An autograded notebook of ``student`` whose test cells (grade id -> error value, None: passed) are given."""
    nb = new_notebook()
    for grade_id, evalue in failures.items():
        cell = new_code_cell("checks.check_close(...)")
        cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": grade_id,
                                     "points": 1, "schema_version": 3}
        if evalue is not None:
            cell.outputs = [new_output("error", ename="CheckFailed", evalue=evalue, traceback=[])]
        nb.cells.append(cell)
    folder = root / "autograded" / student / "ch11"
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / f"{notebook}.ipynb")


def _row(student, exercise, status=Status.GRADED):
    return ExerciseRow(student, "nb", exercise, 0.0, 1.0, status)


def test_each_student_counts_once_per_reason_and_only_the_top_three_are_kept(tmp_path):
    hint = "\nHint: subtract the maximum logit first"
    for number, student in enumerate(["a", "b", "c", "d"]):
        failures = {"ex1__tests": f"softmax(...) contains NaN at index ({number},){hint}",
                    "ex1__more_tests": f"softmax(...) contains NaN at index ({number + 5},){hint}",  # the same again
                    "ex2__tests": None}
        _autograded(tmp_path, student, "nb", failures)
    for student, why in [("e", "returned a list"), ("f", "returned a list"), ("g", "has shape (3,)"),
                         ("h", "is not finite")]:
        _autograded(tmp_path, student, "nb", {"ex1__tests": why})
    students = "abcdefgh"
    rows = [_row(s, "ex1") for s in students] + [_row(s, "ex2") for s in students]
    rows.append(_row("z", "ex1", Status.FAILED))  # not autograded: neither counted nor in "of"
    found = common_pitfalls(tmp_path, rows)
    assert list(found) == [("nb", "ex1")]  # nobody failed ex2
    assert [(p.reason, p.students, p.of) for p in found[("nb", "ex1")]] == [
        (Reason("softmax(...) contains NaN at index (#,)", "subtract the maximum logit first"), 4, 8),
        (Reason("returned a list"), 2, 8),
        (Reason("has shape (#,)"), 1, 8),  # alphabetically before "is not finite", which is the fourth: left out
    ]


@pytest.mark.slow
@pytest.mark.xdist_group("wrong_answers_class")
def test_the_report_counts_two_students_with_one_pitfall_together(wrong_answers_class):
    root, outcomes = wrong_answers_class
    unfinished = [(o.student, o.notebook, o.reason) for o in outcomes
                  if o.notebook == "01_policy_softmax" and o.student != "not_a_notebook" and o.status != Status.GRADED]
    assert not unfinished, f"the class was not graded as it should have been (a machine too loaded?): {unfinished}"
    rows = exercise_rows(root, load_outcomes(root))
    found = common_pitfalls(root, rows)[("01_policy_softmax", "nb01_softmax")]
    by_hint = {p.reason.hint: p for p in found}
    along_dim = next(p for hint, p in by_hint.items() if "normalise along `dim`" in hint)
    # whole_tensor and last_dim_only: two different wrong answers, checks failing with other numbers, one pitfall
    assert (along_dim.students, along_dim.of) == (2, 5)  # of the five whose softmax was autograded (not the FAILED)
    no_max = next(p for hint, p in by_hint.items() if "subtract the maximum" in hint)
    assert no_max.students == 1
    assert found[0] == along_dim  # most students first
    report = format_report(rows, common_pitfalls(root, rows))
    section = report.split("What the class got wrong", 1)[1].split("FAILED notebooks", 1)[0]
    assert "Exercise 01.softmax" in section
    assert f"2 of 5: {along_dim.reason.problem}" in section
    assert f"hint: {along_dim.reason.hint}" in section
    assert "1 of 5: " in section
    assert "0.31816" not in report and "0.204226" not in report  # no student's own number


def test_a_report_without_failures_says_nothing_of_pitfalls(tmp_path):
    rows = [ExerciseRow("a", "nb", "ex1", 1.0, 1.0, Status.GRADED)]
    assert "got wrong" not in format_report(rows, common_pitfalls(tmp_path, rows)).split("How to read")[0]
