"""Issue 34, door 2, graded with the real grader in the sandbox: notebook 01's softmax written with a private
torch name of softmax, or through a library module its grading kernel does not hold (the sampler, the answer
key), earns 0 on the softmax, with a reason; the reference keeps every point.

Each cheat is the reference with its softmax replaced, so 11.1(a), tested below it, shows what the cheat costs
beyond its own exercise (the code rule, door 3, may refuse a construct it uses on every exercise below)."""
from __future__ import annotations

import shutil

import nbformat
import pytest
from nbgrader.api import Gradebook

from lmpolicy_grader.__main__ import release
from lmpolicy_grader.class_grading.course import load_config
from lmpolicy_grader.class_grading.grading import grade_class
from lmpolicy_grader.class_grading.status import Status
from lmpolicy_grader.isolation import sandbox

from .. import tiny_course

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("library_oracles_graded"),
              pytest.mark.skipif(sandbox.sandbox_problem() is not None, reason="no sandbox here")]

NOTEBOOK, SOFTMAX_CELL, SOFTMAX_TESTS = "01_policy_softmax", "nb01_softmax__answer", "nb01_softmax__tests"
CHEATS = {
    "private_softmax": "import torch\ndef softmax(logits, dim=-1):\n    return torch._softmax(logits, dim, False)\n",
    "aten_softmax": "import torch\ndef softmax(logits, dim=-1):\n    return torch.ops.aten._softmax(logits, dim, False)\n",
    "sampler_on_the_way": ("import torch\nfrom lmpolicy.tinylm import generate as _g\n"
                           "def softmax(logits, dim=-1):\n    return _g.sample_next_token(logits, 1.0)\n"),
    "answer_key": ("import torch\nfrom lmpolicy.per_student import variant_answers as _key\n"
                   "def softmax(logits, dim=-1):\n    return torch.softmax(logits, dim)\n"),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory, repo_root):
    root = tmp_path_factory.mktemp("library-oracles")
    (root / "source" / "ch11").mkdir(parents=True)
    shutil.copy(repo_root / "source" / "ch11" / f"{NOTEBOOK}.ipynb", root / "source" / "ch11")
    shutil.copy(repo_root / "nbgrader_config.py", root / "nbgrader_config.py")
    release(root)
    reference = nbformat.read(root / "source" / "ch11" / f"{NOTEBOOK}.ipynb", as_version=4)
    submissions = {"reference": reference}
    for name, answer in CHEATS.items():
        submissions[name] = tiny_course.replace_answer(nbformat.from_dict(reference), SOFTMAX_CELL, answer)
    for student, nb in submissions.items():
        tiny_course.submit(root, student, nb, notebook=NOTEBOOK)
    outcomes = grade_class(root, workers=2, log=lambda _: None)
    return root, {o.student: o for o in outcomes}


def _answer_error(root, student):
    nb = nbformat.read(root / "autograded" / student / "ch11" / f"{NOTEBOOK}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == SOFTMAX_CELL)
    return "\n".join(f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error")


def _score_and_error(root, student):
    config = load_config(root)
    with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id) as gradebook:
        grades = gradebook.find_submission_notebook(NOTEBOOK, "ch11", student).grades
        score = {g.name: g.score for g in grades if g.cell_type == "code"}[SOFTMAX_TESTS]
    nb = nbformat.read(root / "autograded" / student / "ch11" / f"{NOTEBOOK}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == SOFTMAX_TESTS)
    return score, "\n".join(f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error")


def test_the_reference_keeps_its_softmax_points(graded):
    root, outcomes = graded
    assert outcomes["reference"].status == Status.GRADED
    assert _score_and_error(root, "reference") == (2.0, "")


@pytest.mark.parametrize("cheat", sorted(CHEATS))
def test_a_softmax_from_a_private_name_or_an_absent_module_earns_nothing_with_a_reason(graded, cheat):
    root, outcomes = graded
    score, error = _score_and_error(root, cheat)
    assert score == 0.0, (cheat, outcomes[cheat].status, outcomes[cheat].reason)
    assert error or outcomes[cheat].reason, cheat
    print(cheat, "->", (error or outcomes[cheat].reason).splitlines()[-1][:300])


@pytest.mark.parametrize("cheat,module", [("sampler_on_the_way", "lmpolicy.tinylm.generate"),
                                          ("answer_key", "lmpolicy.per_student.variant_answers")])
def test_an_import_of_a_module_the_view_lacks_says_why_in_the_answer_cell(graded, cheat, module):
    root, _ = graded
    error = _answer_error(root, cheat)
    assert error.startswith(f"ImportError: {module} is not available while grading: "), error
