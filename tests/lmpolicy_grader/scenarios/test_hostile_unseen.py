"""Attacks nobody had written a test for, graded together: notebook 01 for a class of hostile students beside an
honest one, in one run of the real grader (``grade_class``, one worker).

A softmax that reaches torch's own by a way the no-credit rule's names cannot see: a function picked from
``torch.overrides``' registry by a name built at run time (from ``torch`` or from the module held in a list),
TorchScript compiled from a string (``torch.jit``), the distributions of ``torch.distributions`` (each normalises
logits with a softmax), a function imported from one of its submodules, ``torch.softmax`` run from a string by a
private helper of ``dataclasses``. Each earned the softmax's 2 points (the last one 5 of 5); the no-credit rule now
follows only the parts of torch and numpy it lists (``no_credit.FOLLOWED_MODULES``), the softmax's declaration names
``distributions``, and the code rule refuses every private name, whatever it is read from. A softmax found under
a name no declaration lists, inside attention (``scaled_dot_product_attention``) or the cross-entropy loss, earned
its points too: torch's softmax operators now refuse in the submission's process while the softmax is checked
(``forbidden.SOFTMAX_OPERATORS``), whatever name reached them.

What held, kept as regressions: values equal to anything (a tensor subclass, a str and a float whose ``==`` is always
true), a verdict larger than a cell may print (it fails, and is now cut to the cell's cap), a notebook whose grader
metadata was edited (a test cell turned into an answer, an answer given points, a graded cell of its own: FAILED with
nbgrader's reason before, graded as released now: ``nbgrader_plugins.released_metadata``), a notebook that breaks its own format (FAILED: invalid notebook), two cells with one id (graded).
The no-credit rule's reading of torch and numpy is also tested without a grading, case by case.
"""
from __future__ import annotations

import json
import os

import nbformat
import pytest
from nbgrader.api import Gradebook, MissingEntry

from lmpolicy_grader.class_grading.course import load_config
from lmpolicy_grader.class_grading.grading import grade_class
from lmpolicy_grader.class_grading.status import Status
from lmpolicy_grader.isolation import sandbox
from lmpolicy_grader.trusted_tests import no_credit

from .. import tiny_course

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("hostile_unseen"),
              pytest.mark.skipif(sandbox.sandbox_problem() is not None and not os.environ.get("LMPOLICY_REQUIRE_SANDBOX"),
                                 reason=f"no sandbox here: {sandbox.sandbox_problem()}")]

NOTEBOOK = "01_policy_softmax"
SOFTMAX_CELL, SOFTMAX_TESTS, LOGPROB_TESTS = "nb01_softmax__answer", "nb01_softmax__tests", "ex11_1a__tests"
FULL = {SOFTMAX_TESTS: 2.0, LOGPROB_TESTS: 3.0}

# torch's softmax itself, found in torch.overrides' registry of every overridable function by a name made at run time
BY_NAME = '''import torch
_found = [f for group in torch.overrides.get_overridable_functions().values() for f in group
          if getattr(f, "__name__", "") == "soft" + "max"]
def softmax(logits, dim=-1):
    return _found[0](logits, dim)
'''
# torch.softmax called from TorchScript compiled out of a string
FROM_A_STRING = '''import torch
_unit = torch.jit.CompilationUnit("def f(x: torch.Tensor, d: int):\\n    return torch." + "soft" + "max(x, d)\\n")
def softmax(logits, dim=-1):
    return _unit.f(logits, dim)
'''
# a distribution made from logits holds their softmax as its probs
RELAXED = '''import torch
def softmax(logits, dim=-1):
    moved = logits.movedim(dim, -1)
    return torch.distributions.RelaxedOneHotCategorical(torch.tensor(1.0), logits=moved).probs.movedim(-1, dim)
'''
LOGITS_TO_PROBS = '''from torch.distributions.utils import logits_to_probs
def softmax(logits, dim=-1):
    return logits_to_probs(logits.movedim(dim, -1)).movedim(-1, dim)
'''
# softmax(q k^T) v with q = 1, k = the logits and v = the identity: attention's own softmax
ATTENTION = '''import torch
import torch.nn.functional as F
def softmax(logits, dim=-1):
    moved = logits.movedim(dim, -1)
    n = moved.shape[-1]
    q = torch.ones(*moved.shape[:-1], 1, 1, dtype=logits.dtype)
    v = torch.eye(n, dtype=logits.dtype).expand(*moved.shape[:-1], n, n)
    return F.scaled_dot_product_attention(q, moved.unsqueeze(-1), v, scale=1.0).squeeze(-2).movedim(-1, dim)
'''
# p_i = exp(-cross_entropy(logits, i)): the loss's own log-softmax, read off for every target i
CROSS_ENTROPY = '''import torch
import torch.nn.functional as F
def softmax(logits, dim=-1):
    moved = logits.movedim(dim, -1)
    rows = moved.reshape(-1, moved.shape[-1])
    n = rows.shape[-1]
    every = rows.repeat_interleave(n, dim=0)
    targets = torch.arange(n).repeat(rows.shape[0])
    probs = torch.exp(-F.cross_entropy(every, targets, reduction="none")).reshape(moved.shape)
    return probs.movedim(-1, dim)
'''
# the same registry, reached from the module held in a list (no attribute chain starts at a module's name)
MODULE_AS_VALUE = BY_NAME.replace("torch.overrides", "[torch][0].overrides")
# torch.softmax run from a string by a private helper of an allowed module, reached from the module held in a list:
# the old code rule refused a private name only when read from a module's own name (``dataclasses._create_fn``)
EXEC_BY_A_PRIVATE_HELPER = '''import torch
import dataclasses
_made = [dataclasses][0]._create_fn("f", ["logits", "dim=-1"], ["return torch." + "soft" + "max(logits, dim)"],
                                    globals={"torch": torch})
def softmax(logits, dim=-1):
    return _made(logits, dim)
'''
SHORTCUTS = {"by_name": (BY_NAME, "torch.overrides"), "from_a_string": (FROM_A_STRING, "torch.jit"),
             "module_as_value": (MODULE_AS_VALUE, "the module torch used as a value"),
             "relaxed": (RELAXED, "distributions"), "logits_to_probs": (LOGITS_TO_PROBS, "distributions")}


# Values that compare equal to anything: a tensor of zeros whose == is always true, a str and a float that equal every
# value. Only the safe form crosses to the tests (trusted_tests.codec: exact builtin types, a tensor's bytes).
EQUAL_TO_ANYTHING = '''import torch
class Anything(torch.Tensor):
    def __eq__(self, other):
        return True
class AnyText(str):
    def __eq__(self, other):
        return True
    def __hash__(self):
        return 0
class AnyNumber(float):
    def __eq__(self, other):
        return True
    def __hash__(self):
        return 0
def softmax(logits, dim=-1):
    return torch.zeros_like(logits).as_subclass(Anything)
'''
EQUAL_NUMBERS = '''prob_86 = AnyNumber(0.5)
logprob_86 = AnyNumber(-0.7)
main_contributor = AnyText("6")
'''


# A wrong main_contributor so long that the verdict quoting it is larger than a cell may print. A test cell without an
# error output scores its points, so the error must outlive the output cap; nbgrader's Execute added it back whole
# from the kernel's reply (300 kB here, up to a message's size), past the cap the autograded notebook and the
# feedback keep
HUGE_VERDICT = '''logprob_86 = sequence_logprob(token_probs_86).item()
prob_86 = math.exp(logprob_86)
main_contributor = "6" * 300_000
'''


def _index(nb: dict, grade_id: str) -> int:
    return next(i for i, c in enumerate(nb["cells"]) if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)


def _copy(nb: dict) -> dict:
    return json.loads(json.dumps(nb))


def _with_softmax(reference: dict, source: str) -> dict:
    nb = _copy(reference)
    nb["cells"][_index(nb, SOFTMAX_CELL)]["source"] = source
    return nb


def _with_numbers(nb: dict, source: str) -> dict:
    nb = _copy(nb)
    nb["cells"][_index(nb, "ex11_1a__numbers")]["source"] = source
    return nb


def _with_metadata(nb: dict, grade_id: str, **changes) -> dict:
    nb = _copy(nb)
    nb["cells"][_index(nb, grade_id)]["metadata"]["nbgrader"].update(changes)
    return nb


def _with_a_graded_cell_of_its_own(reference: dict) -> dict:
    nb = _copy(reference)
    nb["cells"].append({"cell_type": "code", "execution_count": None, "id": "bonus", "outputs": [], "source": "pass",
                        "metadata": {"nbgrader": {"grade": True, "solution": False, "locked": False, "grade_id": "bonus",
                                                  "points": 10, "schema_version": 3, "task": False}}})
    return nb


def _with_a_duplicate_cell_id(reference: dict) -> dict:
    nb = _copy(reference)
    nb["cells"][_index(nb, SOFTMAX_CELL)]["id"] = nb["cells"][_index(nb, SOFTMAX_TESTS)]["id"]
    return nb


def _submissions(reference: dict) -> dict[str, dict]:
    blank = _with_softmax(reference, "def softmax(logits, dim=-1):\n    return None\n")
    return {
        "honest": reference,
        **{student: _with_softmax(reference, source) for student, (source, _) in SHORTCUTS.items()},
        "attention": _with_softmax(reference, ATTENTION),
        "cross_entropy": _with_softmax(reference, CROSS_ENTROPY),
        "exec_by_a_private_helper": _with_softmax(reference, EXEC_BY_A_PRIVATE_HELPER),
        "huge_verdict": _with_numbers(reference, HUGE_VERDICT),
        "equal_to_anything": _with_numbers(_with_softmax(reference, EQUAL_TO_ANYTHING), EQUAL_NUMBERS),
        # the checksum nbgrader keeps of a locked cell covers its flags: a test made an answer (run in its own
        # kernel, where it could be rewritten) is refused
        "test_as_answer": _with_metadata(blank, SOFTMAX_TESTS, solution=True),
        "points_on_its_answer": _with_metadata(reference, SOFTMAX_CELL, grade=True, points=10),
        "graded_cell_of_its_own": _with_a_graded_cell_of_its_own(reference),
        "duplicate_cell_id": _with_a_duplicate_cell_id(reference),
        "old_nbformat_minor": {**_copy(reference), "nbformat_minor": 4},  # cell ids, which format 4.4 does not have
    }


def _scores(config, student) -> dict[str, float]:
    """The student's scores in the gradebook (none for a notebook that never reached it)."""
    with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id) as gradebook:
        try:
            grades = gradebook.find_submission_notebook(NOTEBOOK, "ch11", student).grades
        except MissingEntry:
            return {}
        return {g.name: g.score for g in grades if g.cell_type == "code"}


def _verdicts(root, student) -> dict[str, str]:
    """Each test cell's error, as the instructor's autograded notebook holds it."""
    nb = nbformat.read(root / "autograded" / student / "ch11" / f"{NOTEBOOK}.ipynb", as_version=4)
    return {grade_id: " ".join(o.get("evalue", "") for o in nb.cells[tiny_course.cell_index(nb, grade_id)].outputs
                               if o.output_type == "error") for grade_id in FULL}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile-unseen")
    reference = json.loads(tiny_course.one_notebook_course(root, NOTEBOOK).read_text())
    for student, nb in _submissions(reference).items():
        folder = root / "submitted" / student / "ch11"
        folder.mkdir(parents=True)
        (folder / f"{NOTEBOOK}.ipynb").write_text(json.dumps(nb))
    outcomes = {o.student: o for o in grade_class(root, workers=1, log=lambda _: None)}
    config = load_config(root)
    scores = {student: _scores(config, student) for student in outcomes}
    verdicts = {student: _verdicts(root, student) for student, o in outcomes.items() if o.status == Status.GRADED}
    return outcomes, scores, verdicts


def test_the_honest_student_keeps_every_point(graded):
    outcomes, scores, _ = graded
    assert outcomes["honest"].status == Status.GRADED
    assert {k: scores["honest"][k] for k in FULL} == FULL


@pytest.mark.parametrize("student", sorted(SHORTCUTS))
def test_torchs_softmax_reached_where_the_rule_reads_no_name_earns_nothing(graded, student):
    """Old grader: 2 of 2 for each. The softmax gets 0 with the part of torch it reached; 11.1(a) keeps its 3."""
    outcomes, scores, verdicts = graded
    assert outcomes[student].status == Status.GRADED, outcomes[student].reason
    assert {k: scores[student][k] for k in FULL} == {SOFTMAX_TESTS: 0.0, LOGPROB_TESTS: 3.0}
    verdict = verdicts[student][SOFTMAX_TESTS]
    assert "gets no credit" in verdict and SHORTCUTS[student][1] in verdict, verdict
    assert verdicts[student][LOGPROB_TESTS] == ""


def test_a_private_name_read_from_any_object_costs_every_test_below_it(graded):
    """Old grader: 5 of 5 (the softmax was torch's). The code rule refuses ``._create_fn`` in the answer cell, so both
    tests below it get 0, each with the cell, the line and the construct."""
    outcomes, scores, verdicts = graded
    assert outcomes["exec_by_a_private_helper"].status == Status.GRADED, outcomes["exec_by_a_private_helper"].reason
    assert {k: scores["exec_by_a_private_helper"][k] for k in FULL} == {SOFTMAX_TESTS: 0.0, LOGPROB_TESTS: 0.0}
    for verdict in verdicts["exec_by_a_private_helper"].values():
        assert "cell 10" in verdict and "line 3" in verdict and "._create_fn, a private name" in verdict, verdict


def test_a_verdict_larger_than_a_cell_may_print_still_fails_its_test(graded):
    """The test fails (it did before), and its verdict is cut to the cell's cap (before: all 300 kB of it)."""
    outcomes, scores, verdicts = graded
    assert outcomes["huge_verdict"].status == Status.GRADED, outcomes["huge_verdict"].reason
    assert {k: scores["huge_verdict"][k] for k in FULL} == {SOFTMAX_TESTS: 2.0, LOGPROB_TESTS: 0.0}
    verdict = verdicts["huge_verdict"][LOGPROB_TESTS]
    assert verdict.startswith("main_contributor is '666") and verdict.endswith("(cut by the grader)"), verdict[:200]
    assert len(verdict) < 100_000


def test_values_equal_to_anything_earn_nothing(graded):
    outcomes, scores, verdicts = graded
    assert outcomes["equal_to_anything"].status == Status.GRADED, outcomes["equal_to_anything"].reason
    assert {k: scores["equal_to_anything"][k] for k in FULL} == {SOFTMAX_TESTS: 0.0, LOGPROB_TESTS: 0.0}
    assert "is off" in verdicts["equal_to_anything"][SOFTMAX_TESTS], verdicts["equal_to_anything"]
    assert "prob_86" in verdicts["equal_to_anything"][LOGPROB_TESTS], verdicts["equal_to_anything"]


@pytest.mark.parametrize("student", ["attention", "cross_entropy"])
def test_a_softmax_torch_computes_under_another_name_earns_nothing(graded, student):
    """Old grader: 2 of 2 for each (no name of theirs is a softmax's). Their code runs torch's softmax operator
    (aten::_safe_softmax, aten::_log_softmax), which refuses while the softmax is checked."""
    outcomes, scores, verdicts = graded
    assert outcomes[student].status == Status.GRADED, outcomes[student].reason
    assert {k: scores[student][k] for k in FULL} == {SOFTMAX_TESTS: 0.0, LOGPROB_TESTS: 3.0}
    assert "one of torch's that computes a softmax" in verdicts[student][SOFTMAX_TESTS], verdicts[student]


@pytest.mark.parametrize("student, expected", [
    ("test_as_answer", {SOFTMAX_TESTS: 0.0, LOGPROB_TESTS: 3.0}),  # its softmax is blank: the test ran, as a test
    ("points_on_its_answer", FULL),
    ("graded_cell_of_its_own", FULL),
])
def test_edited_grader_metadata_is_graded_as_released(graded, student, expected):
    """Old grader: FAILED, with nbgrader's "Inconsistent checksums for cell nb01_softmax__tests", "No such grade cell:
    ch11/01_policy_softmax/nb01_softmax__answer", "Notebook failed to validate". Now graded as the course released
    it: the same points as without the edit, no point more."""
    outcomes, scores, _ = graded
    assert outcomes[student].status == Status.GRADED, outcomes[student].reason
    assert scores[student] == expected  # the code cells' grades: the two tests, no grade of its own


def test_a_notebook_that_breaks_its_own_format_fails_with_the_reason(graded):
    """Format 4.4 declared, cell ids kept: not a valid notebook, FAILED with nbformat's words (never a silent 0)."""
    outcomes, scores, _ = graded
    assert outcomes["old_nbformat_minor"].status == Status.FAILED
    assert outcomes["old_nbformat_minor"].reason.startswith("invalid notebook: NotebookValidationError")
    assert "'id' was unexpected" in outcomes["old_nbformat_minor"].reason
    assert scores["old_nbformat_minor"] == {}


def test_a_duplicate_cell_id_is_graded_as_handed_in(graded):
    outcomes, scores, _ = graded
    assert outcomes["duplicate_cell_id"].status == Status.GRADED, outcomes["duplicate_cell_id"].reason
    assert {k: scores["duplicate_cell_id"][k] for k in FULL} == FULL


# How the no-credit rule reads a tested function's way into torch and numpy, without a grading (the names blocked: the
# softmax's leaf only, so that only the list of followed modules decides)
IMPORTS = "import numpy as np\nimport torch\nimport torch.nn.functional as F\n"
REFUSED_WAYS = {
    "a module reached as an attribute of another": ("_t = F.torch\n", "_t.exp(logits)", "the module torch used as a value"),
    "a module held in a list": ("", "[torch][0].exp(logits)", "the module torch used as a value"),
    "a part of torch by getattr": ("", 'getattr(torch, "fx").symbolic_trace', "torch.fx"),
    "an import from a part of torch": ("from torch.overrides import get_overridable_functions\n",
                                       "get_overridable_functions()", "torch.overrides"),
    "an import of a part of torch": ("import torch.jit\n", "torch.jit.script(logits)", "torch.jit"),
    "torch's operator registry": ("", "torch.ops.aten.exp(logits)", "torch.ops"),
    "a part of numpy": ("", "np.ctypeslib.as_array(logits)", "numpy.ctypeslib"),
}
FOLLOWED_WAYS = {
    "torch.nn.functional": "F.relu(logits)", "torch.linalg": "torch.linalg.norm(logits)",
    "numpy.random": "np.random.default_rng(0).normal()", "torch.autograd": "torch.autograd.grad(logits, logits)",
    "numpy.lib.stride_tricks": "np.lib.stride_tricks.sliding_window_view(logits, 2)",
    "a distribution (refused for a softmax by its declared pattern only)": "torch.distributions.Normal(0, 1)",
}


def _softmax_using(made: str, expression: str) -> list[str]:
    return [IMPORTS, f"{made}def softmax(logits, dim=-1):\n    return {expression}\n"]


@pytest.mark.parametrize("way", sorted(REFUSED_WAYS))
def test_the_rule_refuses_a_part_of_torch_or_numpy_it_does_not_follow(way):
    made, expression, said = REFUSED_WAYS[way]
    reason = no_credit.library_shortcut(_softmax_using(made, expression), "softmax", {"softmax"})
    assert reason is not None and said in reason and "gets no credit" in reason, reason


@pytest.mark.parametrize("way", sorted(FOLLOWED_WAYS))
def test_the_rule_follows_torchs_and_numpys_arithmetic(way):
    assert no_credit.library_shortcut(_softmax_using("", FOLLOWED_WAYS[way]), "softmax", {"softmax"}) is None

