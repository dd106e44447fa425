"""Whose notebook a kernel grades (lmpolicy_grader.students): the variables each kernel is told, the course secret."""
from __future__ import annotations

import json
import stat
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from traitlets.config import Config

from lmpolicy_grader.students import SECRET_VARIABLE, course_secret, kernel_environments


@pytest.fixture(autouse=True)
def _no_secret_from_outside(monkeypatch):
    monkeypatch.delenv(SECRET_VARIABLE, raising=False)


def test_each_kernel_is_told_the_student_and_only_the_trusted_one_the_hidden_inputs(tmp_path):
    grading, trusted = kernel_environments(Config(), tmp_path, "alice")
    params = grading.pop("LMPOLICY_VARIANT_PARAMS")
    assert grading == {"LMPOLICY_STUDENT_ID": "alice", "LMPOLICY_VARIANTS": None, "JUPYTERHUB_USER": None}
    hidden = trusted.pop("LMPOLICY_HIDDEN_INPUTS")
    assert trusted.pop("LMPOLICY_VARIANT_PARAMS") is None  # the trusted kernel draws them itself
    assert trusted == grading and len(hidden) == 32 and int(hidden, 16) >= 0
    assert json.loads(params)["student"] == "alice"


def test_the_grading_kernel_takes_the_students_parameters_and_computes_the_same_variant(tmp_path, monkeypatch):
    """The grading kernel's library cannot draw a variant (its solvers are not there while grading): the
    parameters the grader hands it are exactly the ones a student's own kernel draws."""
    from lmpolicy import variants

    handed = kernel_environments(Config(), tmp_path, "alice")[0]["LMPOLICY_VARIANT_PARAMS"]
    drawn = {key: variants.answers(key, "alice") for key in variants.VARYING}
    variants._params.cache_clear()
    monkeypatch.setenv("LMPOLICY_VARIANT_PARAMS", handed)
    monkeypatch.setattr(variants, "_drawn", lambda *args: pytest.fail("drew the variant though it was handed"))
    try:
        assert {key: variants.answers(key, "alice") for key in variants.VARYING} == drawn
    finally:
        variants._params.cache_clear()


def test_hidden_inputs_are_the_same_at_every_grading_and_differ_between_students_and_courses(tmp_path):
    alice = kernel_environments(Config(), tmp_path, "alice")[1]["LMPOLICY_HIDDEN_INPUTS"]
    assert kernel_environments(Config(), tmp_path, "alice")[1]["LMPOLICY_HIDDEN_INPUTS"] == alice
    assert kernel_environments(Config(), tmp_path, "bob")[1]["LMPOLICY_HIDDEN_INPUTS"] != alice
    other_course = tmp_path / "other"
    other_course.mkdir()
    assert kernel_environments(Config(), other_course, "alice")[1]["LMPOLICY_HIDDEN_INPUTS"] != alice


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
    one = kernel_environments(Config(), tmp_path, "alice")[1]["LMPOLICY_HIDDEN_INPUTS"]
    assert not (tmp_path / ".lmpolicy_course_secret").exists()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert kernel_environments(Config(), elsewhere, "alice")[1]["LMPOLICY_HIDDEN_INPUTS"] == one


def test_an_empty_secret_file_stops_grading_with_what_to_do(tmp_path):
    (tmp_path / ".lmpolicy_course_secret").write_text("\n")
    with pytest.raises(RuntimeError, match="is empty: delete it"):
        kernel_environments(Config(), tmp_path, "alice")


def test_variants_off_tells_both_kernels_and_keeps_per_student_hidden_inputs(tmp_path):
    config = Config()
    config.Variants.enabled = False
    grading, trusted = kernel_environments(config, tmp_path, "alice")
    assert grading == {"LMPOLICY_STUDENT_ID": None, "LMPOLICY_VARIANTS": "off", "JUPYTERHUB_USER": None,
                       "LMPOLICY_VARIANT_PARAMS": None}
    assert trusted["LMPOLICY_VARIANTS"] == "off" and trusted["LMPOLICY_HIDDEN_INPUTS"]


def test_without_a_student_nothing_is_told(tmp_path):
    assert kernel_environments(Config(), tmp_path, None) == ({}, {})
    assert not (tmp_path / ".lmpolicy_course_secret").exists()


def test_the_course_config_switches_variants_on(repo_root):
    from lmpolicy_grader.class_grading.course import load_config
    from lmpolicy_grader.students import Variants
    assert Variants(config=load_config(repo_root)).enabled is True
