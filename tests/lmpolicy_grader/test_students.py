"""Whose notebook a kernel grades (lmpolicy_grader.students): the variables each kernel is told, the course secret."""
from __future__ import annotations

import json
import stat
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from traitlets.config import Config

from lmpolicy_grader.students import SECRET_VARIABLE, course_secret, kernel_environments, submission_digest

SUBMISSION = "0" * 64  # a submission's digest (submission_digest)


@pytest.fixture(autouse=True)
def _no_secret_from_outside(monkeypatch):
    monkeypatch.delenv(SECRET_VARIABLE, raising=False)


def test_each_kernel_is_told_the_student_and_only_the_trusted_one_the_hidden_inputs(tmp_path):
    grading, trusted = kernel_environments(Config(), tmp_path, "alice", SUBMISSION)
    params = grading.pop("LMPOLICY_VARIANT_PARAMS")
    assert grading == {"LMPOLICY_STUDENT_ID": "alice", "LMPOLICY_VARIANTS": None, "JUPYTERHUB_USER": None}
    hidden = trusted.pop("LMPOLICY_HIDDEN_INPUTS")
    assert trusted.pop("LMPOLICY_VARIANT_PARAMS") is None  # the trusted kernel draws them itself
    assert trusted == grading and len(hidden) == 32 and int(hidden, 16) >= 0
    assert json.loads(params)["student"] == "alice"


def test_the_grading_kernel_takes_the_students_parameters_and_computes_the_same_variant(tmp_path, monkeypatch):
    """The grading kernel's library cannot draw a variant (its solvers are not there while grading): the
    parameters the grader hands it are exactly the ones a student's own kernel draws."""
    from lmpolicy.per_student import variant_answers, variants

    handed = kernel_environments(Config(), tmp_path, "alice", SUBMISSION)[0]["LMPOLICY_VARIANT_PARAMS"]
    drawn = {key: variants.answers(key, "alice") for key in variants.VARYING}
    variants._params.cache_clear()
    monkeypatch.setenv("LMPOLICY_VARIANT_PARAMS", handed)
    monkeypatch.setattr(variant_answers, "drawn", lambda *args: pytest.fail("drew the variant though it was handed"))
    try:
        assert {key: variants.answers(key, "alice") for key in variants.VARYING} == drawn
    finally:
        variants._params.cache_clear()


def test_hidden_inputs_are_the_same_at_every_grading_and_differ_between_students_and_courses(tmp_path):
    alice = kernel_environments(Config(), tmp_path, "alice", SUBMISSION)[1]["LMPOLICY_HIDDEN_INPUTS"]
    assert kernel_environments(Config(), tmp_path, "alice", SUBMISSION)[1]["LMPOLICY_HIDDEN_INPUTS"] == alice
    assert kernel_environments(Config(), tmp_path, "bob", SUBMISSION)[1]["LMPOLICY_HIDDEN_INPUTS"] != alice
    other_course = tmp_path / "other"
    other_course.mkdir()
    assert kernel_environments(Config(), other_course, "alice", SUBMISSION)[1]["LMPOLICY_HIDDEN_INPUTS"] != alice


def _notebook(answer="def double(x):\n    return 2 * x", added=None):
    import nbformat
    test = nbformat.v4.new_code_cell("assert double(1) == 2\n### BEGIN HIDDEN TESTS\nassert double(3) == 6")
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": "t", "points": 1}
    cells = [nbformat.v4.new_markdown_cell("# Doubling"), nbformat.v4.new_code_cell("import numpy as np"),
             nbformat.v4.new_code_cell(answer), test]
    if added is not None:
        cells.insert(2, nbformat.v4.new_code_cell(added))
    return nbformat.v4.new_notebook(cells=cells)


def _hidden_inputs_value(tmp_path, nb, folder=None, student="alice"):
    return kernel_environments(Config(), tmp_path, student, submission_digest(nb, folder))[1]["LMPOLICY_HIDDEN_INPUTS"]


def test_hidden_inputs_are_drawn_for_the_submission_an_unchanged_one_gets_the_same_any_change_new_ones(tmp_path):
    """Issue 34: a student who read their hidden inputs hands in a table of them; the table is a changed submission,
    so it is called with new inputs. An unchanged submission graded again is called with the same ones."""
    honest = _hidden_inputs_value(tmp_path, _notebook())
    assert _hidden_inputs_value(tmp_path, _notebook()) == honest
    table = "TABLE = {3.0: 6.0}\ndef double(x):\n    return TABLE.get(x, 2 * x)"
    changed = {
        "the answer": _notebook(answer=table),
        "a cell added above": _notebook(added="TABLE = {3.0: 6.0}"),
        "a comment": _notebook(answer="def double(x):\n    return 2 * x  # 3 -> 6"),
        "trailing spaces": _notebook(answer="def double(x):   \n    return 2 * x"),  # the kernel can read them
    }
    values = {what: _hidden_inputs_value(tmp_path, nb) for what, nb in changed.items()}
    assert honest not in values.values() and len(set(values.values())) == len(values), values
    assert _hidden_inputs_value(tmp_path, _notebook(), student="bob") != honest


def test_what_never_reaches_the_kernel_changes_nothing(tmp_path):
    """Outputs, execution counts, metadata, markdown and the test cells (the grader restores them) are not the
    submission's code: re-running and saving an unchanged notebook draws the same inputs."""
    import nbformat
    honest = _hidden_inputs_value(tmp_path, _notebook())
    rerun = _notebook()
    rerun.cells[2].outputs = [nbformat.v4.new_output("stream", name="stdout", text="ran\n")]
    rerun.cells[2].execution_count = 7
    rerun.cells[2].metadata["tags"] = ["mine"]
    rerun.metadata["widgets"] = {"state": {}}
    rerun.cells[0].source = "# Doubling, my notes"
    rerun.cells[3].source = "assert double(1) == 2  # a test cell, restored by the grader anyway"
    assert _hidden_inputs_value(tmp_path, rerun) == honest


def test_a_file_beside_the_notebook_is_part_of_the_submission(tmp_path):
    """A table in a file the answer reads: the kernel gets the folder's files, so the digest holds them (not the
    notebooks, which the kernel never gets and which change as they are graded)."""
    folder = tmp_path / "submitted" / "alice" / "ch11"
    folder.mkdir(parents=True)
    (folder / "01_x.ipynb").write_text("{}")
    honest = _hidden_inputs_value(tmp_path, _notebook(), folder)
    (folder / "02_y.ipynb").write_text("{}")
    assert _hidden_inputs_value(tmp_path, _notebook(), folder) == honest
    (folder / "table.json").write_text('{"3.0": 6.0}')
    with_table = _hidden_inputs_value(tmp_path, _notebook(), folder)
    assert with_table != honest
    (folder / "table.json").write_text('{"3.0": 6.5}')
    assert _hidden_inputs_value(tmp_path, _notebook(), folder) not in (honest, with_table)
    (folder / "data").mkdir()
    (folder / "table.json").unlink()
    assert _hidden_inputs_value(tmp_path, _notebook(), folder) != honest  # an empty folder can be read too


def test_the_course_secret_is_made_once_readable_by_its_owner_only(tmp_path):
    first = course_secret(tmp_path)
    path = tmp_path / ".lmpolicy_course_secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(first) == 64
    assert course_secret(tmp_path) == first


def test_graders_that_make_the_secret_at_once_all_read_the_one_made_never_an_empty_file(tmp_path):
    """The first grading of a course on two workers: each makes the secret at the same moment (a reader once
    found the winner's file created but not yet written, and failed its notebook: 'the course secret is empty')."""
    graders = 4
    for attempt in range(40):
        course = tmp_path / str(attempt)
        course.mkdir()
        together = threading.Barrier(graders)

        def make(_):
            together.wait()
            try:
                return course_secret(course)
            except RuntimeError as problem:
                return problem

        with ThreadPoolExecutor(graders) as pool:
            read = list(pool.map(make, range(graders)))
        assert len(set(read)) == 1 and isinstance(read[0], bytes), (attempt, read)
        assert sorted(path.name for path in course.iterdir()) == [".lmpolicy_course_secret"]  # no draft left


def test_the_secret_from_the_environment_serves_several_graders_and_writes_no_file(tmp_path, monkeypatch):
    monkeypatch.setenv(SECRET_VARIABLE, "shared by every grading machine")
    one = kernel_environments(Config(), tmp_path, "alice", SUBMISSION)[1]["LMPOLICY_HIDDEN_INPUTS"]
    assert not (tmp_path / ".lmpolicy_course_secret").exists()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert kernel_environments(Config(), elsewhere, "alice", SUBMISSION)[1]["LMPOLICY_HIDDEN_INPUTS"] == one


def test_an_empty_secret_file_stops_grading_with_what_to_do(tmp_path):
    (tmp_path / ".lmpolicy_course_secret").write_text("\n")
    with pytest.raises(RuntimeError, match="is empty: delete it"):
        kernel_environments(Config(), tmp_path, "alice", SUBMISSION)


def test_variants_off_tells_both_kernels_and_keeps_per_student_hidden_inputs(tmp_path):
    config = Config()
    config.Variants.enabled = False
    grading, trusted = kernel_environments(config, tmp_path, "alice", SUBMISSION)
    assert grading == {"LMPOLICY_STUDENT_ID": None, "LMPOLICY_VARIANTS": "off", "JUPYTERHUB_USER": None,
                       "LMPOLICY_VARIANT_PARAMS": None}
    assert trusted["LMPOLICY_VARIANTS"] == "off" and trusted["LMPOLICY_HIDDEN_INPUTS"]


def test_without_a_student_nothing_is_told(tmp_path):
    assert kernel_environments(Config(), tmp_path, None, SUBMISSION) == ({}, {})
    assert not (tmp_path / ".lmpolicy_course_secret").exists()


def test_the_course_config_switches_variants_on(repo_root):
    from lmpolicy_grader.class_grading.course import load_config
    from lmpolicy_grader.students import Variants
    assert Variants(config=load_config(repo_root)).enabled is True
