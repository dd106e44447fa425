"""A real class next to the example submissions: apart, with grades that say what is still open.

The tiny course gets a second notebook (``02_tiny``, the same exercises), so that a student can miss one.
Four real students, each in one state of the export: ``ada`` complete (her written answers are marked by
hand after grading), ``bo`` with both written answers waiting for a grader, ``cy`` who submitted only
``01_tiny``, and ``dee`` whose ``01_tiny`` is not valid JSON while her ``02_tiny`` is right. The examples
are graded by the same command line, in their own course.
"""
from __future__ import annotations

import csv
import html
import json
import re
import shutil
import subprocess
import sys

import nbformat
import pytest
from nbgrader.api import Gradebook

from lmpolicy_grader.__main__ import main, report
from lmpolicy_grader.class_grading.examples_course import EXAMPLES_COURSE, examples_in_class, remove_from_class
from lmpolicy_grader.class_grading.course import STATUS_FILE, Outcome, load_config, save_outcomes
from lmpolicy_grader.class_grading.status import Status

from .. import tiny_course

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("real_class")]

NOTEBOOKS = ["01_tiny", "02_tiny"]
REAL = ["ada", "bo", "cy", "dee"]
AUTOGRADED_POINTS = tiny_course.POINTS["ex1"] + tiny_course.POINTS["ex2"]  # per notebook: 5
MANUAL_POINTS = tiny_course.POINTS["ex3"]                                   # per notebook: 2
ADA_MANUAL = {"01_tiny": 1.0, "02_tiny": 2.0}


def _submit(root, student, notebook, raw=None):
    folder = root / "submitted" / student / "ch11"
    folder.mkdir(parents=True, exist_ok=True)
    if raw is not None:
        (folder / f"{notebook}.ipynb").write_text(raw)
    else:
        nbformat.write(tiny_course.source_notebook(), folder / f"{notebook}.ipynb")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """(course root, printed output of `grade`, printed output of `examples`), ada's answers marked by hand."""
    root = tiny_course.make_course(tmp_path_factory.mktemp("real-class"))
    nbformat.write(tiny_course.source_notebook(), root / "source" / "ch11" / "02_tiny.ipynb")
    for student in ("ada", "bo"):
        for notebook in NOTEBOOKS:
            _submit(root, student, notebook)
    _submit(root, "cy", "01_tiny")
    _submit(root, "dee", "01_tiny", raw='{"cells": [ broken')
    _submit(root, "dee", "02_tiny")
    outputs = {}
    for command in (["grade", "--workers", "2"], ["examples", "--workers", "2"]):
        done = subprocess.run([sys.executable, "-m", "lmpolicy_grader", "--course", str(root), *command],
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        outputs[command[0]] = done.stdout
    config = load_config(root)
    with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id) as gradebook:
        for notebook, score in ADA_MANUAL.items():
            grade = gradebook.find_grade("ex3__manual", notebook, "ch11", "ada")
            grade.manual_score, grade.needs_manual_grade = score, False  # as formgrader's grade API stores it
        gradebook.db.commit()
    return root, outputs["grade"], outputs["examples"]


def _export(course):
    done = subprocess.run([sys.executable, "-m", "nbgrader", "export"], cwd=course, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    with open(course / "nbgrader_export.csv") as handle:
        return {r["student_id"]: r for r in csv.DictReader(handle)}, done.stderr


def test_the_real_class_export_has_only_real_students_each_with_what_is_open(graded):
    root, _, _ = graded
    records, console = _export(root)
    assert sorted(records) == REAL
    assert records["ada"]["status"] == Status.COMPLETE and records["ada"]["open"] == ""
    assert float(records["ada"]["score"]) == 2 * AUTOGRADED_POINTS + sum(ADA_MANUAL.values())
    assert records["bo"]["status"] == Status.PENDING_GRADING
    assert records["bo"]["open"] == "2 answer(s) to grade by hand"
    assert records["cy"]["status"] == Status.NOTEBOOKS_MISSING and "02_tiny" in records["cy"]["open"]
    assert records["dee"]["status"] == Status.FAILED and "FAILED 01_tiny" in records["dee"]["open"]
    # dee's valid notebook keeps its score; the broken one adds nothing (not a 0 that a sum would hide)
    assert float(records["dee"]["score"]) == AUTOGRADED_POINTS
    assert "invalid notebook" in records["dee"]["problems"] and "--student dee" in records["dee"]["problems"]
    assert "formgrader" in records["dee"]["problems"]  # ... which cannot open it: the advice says so
    assert "dee / ch11 FAILED" in console and "bo / ch11 is not final" in console


def test_the_examples_have_their_own_course_and_never_enter_the_class(graded):
    root, _, examples_output = graded
    examples = root / EXAMPLES_COURSE
    assert sorted(p.name for p in (root / "submitted").iterdir()) == REAL
    with Gradebook(load_config(root).CourseDirectory.db_url) as gradebook:
        assert sorted(s.id for s in gradebook.students) == REAL
    with open(root / "grades.csv") as handle:
        assert {r["student"] for r in csv.DictReader(handle)} == set(REAL)
    records, _ = _export(examples)
    assert sorted(records) == ["blank", "reference"]
    assert records["reference"]["status"] == Status.PENDING_GRADING  # its written answers wait, as a student's do
    assert "reference" in examples_output and "ada" not in examples_output
    assert (examples / ".gitignore").read_text().splitlines()[-1] == "*"  # git ignores the whole folder


def test_the_progress_line_counts_what_was_graded(graded):
    _, grade_output, _ = graded
    # ada 2 + bo 2 + cy 1 + dee 1 graded; dee's 01 FAILED; cy's 02 not submitted
    assert "graded 6 notebooks, 1 FAILED, 1 not submitted (4 students)" in grade_output


def _stats(text: str) -> dict[str, list[str]]:
    block = text.split("Per exercise\n", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    return {line.split()[0]: line.split()[1:] for line in block}


def test_the_report_summarises_the_class_and_each_exercise_and_explains_itself(graded):
    root, _, _ = graded
    text = report(root)
    summary = text.split("\n\n", 1)[0]
    assert summary.startswith("Class summary (4 students: ")
    lines = {line.split()[0]: line for line in summary.splitlines()[2:]}
    assert sorted(lines) == REAL
    assert f"{2 * AUTOGRADED_POINTS + sum(ADA_MANUAL.values()):g}" in lines["ada"].split()
    assert Status.COMPLETE in lines["ada"]
    assert Status.PENDING_GRADING in lines["bo"] and "2 answer(s) to grade by hand" in lines["bo"]
    # exercise  points  graded  mean  full marks  pending  FAILED  not submitted
    stats = _stats(text)
    assert stats["01_tiny/ex1"] == ["2", "3", "2.00", "100%", "0", "1", "0"]     # ada bo cy; dee FAILED
    assert stats["02_tiny/ex2"] == ["3", "3", "3.00", "100%", "0", "0", "1"]     # ada bo dee; cy did not submit
    assert stats["01_tiny/ex3"] == ["2", "1", "1.00", "0%", "2", "1", "0"]       # ada marked 1 of 2; bo cy wait
    assert stats["02_tiny/ex3"] == ["2", "1", "2.00", "100%", "2", "0", "1"]     # ada marked; bo dee wait; cy none
    assert "FAILED dee/01_tiny: invalid notebook" in text and "repair it in submitted/" in text
    for word in ("score so far", "pending manual grading", "notebooks missing", "full marks", "grades.csv"):
        assert word in text.split("How to read this report", 1)[1], word
    assert "+?" not in text


def _feedback_text(course, student, notebook="01_tiny"):
    page = (course / "feedback" / student / "ch11" / f"{notebook}.html").read_text()
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_feedback_before_manual_grading_shows_pending_as_pending(graded):
    root, _, _ = graded
    text = " ".join(_feedback_text(root, "bo").split())
    assert "Score: not graded yet / 2.0" in text
    assert f"Score: {AUTOGRADED_POINTS:g} so far, {MANUAL_POINTS:g} points not graded yet / 7.0" in text
    assert "Score: 2.0 / 2.0" in text  # the autograded parts show their numbers as before
    blank = " ".join(_feedback_text(root / EXAMPLES_COURSE, "blank").split())
    assert "not graded yet" not in blank and "Score: 0.0 / 2.0" in blank  # an unanswered question is a real 0


def test_example_students_left_in_a_class_are_left_out_and_removed_through_nbgrader(graded, tmp_path):
    root, _, _ = graded
    course = tmp_path / "course"
    shutil.copytree(root, course, ignore=shutil.ignore_patterns(EXAMPLES_COURSE, "autograded", "feedback"))
    config = load_config(course)
    with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id) as gradebook:
        gradebook.add_student("reference")  # as an older grader left it: in the gradebook and submitted/
    _submit(course, "reference", "01_tiny")
    save_outcomes(course, [Outcome("reference", "01_tiny", Status.MISSING, "not submitted")])
    assert examples_in_class(course) == ["reference"]
    assert "remove them (submissions, grades) with `python -m lmpolicy_grader examples --remove-from-class`" \
        in report(course)
    remove_from_class(course, ["reference"], log=lambda _: None)
    with Gradebook(config.CourseDirectory.db_url) as gradebook:
        assert sorted(s.id for s in gradebook.students) == REAL
    assert not (course / "submitted" / "reference").exists()
    assert {o["student"] for o in json.loads((course / STATUS_FILE).read_text())} == set(REAL)
    with pytest.raises(ValueError, match="ada"):
        remove_from_class(course, ["ada"])
    assert main(["--course", str(course), "examples", "--remove-from-class"]) == 0  # nothing left: says so
