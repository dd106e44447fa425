"""The grader's side of the code rule (``lmpolicy.notebook.code_rule``, whose own tests are tests/lmpolicy/notebook/test_code_rule.py):
the trusted kernel judges each test with that one module, the rule replaces the blocklist read of the source for
the cases of issue 34, the reach analysis (``no_credit``) still refuses what plain code reaches, and every typical
wrong answer of the grader's corpus passes the rule or is the library imported.
"""
from __future__ import annotations

import re

import nbformat

from lmpolicy.notebook import code_rule
from lmpolicy.notebook.catalogue import exercise_key
from lmpolicy_grader.corpus.wrong_answers import WRONG_ANSWERS
from lmpolicy_grader.trusted_tests import in_kernel, no_credit

from ..tiny_course import REPO

SETUP = "import math\n\nimport numpy as np\nimport torch\n"
TEST = ("import torch\nfrom lmpolicy.notebook import checks\n"
        "probs = checks.call_student(softmax, torch.tensor([2.0, 1.0, 0.0]))\n")
PLAIN = ("def softmax(logits, dim=-1):\n"
         "    shifted = logits - logits.max(dim=dim, keepdim=True).values\n"
         "    weights = torch.exp(shifted)\n"
         "    return weights / weights.sum(dim=dim, keepdim=True)\n")
SOFTMAX = "nb01_softmax"
BLOCKED = {"softmax", "log_softmax"}
# (answer cell, a free cell after it) of the issue's cases that the blocklist let through
ISSUE_CASES = {
    "globals_update": (PLAIN, "import functools\nglobals().update(softmax=functools.partial(torch.softmax, dim=-1))"),
    "match_capture": (PLAIN + "import functools\nmatch functools.partial(torch.softmax, dim=-1):\n    case softmax:\n"
                      "        pass\n", ""),
    "time_magic": ("%time softmax = torch.softmax", ""),
    "exec_of_a_string": ("exec('def softmax(z, dim=-1):\\n    return torch.softmax(z, dim)')", ""),
}


def test_the_trusted_kernel_judges_each_test_with_the_code_rule(monkeypatch):
    """in_kernel.outside_the_rule reads the submitted cells above the test (their answers named) and the names its
    own cells made, and gives lmpolicy.notebook.code_rule's reason."""
    monkeypatch.setattr(in_kernel, "_ALL_SOURCES", [(4, SETUP), (9, PLAIN), (10, "import os"), (12, TEST)])
    monkeypatch.setattr(in_kernel, "_ANSWERS", {9: SOFTMAX})
    user_ns = {"math": 1, "np": 1, "torch": 1, "In": [], "Out": {}}
    reason = in_kernel.outside_the_rule(user_ns, TEST, 11, SOFTMAX)
    assert reason == code_rule.outside_the_rule(
        [code_rule.Cell(4, SETUP), code_rule.Cell(9, PLAIN, SOFTMAX), code_rule.Cell(10, "import os")], TEST,
        SOFTMAX, {"math", "np", "torch", "In", "Out"})
    assert reason.startswith("cell 11 line 1 uses import os (import os), outside the plain Python the grader can "
                             "check: no exercise checked below it gets credit; delete it")
    assert in_kernel.outside_the_rule(user_ns, TEST, 10, SOFTMAX) is None  # a test above the import: untouched


def test_the_old_rule_let_the_issues_cases_through():
    """What the rule replaces: the blocklist read of the source let these keep their credit; the rule refuses them."""
    for attack, (answer, after) in ISSUE_CASES.items():
        assert no_credit.library_shortcut([SETUP, answer, after], "softmax", BLOCKED) is None, attack
        cells = [code_rule.Cell(4, SETUP), code_rule.Cell(9, answer, SOFTMAX), code_rule.Cell(10, after)]
        assert code_rule.outside_the_rule(cells, TEST, SOFTMAX, {"math", "np", "torch"}) is not None, attack


def test_a_default_argument_reaching_the_library_is_plain_code_the_reach_analysis_still_refuses():
    answer = "def softmax(logits, dim=-1, _f=torch.softmax):\n    return _f(logits, dim)\n"
    cells = [code_rule.Cell(4, SETUP), code_rule.Cell(9, answer, SOFTMAX)]
    assert code_rule.outside_the_rule(cells, TEST, SOFTMAX, {"math", "np", "torch"}) is None  # plain: nothing to say
    reason = no_credit.library_shortcut([SETUP, answer], "softmax", BLOCKED)
    assert reason == "your softmax uses the library's softmax, which gets no credit"


def test_the_reach_analysis_accepts_patterns_of_blocked_names():
    answer = "def softmax(logits, dim=-1):\n    return torch._softmax(logits, dim, False)\n"
    assert no_credit.library_shortcut([SETUP, answer], "softmax", {"softmax"}) is None
    reason = no_credit.library_shortcut([SETUP, answer], "softmax", {"softmax", re.compile(r"_+softmax\w*")})
    assert reason == "your softmax uses the library's _softmax, which gets no credit"


def _with_answer(notebook: str, grade_id: str, source: str):
    nb = nbformat.read(REPO / "source" / "ch11" / f"{notebook}.ipynb", as_version=4)
    next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id).source = source
    return nb


def test_every_typical_wrong_answer_passes_the_rule_or_is_the_library_imported():
    """A wrong answer keeps failing as it did: the rule says nothing of it, except of an answer that imports the
    library's function, which it refuses in the words of the check it skips ("implement this yourself")."""
    problems = []
    for wrong in WRONG_ANSWERS:
        _, judged = code_rule.notebook_judgement(_with_answer(wrong.notebook, wrong.cell, wrong.source))
        for test, found in judged.items():
            reason = found.reason if found else None
            imported = reason and exercise_key(test) == wrong.exercise and "implement this yourself" in reason
            if reason and not imported:
                problems.append(f"{wrong.cell} ({wrong.why}): {test}: {reason}")
    assert problems == []
