"""The exchange round trip through nbgrader's own exchange, in a course-local exchange folder:
the instructor releases, three students fetch and submit, the instructor collects and grades."""
from __future__ import annotations

import nbformat
import pytest
from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory
from nbgrader.exchange import ExchangeFactory
from nbgrader.exchange.default import submit as default_submit

from lmpolicy_grader.__main__ import release
from lmpolicy_grader.class_grading.grading import grade_class
from lmpolicy_grader.class_grading.course import load_config
from lmpolicy_grader.class_grading.report import exercise_rows
from lmpolicy_grader.class_grading.status import Status

from .. import tiny_course

pytestmark = pytest.mark.slow

# what each student writes into the fetched release, and the autograded scores it must earn
ANSWERS = {
    "alice": ({"ex1__answer": tiny_course.CORRECT_DOUBLE,
               "ex2__answer": "def square(x):\n    return np.asarray(x, dtype=float) ** 2"}, {"ex1": 2, "ex2": 3}),
    "bob": ({}, {"ex1": 0, "ex2": 0}),
    "carol": ({"ex1__answer": "def double(x):\n    return x + x + 1"}, {"ex1": 0, "ex2": 0}),
}


def _exchange(root, config, student_id=None):
    coursedir = CourseDirectory(config=config, root=str(root))
    coursedir.assignment_id = "ch11"
    if student_id:
        coursedir.student_id = student_id
    return ExchangeFactory(config=config), coursedir, Authenticator(config=config)


def test_release_fetch_submit_collect_grade(tmp_path, monkeypatch):
    root = tiny_course.make_course(tmp_path / "course")
    release(root)
    config = load_config(root)
    factory, coursedir, auth = _exchange(root, config)
    factory.ReleaseAssignment(coursedir=coursedir, authenticator=auth, config=config).start()
    assert (root / "exchange" / "lm-policy" / "outbound" / "ch11" / f"{tiny_course.NOTEBOOK}.ipynb").exists()

    for student, (answers, _) in ANSWERS.items():
        home = tmp_path / "home" / student
        monkeypatch.setattr(default_submit, "get_username", lambda student=student: student)
        student_config = load_config(root)
        student_config.Exchange.assignment_dir = str(home)
        student_config.Exchange.cache = str(tmp_path / "cache" / student)
        factory, coursedir, auth = _exchange(home, student_config)
        factory.FetchAssignment(coursedir=coursedir, authenticator=auth, config=student_config).start()
        path = home / "ch11" / f"{tiny_course.NOTEBOOK}.ipynb"
        nb = nbformat.read(path, as_version=4)
        for grade_id, source in answers.items():
            tiny_course.replace_answer(nb, grade_id, source)
        nbformat.write(nb, path)
        factory.Submit(coursedir=coursedir, authenticator=auth, config=student_config).start()

    factory, coursedir, auth = _exchange(root, config)
    factory.Collect(coursedir=coursedir, authenticator=auth, config=config).start()
    assert sorted(p.name for p in (root / "submitted").iterdir()) == sorted(ANSWERS)

    outcomes = grade_class(root, workers=2, log=lambda _: None)
    assert [o.status for o in outcomes] == [Status.GRADED] * len(ANSWERS)
    for outcome in outcomes:
        rows = {r.exercise: r.score for r in exercise_rows(root, [outcome]) if r.exercise != "ex3"}
        assert rows == ANSWERS[outcome.student][1], outcome.student


def test_collect_skips_a_submission_whose_copy_was_cut_off(tmp_path, monkeypatch):
    """A server killed mid-submit leaves an inbound folder without timestamp.txt; stock nbgrader 0.9.6
    collected it over the student's last complete submission, the course's collect keeps the complete one."""
    root = tiny_course.make_course(tmp_path / "course")
    release(root)
    config = load_config(root)
    factory, coursedir, auth = _exchange(root, config)
    factory.ReleaseAssignment(coursedir=coursedir, authenticator=auth, config=config).start()
    home = tmp_path / "home" / "alice"
    monkeypatch.setattr(default_submit, "get_username", lambda: "alice")
    student_config = load_config(root)
    student_config.Exchange.assignment_dir = str(home)
    student_config.Exchange.cache = str(tmp_path / "cache" / "alice")
    student_factory, student_dir, student_auth = _exchange(home, student_config)
    student_factory.FetchAssignment(coursedir=student_dir, authenticator=student_auth, config=student_config).start()
    student_factory.Submit(coursedir=student_dir, authenticator=student_auth, config=student_config).start()

    inbound = root / "exchange" / "lm-policy" / "inbound"
    (complete,) = inbound.iterdir()
    student, assignment, _, suffix = complete.name.split("+")
    cut_off = inbound / f"{student}+{assignment}+2999-01-01 00:00:00.000000 UTC+{suffix}x"  # newer by its name
    cut_off.mkdir()  # and only a part of the copy
    assert "2999" in cut_off.name and not (cut_off / "timestamp.txt").exists()

    collect = factory.Collect(coursedir=coursedir, authenticator=auth, config=config)
    collect.update = True  # formgrader's Collect button: replace what submitted/ holds
    collect.start()
    collected = root / "submitted" / "alice" / "ch11"
    assert (collected / f"{tiny_course.NOTEBOOK}.ipynb").exists()
    assert (collected / "timestamp.txt").read_text() == (complete / "timestamp.txt").read_text()
