"""The graded-grader corpus on the real assignment ch11, graded once by the parallel grader.

Expected outcomes come from the corpus itself: the reference earns every autograded point, the
blank release none, each typical wrong answer (lmpolicy_grader.corpus.wrong_answers) costs its exercise's
autograded points and no other exercise's (in `make test` the first round of them, one for every exercise;
LMPOLICY_WHOLE_CORPUS=1, every round), the hostile notebook 07 gets no credit for calling
lmpolicy's own implementation and a tampering zero for rebinding a check helper, and a correct
notebook 01 whose locked set-up cell was broken keeps every point.
"""
from __future__ import annotations

from collections import defaultdict

import pytest
from nbgrader.api import Gradebook

from lmpolicy_grader.class_grading.examples_course import mistake_rounds
from lmpolicy_grader.corpus.wrong_answers import WRONG_ANSWERS
from lmpolicy_grader.class_grading.course import load_config
from lmpolicy.notebook.progress import exercise_key
from lmpolicy_grader.class_grading.report import exercise_rows
from lmpolicy_grader.class_grading.status import Status

from ..conftest import CH11_EDITED_SETUP_SOURCE, CH11_EDITED_SETUP_STUDENT, CH11_HOSTILE_STUDENT, WHOLE_CORPUS

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ch11_class")]


def _autograded(root, student):
    """{(notebook, exercise): (score, max)} over the autograded test cells, straight from the gradebook."""
    config = load_config(root)
    scores = defaultdict(lambda: [0.0, 0.0])
    with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id) as gradebook:
        for notebook in gradebook.find_assignment("ch11").notebooks:
            try:
                grades = gradebook.find_submission_notebook(notebook.name, "ch11", student).grades
            except Exception:
                continue
            for grade in grades:
                if grade.cell_type == "code":  # autograded test cells (manual answers are markdown)
                    key = (notebook.name, exercise_key(grade.name))
                    scores[key][0] += grade.score or 0.0
                    scores[key][1] += grade.max_score
    return {key: tuple(value) for key, value in scores.items()}


def _test_cells(root):
    config = load_config(root)
    counts = defaultdict(int)
    with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id) as gradebook:
        for notebook in gradebook.find_assignment("ch11").notebooks:
            for cell in notebook.grade_cells:
                if cell.cell_type == "code":
                    counts[(notebook.name, exercise_key(cell.name))] += 1
    return counts


def test_every_notebook_graded_without_failure(ch11_class):
    _, _, outcomes = ch11_class
    failed = [(o.student, o.notebook, o.reason) for o in outcomes if o.status == Status.FAILED]
    assert not failed, failed


def test_reference_earns_every_autograded_point(ch11_class):
    root, _, _ = ch11_class
    scores = _autograded(root, "reference")
    assert len(scores) == len(_test_cells(root))
    assert {key: s for key, (s, m) in scores.items() if s != m} == {}


def test_blank_release_earns_nothing(ch11_class):
    root, _, _ = ch11_class
    assert {key: s for key, (s, _) in _autograded(root, "blank").items() if s != 0} == {}


def test_each_typical_wrong_answer_costs_exactly_its_exercise(ch11_class):
    root, students, _ = ch11_class
    test_cells = _test_cells(root)
    present = {p.stem for p in (root / "source" / "ch11").glob("*.ipynb")}
    rounds = mistake_rounds([a for a in WRONG_ANSWERS if a.notebook in present])
    assert rounds, "the wrong-answer corpus is empty"
    graded = [(number, round_) for number, round_ in enumerate(rounds, start=1)
              if ("mistakes" if number == 1 else f"mistakes-{number}") in students]
    assert len(graded) == (len(rounds) if WHOLE_CORPUS else 1)
    missed = ({(a.notebook, a.exercise) for a in WRONG_ANSWERS if a.notebook in present}
              - {(a.notebook, a.exercise) for a in graded[0][1]})
    assert not missed, f"the first round of mistakes (all make test grades) has no wrong answer for {sorted(missed)}"
    problems = []
    for number, round_ in graded:
        student = "mistakes" if number == 1 else f"mistakes-{number}"
        submitted = {p.stem for p in (root / "submitted" / student / "ch11").glob("*.ipynb")}
        scores = {key: value for key, value in _autograded(root, student).items() if key[0] in submitted}
        wrong = {(a.notebook, a.exercise): a for a in round_}
        for key, (score, maximum) in scores.items():
            if key in wrong:
                lost_all = score == 0 if test_cells[key] == 1 else score < maximum
                if not lost_all:
                    problems.append(f"{student}: {key} scored {score}/{maximum} with wrong answer: {wrong[key].why}")
            elif score != maximum:
                problems.append(f"{student}: {key} lost points ({score}/{maximum}) though its answer is right")
        problems += [f"{student}: {key} was not graded" for key in wrong if key not in scores]
    assert not problems, "\n".join(problems)


def test_calling_the_library_earns_nothing_and_rebinding_a_check_changes_nothing(ch11_class):
    root, students, outcomes = ch11_class
    if CH11_HOSTILE_STUDENT not in students:
        pytest.skip("notebook 07 is not in this grading (make check-notebook grades one notebook)")
    scores = _autograded(root, CH11_HOSTILE_STUDENT)
    assert scores[("07_logprob_plumbing", "task1a")][0] == 0
    assert scores[("07_logprob_plumbing", "task1b")][0] == 0
    autograded = (root / "autograded" / CH11_HOSTILE_STUDENT / "ch11" / "07_logprob_plumbing.ipynb").read_text()
    assert "LibraryShortcutUsed" in autograded
    outcome = next(o for o in outcomes if o.student == CH11_HOSTILE_STUDENT and o.notebook == "07_logprob_plumbing")
    rows = {r.exercise: r for r in exercise_rows(root, [outcome])}
    # the test cells run in the trusted process: rebinding check_close in the submission's kernel changes nothing
    # there, so task1b scores what its wrong answer earns (0), its autograded part graded (a written part may wait)
    assert {rows["task1a"].status, rows["task1b"].status} <= {Status.GRADED, Status.PENDING}
    assert rows["task1a"].score == 0 and rows["task1b"].score == 0


def test_a_broken_locked_setup_cell_is_put_back_and_costs_nothing(ch11_class):
    root, students, outcomes = ch11_class
    if CH11_EDITED_SETUP_STUDENT not in students:
        pytest.skip("notebook 01 is not in this grading (make check-notebook grades one notebook)")
    scores = {key: value for key, value in _autograded(root, CH11_EDITED_SETUP_STUDENT).items()
              if key[0] == "01_policy_softmax"}
    assert scores, "notebook 01 was not graded"
    assert {key: (s, m) for key, (s, m) in scores.items() if s != m} == {}
    outcome = next(o for o in outcomes if o.student == CH11_EDITED_SETUP_STUDENT and o.notebook == "01_policy_softmax")
    assert outcome.status == Status.GRADED, outcome.reason
    autograded = (root / "autograded" / CH11_EDITED_SETUP_STUDENT / "ch11" / "01_policy_softmax.ipynb").read_text()
    assert CH11_EDITED_SETUP_SOURCE not in autograded
