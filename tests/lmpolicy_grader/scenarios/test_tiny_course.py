"""The grading pipeline on a tiny course: every hostile submission gets its expected outcome.

The class is graded once per session (conftest.py) by the parallel grader; the expected scores
come from the notebook's design (tiny_course.HOSTILE), not from the grader.
"""
from __future__ import annotations

import ast
import csv
import re
import shutil

import nbformat
import pytest
from nbgrader.api import Gradebook

from lmpolicy_grader.__main__ import release, report
from lmpolicy_grader.class_grading.grading import grade_class
from lmpolicy_grader.class_grading.course import load_config, load_outcomes
from lmpolicy_grader.class_grading.report import exercise_rows
from lmpolicy_grader.class_grading.status import Status

from .. import tiny_course

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("tiny_class")]


def _rows(root, student):
    outcomes = [o for o in load_outcomes(root) if o.student == student]
    return {row.exercise: row for row in exercise_rows(root, outcomes)}


@pytest.mark.parametrize("student", sorted(tiny_course.HOSTILE))
def test_hostile_submission_gets_its_expected_outcome(tiny_class, student):
    root, outcomes = tiny_class
    _, expected_scores, expected_status, reason_words = tiny_course.HOSTILE[student]
    outcome = outcomes[student]
    assert outcome.status == expected_status, outcome
    assert reason_words in outcome.reason
    rows = _rows(root, student)
    if expected_status == Status.FAILED:
        assert {row.status for row in rows.values()} == {Status.FAILED}
        assert all(row.score is None for row in rows.values()), "a notebook that failed must not show a score"
        return
    assert {ex: rows[ex].score for ex in expected_scores} == expected_scores
    assert rows["ex3"].status == Status.PENDING and rows["ex3"].score is None


def test_blank_release_scores_zero_on_every_part(tiny_class):
    root, outcomes = tiny_class
    assert outcomes["blank"].status == Status.GRADED
    assert {ex: (row.score, row.status) for ex, row in _rows(root, "blank").items()} == \
        {"ex1": (0, Status.GRADED), "ex2": (0, Status.GRADED), "ex3": (0, Status.GRADED)}


def test_invalid_json_is_failed_with_its_reason(tiny_class):
    root, outcomes = tiny_class
    assert outcomes["invalid_json"].status == Status.FAILED
    assert "invalid notebook" in outcomes["invalid_json"].reason
    assert all(row.status == Status.FAILED and row.score is None for row in _rows(root, "invalid_json").values())


def test_grades_csv_has_a_status_column_and_no_score_for_failures(tiny_class):
    root, _ = tiny_class
    report(root)
    with open(root / "grades.csv") as handle:
        records = list(csv.DictReader(handle))
    assert {"student", "exercise", "score", "max_score", "status", "reason"} <= set(records[0])
    failed = [r for r in records if r["student"] == "os_exit"]
    assert failed and all(r["status"] == Status.FAILED and r["score"] == "" and "kernel died" in r["reason"] for r in failed)
    assert {r["status"] for r in records if r["student"] == "reference"} == {Status.GRADED, Status.PENDING}


def _feedback(root, student):
    return (root / "feedback" / student / "ch11" / f"{tiny_course.NOTEBOOK}.html").read_text()


def test_feedback_hides_hidden_tests_and_the_message_of_a_failed_one(tiny_class):
    root, _ = tiny_class
    html = _feedback(root, "wrong")  # passes the visible check, fails the hidden one
    assert "fails one of the hidden checks" in html
    assert "hidden check of double failed" not in html  # its message, kept for the instructor (below)
    assert "BEGIN HIDDEN TESTS" not in html and "double([-3.0, 0.5])" not in html
    autograded = (root / "autograded" / "wrong" / "ch11" / f"{tiny_course.NOTEBOOK}.ipynb").read_text()
    assert "hidden check of double failed" in autograded


def test_feedback_says_hidden_test_only_under_a_failing_hidden_test(tiny_class):
    root, _ = tiny_class
    note = "fails one of the hidden checks"
    assert note in _feedback(root, "wrong")  # ex1 passes its visible check, fails the hidden one
    text = _text(_feedback(root, "edited_cells"))  # ex1 (times 3) fails the visible check; ex2 passes everything
    assert "double is off" in text  # the visible check's own message
    assert note not in text
    assert "BEGIN HIDDEN TESTS" not in text and "double([-3.0, 0.5])" not in text


def _text(page: str) -> str:
    """What a reader of the HTML sees: no tags (code is split into highlighted spans), entities decoded."""
    import html
    import re
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def test_feedback_of_a_rebinding_shows_the_wrong_answer_not_the_rebinding(tiny_class):
    root, _ = tiny_class
    html = " ".join(_feedback(root, "monkeypatch").split())  # the verdict is wrapped as every verdict is
    # the rebound numpy.allclose and check_close would live in the submission's kernel only; the code rule refuses
    # the rebinding itself, and says so
    assert "TamperingDetected" not in html and "an assignment to numpy.allclose, an attribute of a module" in html


def test_a_spy_on_the_channel_learns_no_word_of_the_hidden_tests(tiny_class):
    """The trusted side asks for names with a test's visible part only: the hidden test's words never cross. The
    spy's import is outside the code rule, so no test below it reaches the submission at all: it sees nothing."""
    root, _ = tiny_class
    graded = nbformat.read(root / "autograded" / "spy" / "ch11" / f"{tiny_course.NOTEBOOK}.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for o in graded.cells[tiny_course.cell_index(graded, "ex2__answer")].outputs)
    assert printed.startswith("SPIED []"), printed  # the spy ran, and ex1's test never asked its kernel
    assert not {"allclose", "hidden", "failed"} & set(re.findall(r"\w+", printed)), printed


def test_the_grading_kernel_knows_its_student_from_the_folder_and_nothing_of_the_hidden_inputs(tiny_class):
    """The student's id comes from submitted/<student>/ (the notebook names none); the hidden-inputs value and the
    course secret stay with the grader (the trusted kernel's use of them: the student replays_recorded_inputs)."""
    root, _ = tiny_class
    graded = nbformat.read(root / "autograded" / "who_am_i" / "ch11" / f"{tiny_course.NOTEBOOK}.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for o in graded.cells[tiny_course.cell_index(graded, "ex1__answer")].outputs)
    assert printed.startswith("GRADED AS"), printed
    seen = ast.literal_eval(printed.removeprefix("GRADED AS").strip())
    assert seen == {"LMPOLICY_STUDENT_ID": "who_am_i", "LMPOLICY_HIDDEN_INPUTS": None, "LMPOLICY_COURSE_SECRET": None,
                    "JUPYTERHUB_USER": None}
    secret = root / ".lmpolicy_course_secret"
    assert secret.stat().st_mode & 0o077 == 0 and len(secret.read_text().strip()) == 64  # the grader's own


def test_the_feedback_carries_nothing_printed_while_graded(tiny_class):
    """The spy printed what it heard in the cell after ex1's test: the instructor sees it, the student's feedback not."""
    root, _ = tiny_class
    html = _feedback(root, "spy")
    assert "SPIED [" not in html and "what your code printed while it was graded is not part of the feedback" in html


def test_output_flood_is_cut_while_streaming(tiny_class):
    root, outcomes = tiny_class
    path = root / "autograded" / "output_flood" / "ch11" / f"{tiny_course.NOTEBOOK}.ipynb"
    assert path.stat().st_size < 100_000  # the flood printed ~30 MB
    assert any(i["kind"] == "output cut" for i in outcomes["output_flood"].incidents)


def test_deleted_locked_test_and_setup_cells_come_back_in_place(tiny_class):
    root, _ = tiny_class
    nb = nbformat.read(root / "autograded" / "deleted_cells" / "ch11" / f"{tiny_course.NOTEBOOK}.ipynb", as_version=4)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") or c.get("id") for c in nb.cells]
    assert ids == ["header", "setup", "tiny-02", "ex1__answer", "ex1__tests", "ex2__answer", "ex2__tests",
                   "ex3__question", "ex3__manual"]
    assert "BEGIN HIDDEN TESTS" in nb.cells[ids.index("ex2__tests")].source


def test_regrading_one_by_one_gives_identical_grades(tiny_class, tmp_path):
    """Serial grading (one worker) of a copy of the graded course reproduces the parallel grades,
    and keeps a manual grade given in between."""
    root, outcomes = tiny_class
    copy = tmp_path / "course"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("autograded", "feedback"))
    students = ["reference", "wrong", "monkeypatch", "deleted_cells", "duplicated_cells", "os_exit", "invalid_json"]
    config = load_config(copy)
    with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id) as gradebook:
        grade = gradebook.find_grade("ex3__manual", tiny_course.NOTEBOOK, "ch11", "reference")
        grade.manual_score, grade.needs_manual_grade = 1.5, False  # as formgrader's grade API stores it
        gradebook.db.commit()
    serial = {o.student: o for o in grade_class(copy, students=students, workers=1, log=lambda _: None)}

    def summary(course, student):
        return {ex: (row.score, row.status) for ex, row in _rows(course, student).items()}
    for student in students:
        assert serial[student].status == outcomes[student].status
        expected = summary(root, student)
        if student == "reference":  # the instructor's manual grade survives re-grading, flagged for a re-check
            expected["ex3"] = (1.5, Status.PENDING)
        assert summary(copy, student) == expected, student


def test_nbgrader_export_marks_failed_submissions_instead_of_scoring_them_zero(tiny_class):
    import subprocess
    import sys

    root, outcomes = tiny_class
    done = subprocess.run([sys.executable, "-m", "nbgrader", "export"], cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    with open(root / "nbgrader_export.csv") as handle:
        records = {r["student_id"]: r for r in csv.DictReader(handle)}
    failed = {student for student, o in outcomes.items() if o.status == Status.FAILED}
    assert {"invalid_json", "os_exit"} <= failed
    for student in failed:
        assert student in records, f"{student} is missing from the export"
        assert records[student]["status"] == Status.FAILED and records[student]["score"] == "", records[student]
        assert outcomes[student].reason.split(":")[0] in records[student]["problems"]
    # its written answer (ex3) waits for a grader, so the row is not final
    assert records["reference"]["status"] == Status.PENDING_GRADING and records["reference"]["problems"] == ""
    assert "FAILED" in done.stderr  # the instructor is told on the console too


def test_unsandboxed_a_killed_worker_fails_its_notebook_and_the_class_is_still_graded(tmp_path):
    """Without the sandbox a submission can kill the grader's worker: that notebook is FAILED, the rest graded."""
    root = tiny_course.make_course(tmp_path)
    release(root)
    tiny_course.submit(root, "kills_the_grader", tiny_course._with(tiny_course.KILLS_THE_GRADER))
    tiny_course.submit(root, "reference", tiny_course.source_notebook())
    outcomes = {o.student: o for o in grade_class(root, workers=1, log=lambda _: None, sandbox=False)}
    assert outcomes["kills_the_grader"].status == Status.FAILED
    assert "worker process died" in outcomes["kills_the_grader"].reason
    assert outcomes["reference"].status == Status.GRADED
    assert {ex: _rows(root, "reference")[ex].score for ex in ("ex1", "ex2")} == {"ex1": 2, "ex2": 3}
