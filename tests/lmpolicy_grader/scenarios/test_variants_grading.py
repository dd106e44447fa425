"""Every student their own numbers, graded: notebook 05's varying exercises on the real ch11 notebook.

Alice hands in her own answers as literal numbers; Bob hands in the very same numbers; Carol the chapter's.
The grader takes each student from the folder (submitted/<student>/), so only Alice's numbers are right
for their owner. With variants switched off in the course's config the chapter's numbers are right for
everyone. A re-grade gives the same scores. (That the hidden tests' random inputs differ per student:
tests/lmpolicy_grader/scenarios/test_tiny_course.py, the student replays_recorded_inputs.)
"""
from __future__ import annotations

import shutil

import nbformat
import pytest
from nbgrader.api import Gradebook

from lmpolicy.per_student import variants
from lmpolicy_grader.__main__ import release
from lmpolicy_grader.class_grading.course import load_config
from lmpolicy_grader.class_grading.grading import grade_class
from lmpolicy_grader.class_grading.status import Status

from .. import tiny_course

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("variants_class")]

NOTEBOOK = "05_tilted_optimum"
VARYING = [key for key in ("ex11_5b", "ex11_8b", "ex11_9a", "ex11_9c") if key in variants.VARYING]


def _literal_answers(source: nbformat.NotebookNode, owner: str | None) -> nbformat.NotebookNode:
    """The reference notebook with each varying exercise's answer cell holding ``owner``'s answers as numbers."""
    notebook = nbformat.from_dict(source)
    for key in VARYING:
        lines = [f"{name} = {value!r}" for name, value in variants.answer(key, owner).items()]
        tiny_course.replace_answer(notebook, f"{key}__answer", "\n".join(lines))
    return notebook


def _course(root, repo_root, variants_on: bool, submissions: dict):
    (root / "source" / "ch11").mkdir(parents=True)
    shutil.copy(repo_root / "source" / "ch11" / f"{NOTEBOOK}.ipynb", root / "source" / "ch11")
    config = (repo_root / "nbgrader_config.py").read_text()
    if not variants_on:
        config += "\nc.Variants.enabled = False\n"
    (root / "nbgrader_config.py").write_text(config)
    release(root)
    source = nbformat.read(root / "source" / "ch11" / f"{NOTEBOOK}.ipynb", as_version=4)
    for student, owner in submissions.items():
        folder = root / "submitted" / student / "ch11"
        folder.mkdir(parents=True)
        nbformat.write(_literal_answers(source, owner), folder / f"{NOTEBOOK}.ipynb")
    outcomes = grade_class(root, workers=2, log=lambda _: None)
    assert all(o.status == Status.GRADED for o in outcomes), outcomes
    return root


def _scores(root, student, out_of: bool = False) -> dict[str, float]:
    """{exercise key: autograded points} of ``student``'s notebook (``out_of``: the most it could earn), from the
    gradebook."""
    config = load_config(root)
    scores: dict[str, float] = {}
    with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id) as gradebook:
        for grade in gradebook.find_submission_notebook(NOTEBOOK, "ch11", student).grades:
            if grade.cell_type == "code":
                key = grade.name.split("__")[0]
                scores[key] = scores.get(key, 0.0) + ((grade.max_score if out_of else grade.score) or 0.0)
    return scores


def _printed(root, student, key) -> str:
    graded = nbformat.read(root / "autograded" / student / "ch11" / f"{NOTEBOOK}.ipynb", as_version=4)
    cell = graded.cells[tiny_course.cell_index(graded, f"{key}__tests")]
    return "\n".join(str(out.get("evalue", "")) + str(out.get("text", "")) for out in cell.outputs)


@pytest.fixture(scope="module")
def variants_class(tmp_path_factory, repo_root):
    return _course(tmp_path_factory.mktemp("variants-on"), repo_root, True,
                   {"alice": "alice", "bob": "alice", "carol": None})


def test_a_students_own_numbers_earn_every_point_of_each_varying_exercise(variants_class):
    alice, most = _scores(variants_class, "alice"), _scores(variants_class, "alice", out_of=True)
    assert VARYING and all(most[key] > 0 for key in VARYING), most
    assert {key: alice[key] for key in VARYING} == {key: most[key] for key in VARYING}


def test_the_same_numbers_handed_in_by_another_student_earn_nothing(variants_class):
    bob, alice = _scores(variants_class, "bob"), _scores(variants_class, "alice")
    assert {key: bob[key] for key in VARYING} == {key: 0.0 for key in VARYING}
    assert {key: bob[key] for key in bob if key not in VARYING} == {key: alice[key] for key in alice if key not in VARYING}
    for key in VARYING:  # the check says what is wrong with his numbers, and never shows the right ones
        printed = _printed(variants_class, "bob", key)
        assert printed.strip(), key
        own = [value for value in variants.answer(key, "bob").values() if isinstance(value, float)]
        assert not any(f"{value:.5g}" in printed for value in own), (key, printed)


def test_the_chapters_numbers_earn_nothing_for_a_student_with_a_variant_and_the_feedback_says_why(variants_class):
    carol = _scores(variants_class, "carol")
    assert {key: carol[key] for key in VARYING} == {key: 0.0 for key in VARYING}
    for key in VARYING:
        assert "this is the chapter's value; your model's is different" in _printed(variants_class, "carol", key)


def test_formgrader_and_the_feedback_show_each_students_own_parameters_from_the_grader(variants_class):
    """The parameters cells are written by the grader for the folder's student (the feedback hides what the
    student's kernel printed after the first test; a TA in formgrader reads the autograded notebook)."""
    import html
    import re
    for student in ("bob", "carol"):
        graded = nbformat.read(variants_class / "autograded" / student / "ch11" / f"{NOTEBOOK}.ipynb", as_version=4)
        page = (variants_class / "feedback" / student / "ch11" / f"{NOTEBOOK}.html").read_text()
        page_text = html.unescape(re.sub(r"<[^>]+>", "", page))
        for key in VARYING:
            shown = graded.cells[tiny_course.cell_index(graded, f"{key}__parameters")].outputs
            assert [out["data"]["text/plain"] for out in shown] == [variants.describe(key, student)]
            assert f"student id {student}" in page_text and "Your own model" in page_text


def test_a_regrade_gives_the_same_scores(variants_class):
    before = {student: _scores(variants_class, student) for student in ("alice", "bob", "carol")}
    grade_class(variants_class, workers=2, log=lambda _: None, students=["alice"])
    assert _scores(variants_class, "alice") == before["alice"]


def test_with_variants_off_the_chapters_numbers_earn_every_point(tmp_path, repo_root):
    root = _course(tmp_path / "variants-off", repo_root, False, {"dave": None})
    dave, most = _scores(root, "dave"), _scores(root, "dave", out_of=True)
    assert {key: dave[key] for key in VARYING} == {key: most[key] for key in VARYING}
