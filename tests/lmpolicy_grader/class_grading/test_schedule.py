"""The order notebooks go to the workers: longest first by the last grading's times, else as listed."""
from __future__ import annotations

from lmpolicy_grader.class_grading.course import Outcome
from lmpolicy_grader.class_grading.schedule import longest_first
from lmpolicy_grader.class_grading.status import Status

STUDENTS = ["ann", "bob", "cat"]
NOTEBOOKS = ["01_policy_softmax", "06_kl_estimators", "08_tinylm_reinforce"]
STUDENT_BY_STUDENT = [(s, nb) for s in STUDENTS for nb in NOTEBOOKS]


def graded(student, notebook, seconds, status=Status.GRADED):
    return Outcome(student, notebook, status, seconds=seconds)


def test_a_first_grading_keeps_the_student_by_student_order():
    assert longest_first(STUDENT_BY_STUDENT, []) == STUDENT_BY_STUDENT
    # a notebook not submitted last time has no time either
    assert longest_first(STUDENT_BY_STUDENT, [Outcome("ann", NOTEBOOKS[0], Status.MISSING)]) == STUDENT_BY_STUDENT


def test_every_notebook_08_goes_before_the_short_notebooks_so_none_is_left_for_the_end():
    history = [graded(s, nb, {"01_policy_softmax": 2.4, "06_kl_estimators": 3.1, "08_tinylm_reinforce": 12.8}[nb])
               for s, nb in STUDENT_BY_STUDENT]
    order = longest_first(STUDENT_BY_STUDENT, history)
    assert order == [(s, "08_tinylm_reinforce") for s in STUDENTS] + [(s, "06_kl_estimators") for s in STUDENTS] \
        + [(s, "01_policy_softmax") for s in STUDENTS]


def test_a_students_own_time_counts_before_the_notebooks_median_and_an_untimed_notebook_goes_first():
    history = [graded("ann", "01_policy_softmax", 2.0), graded("bob", "01_policy_softmax", 3.0),
               # cat's softmax ran into the time limit last time: it may do so again
               graded("cat", "01_policy_softmax", 60.0, Status.FAILED),
               graded("ann", "06_kl_estimators", 4.0)]
    order = longest_first(STUDENT_BY_STUDENT, history)
    untimed = [(s, "08_tinylm_reinforce") for s in STUDENTS]  # no one's notebook 08 was graded last time
    assert order[:3] == untimed
    assert order[3] == ("cat", "01_policy_softmax")
    # bob's and cat's notebook 06 are expected to take ann's 4.0 s, the only time there is
    assert order[4:7] == [("ann", "06_kl_estimators"), ("bob", "06_kl_estimators"), ("cat", "06_kl_estimators")]
    assert order[7:] == [("bob", "01_policy_softmax"), ("ann", "01_policy_softmax")]
