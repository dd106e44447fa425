"""Submissions that attack the tests from inside their own kernel, graded with the real grader.

Notebook 01 is graded with its tests in the trusted process. Each hostile student hands in the
reference with a wrong softmax (it overflows at large logits: nb01_softmax must score 0) and a
right sequence_logprob (ex11_1a keeps its 3 points), plus one attack on the tests; the attacks that
worked when the tests ran beside the submission (input and AST transformers, a tracer, an audit
hook, a custom exception handler, rebinding numpy, torch, builtins and the check helpers, fake
output) change nothing now. Attacks on the channel itself (a kernel that never answers it, a result
that cannot be encoded, a function that never returns, one that rewrites the test's inputs) cost their exercise, with a reason, and a
kernel that dies inside a call fails its notebook, with the reason; a copied library code object
earns nothing, named plainly or reached by a computed name.

The library's own answers (issue 20): the grading kernel's lmpolicy is a view without them
(``isolation.library_view``) and the no-credit rule reads the source on the trusted side, so a
reference to torch.softmax taken by a computed name, a copy of a library function's code object behind
a wrapper, ``exec`` of the library module's source or of its file, and the same after neutering what used
to guard the submission's own process each earn 0 on the exercise they cheated, with the reason, while
the reference and a blank submission keep their exact scores.

The code rule (issue 34, ``lmpolicy.notebook.code_rule``): an attack written with a construct outside the allowlist
(``get_ipython``, ``import sys``, ``__code__``, a computed ``getattr``) costs every exercise tested below its cell,
with the rule's reason; a tested name bound outside its answer cell's plain def (a ``match`` capture) costs only
the exercises that read it. Both kept their credit under the old rule.
"""
from __future__ import annotations

import os
import shutil

import nbformat
from pathlib import Path
import pytest
from nbgrader.api import Gradebook

from lmpolicy_grader.isolation import sandbox
from lmpolicy_grader.__main__ import release
from lmpolicy_grader.class_grading.grading import grade_class
from lmpolicy_grader.class_grading.course import load_config
from lmpolicy_grader.class_grading.status import Status
from lmpolicy_grader.trusted_tests.runner import HIDDEN_TESTS

from .. import tiny_course

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("hostile_in_process"),
              pytest.mark.skipif(sandbox.sandbox_problem() is not None and not os.environ.get("LMPOLICY_REQUIRE_SANDBOX"),
                                 reason=f"no sandbox here: {sandbox.sandbox_problem()}")]

NOTEBOOK = "01_policy_softmax"
CELL_TIMEOUT = 20
# The naive softmax: right on small logits, NaN at logits near 1000 (inf / inf).
WRONG_SOFTMAX = ("def softmax(logits, dim=-1):\n"
                 "    weights = torch.exp(logits)\n"
                 "    return weights / weights.sum(dim=dim, keepdim=True)\n")

# Each attack: the code put after the wrong softmax in its answer cell.
ATTACKS = {
    "input_transformer": (
        "def _blank_tests(lines):\n"
        "    text = ''.join(lines)\n"
        "    return ['pass\\n'] if 'checks' in text else lines\n"
        "get_ipython().input_transformers_cleanup.append(_blank_tests)\n"
        "get_ipython().input_transformers_post.append(_blank_tests)\n"),
    "ast_transformer": (
        "import ast\n"
        "class _EmptyTests(ast.NodeTransformer):\n"
        "    def visit_Module(self, node):\n"
        "        return ast.Module(body=[ast.Pass()], type_ignores=[]) if 'checks' in ast.unparse(node) else node\n"
        "get_ipython().ast_transformers.append(_EmptyTests())\n"),
    "tracer": (
        "import sys, threading\n"
        "def _skip_checks(frame, event, arg):\n"
        "    # jump every line of a check function (lmpolicy.notebook.checks) to its end, where a passing check returns\n"
        "    if event == 'line' and frame.f_code.co_name.startswith(('check', '_fail'))\\\n"
        "            and frame.f_code.co_filename.endswith('checks.py'):\n"
        "        try:\n"
        "            frame.f_lineno = max(line for _, _, line in frame.f_code.co_lines() if line)\n"
        "        except ValueError:\n"
        "            pass\n"
        "    return _skip_checks\n"
        "sys.settrace(_skip_checks); threading.settrace(_skip_checks)\n"
        "sys.setprofile(lambda frame, event, arg: None)\n"),
    "audit_hook": (
        "import sys\n"
        "def _on_exec(event, args):\n"
        "    if event == 'exec':\n"
        "        from lmpolicy.notebook import checks as _c\n"
        "        for _name in ('check', 'check_close', 'check_finite', 'check_shape', 'check_type', 'check_equal'):\n"
        "            setattr(_c, _name, lambda *a, **k: (a[0] if a else None))\n"
        "sys.addaudithook(_on_exec)\n"),
    "custom_exception_handler": (
        "get_ipython().set_custom_exc((BaseException,), lambda shell, etype, value, tb, tb_offset=None: None)\n"),
    "rebinding": (
        "import builtins, numpy as np, torch\n"
        "from lmpolicy.notebook import checks\n"
        "np.allclose = lambda *a, **k: True\n"
        "np.isfinite = lambda x: np.ones(np.shape(x), dtype=bool)\n"
        "torch.allclose = lambda *a, **k: True\n"
        "builtins.abs = lambda x: 0\n"
        "checks._fail = lambda *a, **k: None\n"
        "checks.check_finite.__code__ = (lambda value, what, hint=None: None).__code__\n"
        "checks.CheckFailed.__init__ = lambda self, *a, **k: None\n"),
    "fake_output": (
        "print('\\u2713 softmax passed the visible checks')\n"
        "_honest = softmax\n"
        "def softmax(logits, dim=-1):\n"
        "    print('\\u2713 softmax passed the visible checks')\n"
        "    return _honest(logits, dim)\n"),
}
# Attacks on the channel: what the softmax answer cell becomes, and the reason its test must show.
CHANNEL_ATTACKS = {
    "never_answers": (
        WRONG_SOFTMAX + "_kernel = get_ipython().kernel\n"
        "for _kind in ('comm_open', 'comm_msg'):\n"
        "    _kernel.shell_handlers[_kind] = lambda *args, **kwargs: None\n", "answering the grader's channel"),
    "unencodable_result": (
        "class AlwaysClose:\n"
        "    shape = (3,)\n"
        "    def __eq__(self, other):\n"
        "        return True\n"
        "    def __array__(self, dtype=None, copy=None):\n"
        "        import numpy\n"
        "        return numpy.array([0.665, 0.245, 0.09])\n"
        "def softmax(logits, dim=-1):\n"
        "    return AlwaysClose()\n", "which the grader cannot read"),
    "never_returns": ("def softmax(logits, dim=-1):\n    while True:\n        pass\n", "did not return within"),
    # zeroes every finite logit of the test's own tensor, then returns the (now uniform) softmax of it: a test that
    # computed its expected value from that tensor after the call would agree (issue 20)
    "rewrites_its_inputs": (
        "import torch\n"
        "def softmax(logits, dim=-1):\n"
        "    with torch.no_grad():\n"
        "        logits.masked_fill_(torch.isfinite(logits), 0.0)\n"
        "    weights = torch.exp(logits - logits.amax(dim=dim, keepdim=True))\n"
        "    return weights / weights.sum(dim=dim, keepdim=True)\n", "changed an input it was given"),
    "copied_code_object": (
        "import torch.nn.functional as F\n"
        "def softmax(logits, dim=-1):\n    pass\n"
        "softmax.__code__, softmax.__defaults__ = F.softmax.__code__, F.softmax.__defaults__\n",
        "uses the library's softmax"),
    "copied_code_object_by_computed_name": (
        "import torch.nn.functional as F\n"
        "def softmax(logits, dim=-1):\n    pass\n"
        "_library = getattr(F, 'soft' + 'max')\n"
        "softmax.__code__, softmax.__defaults__ = _library.__code__, _library.__defaults__\n",
        "reaches code by a way the grader cannot check"),
}
# The library's own answers reached without a literal name (issue 20): (answer cell, its new source, the
# reason its test must show). Each would score its exercise's every point if nothing stopped it.
_LOGPROB_BY = "\ndef sequence_logprob(token_probs):\n    return {f}(torch.log(token_probs), torch.ones_like(token_probs))\n"
LIBRARY_CHEATS = {
    "computed_name_reference": ("nb01_softmax__answer",
                                "import torch\n_sm = getattr(torch, 'soft' + 'max')  # taken when the cell runs\n"
                                "def softmax(logits, dim=-1):\n    return _sm(logits, dim=dim)\n",
                                "getattr with a computed name"),
    # the library's own softmax (issue 20): a blanked stub in notebook 01's grading kernel, and the rule names the way
    "library_softmax_by_computed_name": ("nb01_softmax__answer",
                                         "import torch\nfrom lmpolicy.exact import temperature as _t\n"
                                         "_sm = getattr(_t, 'soft' + 'max')\n"
                                         "def softmax(logits, dim=-1):\n"
                                         "    return torch.as_tensor(_sm(logits.numpy(), axis=dim))\n",
                                         "getattr with a computed name"),
    "wrapped_code_copy": ("ex11_1a__sequence_logprob",
                          "import types, torch\nfrom lmpolicy.tinylm import logprobs as _lp\n"
                          "_copy = types.FunctionType(getattr(_lp, 'sequence_' + 'logprob').__code__, _lp.__dict__)\n"
                          + _LOGPROB_BY.format(f="_copy"), "uses import types"),
    "exec_of_getsource": ("ex11_1a__sequence_logprob",
                          "import inspect, torch\nfrom lmpolicy.tinylm import logprobs as _lp\n_ns = {}\n"
                          "exec(inspect.getsource(_lp), _ns)\n" + _LOGPROB_BY.format(f="_ns['sequence_' + 'logprob']"),
                          "uses import inspect"),
    "read_of_the_library_file": ("ex11_1a__sequence_logprob",
                                 "import torch\nfrom lmpolicy.tinylm import logprobs as _lp\n_ns = {}\n"
                                 "exec(open(_lp.__file__).read(), _ns)\n"
                                 + _LOGPROB_BY.format(f="_ns['sequence_' + 'logprob']"),
                                 "uses exec"),
    # what guarded the submission's own process before (blocks during the call, the copied-code report),
    # neutered: there is nothing left there to neuter
    "disabled_call_server": ("ex11_1a__sequence_logprob",
                             "import contextlib, torch\nfrom lmpolicy.notebook import checks as _c\n"
                             "from lmpolicy_grader.trusted_tests import call_server as _cs\n"
                             "_c.no_library_shortcut = lambda *functions: contextlib.nullcontext()\n"
                             "_cs.copied_library_code = lambda *args: None\n"
                             "from lmpolicy.tinylm.logprobs import sequence_logprob as _library\n"
                             + _LOGPROB_BY.format(f="_library"), "from lmpolicy_grader.trusted_tests import"),
}
SOFTMAX_CELL, LOGPROB_CELL = "nb01_softmax__answer", "ex11_1a__sequence_logprob"
# Right on the visible checks (1-D inputs and one 2x3 batch), and hands any other input back as its answer: the
# hidden checks fail on a value it returned, which is an entry of the student's own hidden input
ECHOES_HIDDEN_INPUT = """
import torch
def softmax(logits, dim=-1):
    if logits.ndim > 1 and tuple(logits.shape) != (2, 3):
        return logits
    e = torch.exp(logits - logits.max(dim=dim, keepdim=True).values)
    return e / e.sum(dim=dim, keepdim=True)
"""
SOFTMAX_TESTS, LOGPROB_TESTS = "nb01_softmax__tests", "ex11_1a__tests"
RIGHT_SOFTMAX = ("def softmax(logits, dim=-1):\n    w = torch.exp(logits - logits.amax(dim=dim, keepdim=True))\n"
                 "    return w / w.sum(dim=dim, keepdim=True)\n")
# Issue 34's door 3: the tested name bound past the rule (each kept 2 of 2 before). (answer cell, the reason's words,
# whether 11.1(a), tested below that cell, keeps its points)
CODE_RULE_CHEATS = {
    "globals_update": (RIGHT_SOFTMAX + "import functools\nglobals().update(softmax=functools.partial(torch.softmax, dim=-1))\n",
                       "binds softmax with globals().update(softmax=functools.partial(torch.softmax,", False),
    "match_capture": ("import functools\ndef softmax(logits, dim=-1):\n    return None\n"
                      "match functools.partial(torch.softmax, dim=-1):\n    case softmax:\n        pass\n",
                      "line 5 binds softmax with a match capture", True),
}


@pytest.fixture(scope="session")
def hostile_class(tmp_path_factory, repo_root):
    root = tmp_path_factory.mktemp("hostile-in-process")
    (root / "source" / "ch11").mkdir(parents=True)
    shutil.copy(repo_root / "source" / "ch11" / f"{NOTEBOOK}.ipynb", root / "source" / "ch11")
    config = (repo_root / "nbgrader_config.py").read_text()
    (root / "nbgrader_config.py").write_text(config + f"\nc.GradingExecute.timeout = {CELL_TIMEOUT}\n")
    release(root)
    reference = nbformat.read(root / "source" / "ch11" / f"{NOTEBOOK}.ipynb", as_version=4)
    submissions = {"reference": reference}
    for name, attack in ATTACKS.items():
        submissions[name] = tiny_course.replace_answer(nbformat.from_dict(reference), SOFTMAX_CELL, WRONG_SOFTMAX + attack)
    for name, (answer, _) in CHANNEL_ATTACKS.items():
        submissions[name] = tiny_course.replace_answer(nbformat.from_dict(reference), SOFTMAX_CELL, answer)
    logprob_copy = ("from lmpolicy.tinylm import logprobs as _lp\n"
                    "def sequence_logprob(token_probs):\n    pass\n"
                    "sequence_logprob.__code__ = _lp.sequence_logprob.__code__\n")
    submissions["copied_logprob"] = tiny_course.replace_answer(nbformat.from_dict(reference), LOGPROB_CELL, logprob_copy)
    for name, (cell, answer, _) in LIBRARY_CHEATS.items():
        submissions[name] = tiny_course.replace_answer(nbformat.from_dict(reference), cell, answer)
    for name, (answer, _, _) in CODE_RULE_CHEATS.items():
        submissions[name] = tiny_course.replace_answer(nbformat.from_dict(reference), SOFTMAX_CELL, answer)
    submissions["blank"] = nbformat.read(root / "release" / "ch11" / f"{NOTEBOOK}.ipynb", as_version=4)
    submissions["echoes_hidden_input"] = tiny_course.replace_answer(nbformat.from_dict(reference), SOFTMAX_CELL,
                                                                    ECHOES_HIDDEN_INPUT)
    # plain numpy: a read far past an array's one element (no os._exit, which the code rule refuses)
    submissions["dies_in_a_call"] = tiny_course.replace_answer(
        nbformat.from_dict(reference), SOFTMAX_CELL,
        "import numpy as np\ndef softmax(logits, dim=-1):\n"
        "    return float(np.lib.stride_tricks.as_strided(np.zeros(1), shape=(2,), strides=(2 ** 44,)).sum())\n")
    for student, nb in submissions.items():
        tiny_course.submit(root, student, nb, notebook=NOTEBOOK)
    outcomes = grade_class(root, workers=2, log=lambda _: None)
    return root, {o.student: o for o in outcomes}


def _scores(root, student) -> dict[str, float]:
    config = load_config(root)
    with Gradebook(config.CourseDirectory.db_url, config.CourseDirectory.course_id) as gradebook:
        grades = gradebook.find_submission_notebook(NOTEBOOK, "ch11", student).grades
        return {g.name: g.score for g in grades if g.cell_type == "code"}


def _error_of(root, student, grade_id) -> str:
    nb = nbformat.read(root / "autograded" / student / "ch11" / f"{NOTEBOOK}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    return "\n".join(f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error")


def test_the_reference_earns_every_point(hostile_class):
    root, outcomes = hostile_class
    assert outcomes["reference"].status == Status.GRADED, outcomes["reference"].reason
    assert _scores(root, "reference") == {SOFTMAX_TESTS: 2.0, LOGPROB_TESTS: 3.0}
    # the notebook's own cells found every library function they need in the grading kernel's view
    nb = nbformat.read(root / "autograded" / "reference" / "ch11" / f"{NOTEBOOK}.ipynb", as_version=4)
    errors = [f"{o.ename}: {o.evalue}" for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == []


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_attack_on_the_tests_changes_nothing_but_costs_what_is_tested_below_it(hostile_class, attack):
    root, outcomes = hostile_class
    assert outcomes[attack].status == Status.GRADED, outcomes[attack].reason
    if attack == "fake_output":  # plain Python: the tests run in the trusted kernel, the fake lines change nothing
        assert _scores(root, attack) == {SOFTMAX_TESTS: 0.0, LOGPROB_TESTS: 3.0}
        assert "contains NaN" in _error_of(root, attack, SOFTMAX_TESTS)  # the honest reason: the overflow
        return
    # every other attack needs a construct outside the code rule: both tests below its cell get no credit, saying so
    assert _scores(root, attack) == {SOFTMAX_TESTS: 0.0, LOGPROB_TESTS: 0.0}
    for test in (SOFTMAX_TESTS, LOGPROB_TESTS):
        error = _error_of(root, attack, test)
        assert error.startswith("LibraryShortcutUsed: cell 10 (your answer to Exercise 01.softmax) line ") \
            and "outside the plain Python the grader can check" in error, error


@pytest.mark.parametrize("cheat", sorted(CODE_RULE_CHEATS))
def test_a_tested_name_bound_past_the_code_rule_earns_nothing_on_what_it_can_touch(hostile_class, cheat):
    root, outcomes = hostile_class
    _, says, others_keep = CODE_RULE_CHEATS[cheat]
    assert outcomes[cheat].status == Status.GRADED, outcomes[cheat].reason
    assert _scores(root, cheat) == {SOFTMAX_TESTS: 0.0, LOGPROB_TESTS: 3.0 if others_keep else 0.0}
    error = _error_of(root, cheat, SOFTMAX_TESTS)
    assert error.startswith("LibraryShortcutUsed: cell 10 (your answer to Exercise 01.softmax) ") and says in error
    import html
    feedback = html.unescape((root / "feedback" / cheat / "ch11" / f"{NOTEBOOK}.html").read_text())
    assert says in " ".join(feedback.split())  # the grader's verdict reaches the student


@pytest.mark.parametrize("attack", sorted(CHANNEL_ATTACKS))
def test_an_attack_on_the_channel_costs_its_exercise_with_a_reason(hostile_class, attack):
    root, outcomes = hostile_class
    assert outcomes[attack].status == Status.GRADED, outcomes[attack].reason
    scores = _scores(root, attack)
    assert scores[SOFTMAX_TESTS] == 0.0
    outside = attack in ("never_answers", "copied_code_object", "copied_code_object_by_computed_name")
    if outside:  # written with a construct outside the code rule (get_ipython, __code__): refused before any call
        assert "outside the plain Python" in _error_of(root, attack, SOFTMAX_TESTS) \
            or "binds softmax with" in _error_of(root, attack, SOFTMAX_TESTS)
    else:
        assert CHANNEL_ATTACKS[attack][1] in _error_of(root, attack, SOFTMAX_TESTS)
    # a construct outside the rule costs every exercise below it; the others keep their honest points
    assert scores[LOGPROB_TESTS] == (0.0 if outside else 3.0)


def test_a_kernel_that_dies_inside_a_call_fails_its_notebook_with_the_reason(hostile_class):
    _, outcomes = hostile_class
    assert outcomes["dies_in_a_call"].status == Status.FAILED
    assert "kernel died" in outcomes["dies_in_a_call"].reason


def test_a_copied_library_code_object_earns_nothing(hostile_class):
    root, outcomes = hostile_class
    assert _scores(root, "copied_logprob") == {SOFTMAX_TESTS: 2.0, LOGPROB_TESTS: 0.0}
    assert "LibraryShortcutUsed" in _error_of(root, "copied_logprob", LOGPROB_TESTS)


def test_a_blank_submission_keeps_its_exact_score(hostile_class):
    root, outcomes = hostile_class
    assert outcomes["blank"].status == Status.GRADED, outcomes["blank"].reason
    assert _scores(root, "blank") == {SOFTMAX_TESTS: 0.0, LOGPROB_TESTS: 0.0}


@pytest.mark.parametrize("cheat", sorted(LIBRARY_CHEATS))
def test_the_librarys_own_answer_reached_any_way_earns_nothing_on_what_it_cheated(hostile_class, cheat):
    """Issue 20's cheats: 0 on the exercise cheated, with the reason; the other exercise keeps its points."""
    root, outcomes = hostile_class
    cell, _, reason = LIBRARY_CHEATS[cheat]
    assert outcomes[cheat].status == Status.GRADED, outcomes[cheat].reason
    cheated = SOFTMAX_TESTS if cell == SOFTMAX_CELL else LOGPROB_TESTS
    honest = LOGPROB_TESTS if cheated == SOFTMAX_TESTS else SOFTMAX_TESTS
    scores = _scores(root, cheat)
    # each is written with a construct outside the code rule: it also costs 11.1(a), tested below the softmax cell
    assert scores == {cheated: 0.0, honest: 2.0 if honest == SOFTMAX_TESTS else 0.0}
    error = _error_of(root, cheat, cheated)
    assert "LibraryShortcutUsed" in error and reason in error, error


def test_a_failed_hidden_check_shows_neither_its_message_nor_the_hidden_input_returned_to_it(hostile_class):
    """The answer passes the visible checks and returns a hidden input as its answer: 0 on softmax, the hidden
    check's message (its hint, the value returned) for the instructor only; the student's feedback says a hidden
    check failed, and holds no value of the student's own hidden inputs (drawn here as the test draws them)."""
    import html
    import re

    import torch
    from lmpolicy.per_student.hidden_inputs import HIDDEN_INPUTS_VARIABLE, hidden_seed
    from lmpolicy_grader.students import kernel_environments, submission_digest

    root, outcomes = hostile_class
    student = "echoes_hidden_input"
    assert outcomes[student].status == Status.GRADED, outcomes[student].reason
    assert _scores(root, student) == {SOFTMAX_TESTS: 0.0, LOGPROB_TESTS: 3.0}
    assert "every slice along `dim` must sum to 1" in _error_of(root, student, SOFTMAX_TESTS)  # the hidden hint
    graded = root / "autograded" / student / "ch11"  # the inputs are drawn for this very submission
    digest = submission_digest(nbformat.read(graded / f"{NOTEBOOK}.ipynb", as_version=4), graded)
    _, trusted = kernel_environments(load_config(root), root, student, digest)
    os.environ[HIDDEN_INPUTS_VARIABLE] = trusted[HIDDEN_INPUTS_VARIABLE]
    try:
        first = 3 * torch.randn((4, 7), generator=torch.Generator().manual_seed(hidden_seed(1101)), dtype=torch.float64)
    finally:
        del os.environ[HIDDEN_INPUTS_VARIABLE]
    inputs = first.reshape(-1).tolist()
    returned = re.search(r"got (-?[\d.e+-]+)", _error_of(root, student, SOFTMAX_TESTS)).group(1)
    assert returned in {f"{value:.6g}" for value in inputs}  # the autograded notebook: it failed on an entry handed back
    feedback = html.unescape((root / "feedback" / student / "ch11" / f"{NOTEBOOK}.html").read_text())
    assert "fails one of the hidden checks" in feedback
    assert tiny_course.numbers_shown(inputs, feedback) == []


def _hidden_only(root) -> set[str]:
    """The identifiers (``_name``) and the quoted text of the hidden tests (the test cells' hidden parts and the
    notebook's module of ``lmpolicy_grader.hidden_tests``) that neither the released notebook nor the visible
    checks (its module of ``lmpolicy.exercises``) have."""
    import re

    from lmpolicy_grader import completeness

    released = "\n".join(c.source for c in nbformat.read(root / "release" / "ch11" / f"{NOTEBOOK}.ipynb", as_version=4).cells)
    library = Path(__file__).resolve().parents[3] / "lib"
    visible = (library / "lmpolicy" / "exercises" / f"{completeness.module_name(NOTEBOOK)}.py").read_text()
    hidden_parts = [(library / "lmpolicy_grader" / "hidden_tests" / f"{completeness.module_name(NOTEBOOK)}.py").read_text()]
    for cell in nbformat.read(root / "source" / "ch11" / f"{NOTEBOOK}.ipynb", as_version=4).cells:
        if cell.cell_type == "code" and HIDDEN_TESTS in cell.source:
            hidden_parts.append(cell.source.split(HIDDEN_TESTS, 1)[1])
    found = set()
    for hidden in hidden_parts:
        found |= set(re.findall(r"\b_[A-Za-z]\w{2,}\b", hidden))
        found |= {a or b for a, b in re.findall(r"\"([^\"\n{]{12,})\"|'([^'\n{]{12,})'", hidden)}
    return {item for item in found if item not in released and item not in visible}


def test_no_feedback_holds_a_word_of_the_hidden_tests(hostile_class):
    """Every student of the class, cheats and honest alike: their feedback carries no hidden identifier, hint or
    message text (the hidden tests' own failure messages included), and nothing the spy-like attacks printed."""
    import html
    import re
    root, outcomes = hostile_class
    hidden = _hidden_only(root)
    assert len(hidden) > 10, hidden  # the notebook has hidden tests worth hiding
    pages = sorted((root / "feedback").rglob("*.html"))
    assert len(pages) >= len([o for o in outcomes.values() if o.status == Status.GRADED]) > 10
    def holds(text, item):
        return re.search(rf"\b{re.escape(item)}\b", text) if item.startswith("_") else item in text
    leaks = {page.parent.parent.name: sorted(item for item in hidden if holds(html.unescape(page.read_text()), item))
             for page in pages}
    assert {student: items for student, items in leaks.items() if items} == {}
