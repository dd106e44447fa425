"""The tiny course's hostile class, graded once per session with the parallel grader; a course mid-grading
for the tests that drive the grading kernel itself."""
from __future__ import annotations

import os

import nbformat
import pytest

from lmpolicy_grader.__main__ import release
from lmpolicy_grader.class_grading.grading import grade_class

from . import tiny_course
from .grading_kernel import course_mid_grading


@pytest.fixture
def sandbox_course(tmp_path):
    """(course root, the grading kernel's folder) of a course laid out as nbgrader leaves it mid-grading."""
    return course_mid_grading(tmp_path)


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


CH11_HOSTILE_STUDENT = "ch11_hostile"
# notebook 07 of the reference with: task1a answered by importing lmpolicy's own implementation (no
# credit), task1b wrong and lmpolicy.notebook.checks.check_close rebound (no effect on the trusted tests: task1b scores 0).
CH11_HOSTILE_ANSWERS = {
    "task1a__response_logprobs": "from lmpolicy.tinylm.logprobs import response_logprobs",
    "task1b__sequence_logprob": ("from lmpolicy.notebook import checks\nchecks.check_close = lambda *args, **kwargs: None\n"
                                 "def sequence_logprob(token_logprobs, mask):\n    return token_logprobs.sum(-1) * 0"),
}

CH11_EDITED_SETUP_STUDENT = "ch11_edited_setup"
# notebook 01 of the reference with its locked set-up (import) cell replaced by a broken import: the
# grader puts the released cell back, so every answer still earns its points.
CH11_EDITED_SETUP_SOURCE = "import lmpolicy_helpers_i_deleted  # a student's edit of the locked set-up cell"


def committed_notebooks(repo_root):
    """The source notebooks of the commit under test (a clean clone: all of them; a working tree:
    not the ones still being written)."""
    import subprocess

    folder = repo_root / "source" / "ch11"
    try:
        listed = subprocess.run(["git", "ls-files", "source/ch11/*.ipynb"], cwd=repo_root, check=True,
                                capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return sorted(folder.glob("*.ipynb"))
    return sorted(repo_root / name for name in listed)


# `make test` grades the first round of typical mistakes through the grader (one wrong answer for every exercise:
# 27 notebooks with the reference and the blank one, about a third of the whole corpus's grading time) and
# tests/notebooks/test_wrong_answers.py runs every one of them against its tests; LMPOLICY_WHOLE_CORPUS=1
# (`make check-notebook`, `make test-corpus`) grades every round.
WHOLE_CORPUS = os.environ.get("LMPOLICY_WHOLE_CORPUS") == "1"
# `make check-notebook NB=02_temperature` grades that notebook alone (LMPOLICY_CORPUS_NOTEBOOKS, comma-separated).
CORPUS_NOTEBOOKS = {name for name in os.environ.get("LMPOLICY_CORPUS_NOTEBOOKS", "").split(",") if name}


@pytest.fixture(scope="session")
def ch11_class(tmp_path_factory, repo_root):
    """The real course graded once: reference, blank, the typical-mistake rounds, one hostile student."""
    import shutil

    from lmpolicy_grader.class_grading.examples_course import place_examples

    root = tmp_path_factory.mktemp("ch11-course")
    (root / "source" / "ch11").mkdir(parents=True)
    for notebook in committed_notebooks(repo_root):
        if not CORPUS_NOTEBOOKS or notebook.stem in CORPUS_NOTEBOOKS:
            shutil.copy(notebook, root / "source" / "ch11" / notebook.name)
    shutil.copy(repo_root / "nbgrader_config.py", root / "nbgrader_config.py")
    release(root)
    students = place_examples(root, rounds=None if WHOLE_CORPUS else 1)
    source = root / "source" / "ch11"
    if (source / "07_logprob_plumbing.ipynb").exists():
        hostile = nbformat.read(source / "07_logprob_plumbing.ipynb", as_version=4)
        for grade_id, answer in CH11_HOSTILE_ANSWERS.items():
            tiny_course.replace_answer(hostile, grade_id, answer)
        folder = root / "submitted" / CH11_HOSTILE_STUDENT / "ch11"
        folder.mkdir(parents=True)
        nbformat.write(hostile, folder / "07_logprob_plumbing.ipynb")
        students.append(CH11_HOSTILE_STUDENT)
    if (source / "01_policy_softmax.ipynb").exists():
        edited = nbformat.read(source / "01_policy_softmax.ipynb", as_version=4)
        setup = next(c for c in edited.cells if c.metadata.get("nbgrader", {}).get("grade_id", "").endswith("__setup"))
        setup.source = CH11_EDITED_SETUP_SOURCE
        folder = root / "submitted" / CH11_EDITED_SETUP_STUDENT / "ch11"
        folder.mkdir(parents=True)
        nbformat.write(edited, folder / "01_policy_softmax.ipynb")
        students.append(CH11_EDITED_SETUP_STUDENT)
    return root, students, grade_class(root, workers=2, log=lambda _: None)
