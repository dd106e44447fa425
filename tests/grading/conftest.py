"""Grade the tiny course's hostile class once per session, with the parallel grader."""
from __future__ import annotations

import nbformat
import pytest

from lmpolicy.course.__main__ import release
from lmpolicy.course.grading import grade_class

from . import tiny_course


@pytest.fixture(scope="session")
def tiny_class(tmp_path_factory):
    """(course root, outcomes by student) after grading every HOSTILE submission plus blank and invalid JSON."""
    root = tiny_course.make_course(tmp_path_factory.mktemp("tiny-course"))
    release(root)
    tiny_course.submit(root, "blank", nbformat.read(root / "release" / "ch11" / f"{tiny_course.NOTEBOOK}.ipynb", as_version=4))
    tiny_course.submit(root, "invalid_json", raw='{"cells": [ this is not json')
    for student, (make, *_ ) in tiny_course.HOSTILE.items():
        tiny_course.submit(root, student, make())
    outcomes = grade_class(root, workers=2, log=lambda _: None)
    return root, {o.student: o for o in outcomes}
