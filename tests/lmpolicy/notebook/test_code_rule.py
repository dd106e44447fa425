"""The code rule (``lmpolicy.notebook.code_rule``): an allowlist of constructs, judged from the submitted source.

Each attack binds the tested name (softmax) by a way outside the rule, or uses a construct that could: it gets
no credit on the test, with a reason naming the cell, the line and the construct. The honest corpus (every
reference solution and honest variations written here; the typical wrong answers are the grader's corpus,
tests/lmpolicy_grader/trusted_tests/test_no_credit.py) passes. What the student reads of it before hand-in
(Validate, a check cell) is tests/notebooks/test_code_rule_before_hand_in.py.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from lmpolicy.notebook import code_rule
from lmpolicy.notebook.code_rule import Cell, outside_the_rule

REPO = Path(__file__).resolve().parents[3]
SETUP = "import math\n\nimport numpy as np\nimport torch\n"
TEST = ("import torch\nfrom lmpolicy.notebook import checks\n"
        "probs = checks.call_student(softmax, torch.tensor([2.0, 1.0, 0.0]))\n"
        "### BEGIN HIDDEN TESTS\nchecks.check_close(softmax(torch.zeros(3)), torch.full((3,), 1 / 3), 'hidden')\n"
        "### END HIDDEN TESTS\n")
TRUSTED = {"math", "np", "torch", "In", "Out", "get_ipython", "exit", "quit", "_"}
PLAIN = ("def softmax(logits, dim=-1):\n"
         "    shifted = logits - logits.max(dim=dim, keepdim=True).values\n"
         "    weights = torch.exp(shifted)\n"
         "    return weights / weights.sum(dim=dim, keepdim=True)\n")
SOFTMAX = "nb01_softmax"


def judge(answer: str, before: str = "", after: str = "", test: str = TEST) -> str | None:
    """The rule's reason for notebook 01's softmax test: a set-up cell, a free cell ``before`` the answer cell,
    the answer cell, a free cell ``after`` it, then the test."""
    cells = [Cell(4, SETUP), Cell(5, before), Cell(9, answer, SOFTMAX), Cell(10, after)]
    return outside_the_rule(cells, test, SOFTMAX, TRUSTED)


# name -> (answer cell, free cell after it, words the reason must hold). Each earned its softmax credit before
# (the issue's cases first), except where the existing reach analysis already caught it.
ATTACKS = {
    "globals_update": (PLAIN, "import functools\nglobals().update(softmax=functools.partial(torch.softmax, dim=-1))",
                       "cell 11 line 2 binds softmax with globals().update(softmax=functools.partial(torch.softmax,..."),
    "exec_of_a_string": ("exec('def softmax(z, dim=-1):\\n    return torch.softmax(z, dim)')", "", "cell 10 (your answer "
                         "to Exercise 01.softmax) line 1 uses exec"),
    "setattr_on_main": (PLAIN, "import __main__, torch\nsetattr(__main__, 'softmax', torch.softmax)",
                        "line 1 uses import __main__"),
    "run_cell": (PLAIN, "get_ipython().run_cell('softmax = torch.softmax')", "uses .run_cell (get_ipython()"),
    "time_magic": ("%time softmax = torch.softmax", "", "line 1 is an IPython magic or shell line"),
    "cell_magic": ("%%capture\n" + PLAIN, "", "line 1 is an IPython magic or shell line"),
    "shell_escape": (PLAIN, "!pip install torch-softmax", "cell 11 line 1 is an IPython magic or shell line"),
    "match_capture": (PLAIN + "import functools\nmatch functools.partial(torch.softmax, dim=-1):\n    case softmax:\n"
                      "        pass\n", "", "line 7 binds softmax with a match capture"),
    "pre_run_cell_hook": (PLAIN, "def _swap(*args):\n    global softmax\n    softmax = torch.softmax\n"
                          "get_ipython().events.register('pre_run_cell', _swap)", "get_ipython"),
    "thread": (PLAIN, "import threading, time\ndef _later():\n    global softmax\n    time.sleep(1)\n"
               "    softmax = torch.softmax\nthreading.Thread(target=_later).start()", "import threading"),
    "global_in_a_function": (PLAIN, "def _later():\n    global softmax\n    softmax = torch.softmax\n_later()",
                             "line 2 binds softmax with a global statement"),
    # the reviewer's own
    "decorator_replaces_the_def": ("import functools\ndef _library(f):\n    return functools.partial(torch.softmax, dim=-1)\n"
                                   "@_library\n" + PLAIN, "", "binds softmax with a decorated def"),
    "code_swap": (PLAIN + "import torch.nn.functional as F\nsoftmax.__code__ = F.softmax.__code__\n", "",
                  "line 6 binds softmax with softmax.__code__ = F.softmax.__code__ (.__code__)"),
    "builtins_fallback": ("import builtins\nbuiltins.softmax = torch.softmax\n", "", "line 1 uses import builtins"),
    "set_name_hook": (PLAIN, "class _Hook:\n    def __set_name__(self, owner, name):\n        global softmax\n"
                      "        softmax = torch.softmax\nclass _Owner:\n    x = _Hook()", "a method __set_name__"),
    "walrus": ("import functools\n(softmax := functools.partial(torch.softmax, dim=-1))\n", "",
               "binds softmax with a := expression"),
    "walrus_in_a_default": ("def _helper(x=(softmax := torch.softmax)):\n    return x\n", "",
                            "binds softmax with a := expression"),
    "tuple_unpacking": (PLAIN + "softmax, _ = torch.softmax, None\n", "", "an assignment unpacking into it"),
    "for_target_in_another_cell": (PLAIN, "for softmax in [torch.softmax]:\n    pass", "binds softmax with a for loop"),
    "with_target": (PLAIN + "import contextlib\n", "with contextlib.nullcontext(torch.softmax) as softmax:\n    pass",
                    "binds softmax with a with ... as target"),
    "plain_def_in_a_later_cell": (PLAIN, "def softmax(logits, dim=-1):\n    return torch.softmax(logits, dim)",
                                  "binds softmax with a def outside its answer cell"),
    "del_in_a_later_cell": (PLAIN, "del softmax", "binds softmax with del"),
    "import_as": ("from torch import softmax\n", "", "imports softmax, which gets no credit: implement this yourself"),
    "class_of_that_name": ("class softmax:\n    def __new__(cls, logits, dim=-1):\n        return logits.exp() / "
                           "logits.exp().sum(dim, keepdim=True)\n", "", "binds softmax with a class"),
    "inside_an_if": ("if True:\n    softmax = torch.softmax\n", "", "an assignment inside an if block"),
    "augmented_assignment": (PLAIN + "softmax += 0\n", "", "binds softmax with an augmented assignment"),
    "vars_subscript": (PLAIN, "vars()['softmax'] = torch.softmax", "binds softmax with vars()"),
    "sys_modules": (PLAIN, "import sys\nsys.modules[__name__].softmax = torch.softmax", "import sys"),
    "computed_getattr": ("_sm = getattr(torch, 'soft' + 'max')\n" + PLAIN, "", "getattr with a computed name"),
    "interpreter_through_an_allowed_module": (PLAIN, "import typing\ntyping.sys.modules['__main__'].softmax = 1",
                                              "binds softmax with typing.sys.modules"),
    "interpreter_through_the_library": (PLAIN, "from lmpolicy.notebook import checks\nchecks.os.environ['X'] = '1'", "uses .os"),
    "frame_globals": (PLAIN, "import inspect\ninspect.currentframe().f_globals['softmax'] = torch.softmax",
                      "import inspect"),
    "async_hook": (PLAIN, "async def _later():\n    global softmax\n    softmax = torch.softmax", "an async def"),
    "attrgetter_of_a_dunder": (PLAIN, "import operator\n_g = operator.attrgetter('__globals__')(softmax)",
                               "import operator"),
    "ipython_history": (PLAIN, "_swap = Out[3]", "IPython's history (Out)"),
    "module_attribute_rebound": (PLAIN, "import numpy\nnumpy.allclose = lambda *a, **k: True",
                                 "an assignment to numpy.allclose, an attribute of a module"),
    "relative_import": ("from .my_softmax import softmax\n", "", "a relative import"),
    # the guards the grader keeps in the submission's process (torch's softmax operators refusing while the softmax
    # is checked): a module held in a list, or reached by a dotted path, is as closed as one named
    "module_attribute_rebound_through_a_list": (PLAIN, "from lmpolicy.notebook import blocking\nfor m in [blocking]:\n"
                                                "    m.refusing_operators = lambda *a: None",
                                                "an assignment to m.refusing_operators, an attribute (a cell may "
                                                "assign names, not attributes)"),
    "module_attribute_rebound_by_a_dotted_path": (PLAIN, "import lmpolicy.notebook.blocking\n"
                                                  "lmpolicy.notebook.blocking.refusing_operators = None",
                                                  "an assignment to lmpolicy.notebook.blocking.refusing_operators"),
    "module_attribute_deleted": (PLAIN, "import re\ndel re.compile", "deleting re.compile, an attribute of a module"),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_an_attack_outside_the_rule_gets_no_credit_with_its_reason(attack):
    answer, after, says = ATTACKS[attack]
    reason = judge(answer, after=after)
    assert reason is not None and says in reason, reason


def test_the_issues_globals_update_case_reads_as_a_student_can_act_on_it():
    answer, after, _ = ATTACKS["globals_update"]
    assert judge(answer, after=after) == (
        "cell 11 line 2 binds softmax with globals().update(softmax=functools.partial(torch.softmax,... (globals): "
        "the grader only "
        "credits a softmax made by a plain def or assignment in its answer cell")


def test_a_construct_touches_every_test_below_it_and_none_above():
    bad = Cell(12, "exec('x = 1')")
    softmax_test = outside_the_rule([Cell(4, SETUP), Cell(9, PLAIN, SOFTMAX)], TEST, SOFTMAX, TRUSTED)
    later_test = outside_the_rule([Cell(4, SETUP), Cell(9, PLAIN, SOFTMAX), bad],
                                  "from lmpolicy.notebook import checks\nchecks.check(sequence_logprob is not None, 'x')",
                                  "ex11_1a", TRUSTED)
    assert softmax_test is None
    assert later_test.startswith("cell 13 line 1 uses exec (exec('x = 1')), outside the plain Python the grader can "
                                 "check: no exercise checked below it gets credit")


def test_a_binding_outside_the_rule_touches_only_the_tests_that_read_the_name():
    cells = [Cell(4, SETUP), Cell(9, PLAIN, SOFTMAX), Cell(10, "for softmax in [torch.softmax]:\n    pass")]
    assert outside_the_rule(cells, TEST, SOFTMAX, TRUSTED) is not None
    assert outside_the_rule(cells, "from lmpolicy.notebook import checks\nchecks.check(prob_86 > 0, 'x')", "ex11_1a",
                            TRUSTED) is None


def test_the_tested_names_are_what_the_test_reads_and_the_trusted_kernel_lacks():
    assert code_rule.tested_names(TEST, TRUSTED) == {"softmax"}
    test = ("from lmpolicy.notebook import checks\n_x = 1\ndef _call(z):\n    return helper(z) + _x\n"
            "checks.check(_call(prob_86), 'x')\n")
    assert code_rule.tested_names(test, TRUSTED) == {"helper", "prob_86"}


# --- no false positives -------------------------------------------------------------------------------------

SOURCE_NOTEBOOKS = sorted((REPO / "source" / "ch11").glob("*.ipynb"))


@pytest.mark.parametrize("path", SOURCE_NOTEBOOKS, ids=[p.stem for p in SOURCE_NOTEBOOKS])
def test_every_reference_solution_passes_the_rule(path):
    nb = nbformat.read(path, as_version=4)
    _, judged = code_rule.notebook_judgement(nb)
    assert judged and {test: found.reason for test, found in judged.items() if found} == {}
    assert code_rule.notebook_outside(nb) == []  # what Validate would list: nothing


# Honest ways to write an answer: each is the softmax answer cell, with a free cell of helpers above it.
HONEST = {
    "helpers_in_another_cell": ("def _shift(z, dim):\n    return z - z.max(dim=dim, keepdim=True).values\n"
                                "EPS = 1e-12\n",
                                "def softmax(logits, dim=-1):\n    w = torch.exp(_shift(logits, dim))\n"
                                "    return w / (w.sum(dim=dim, keepdim=True) + 0 * EPS)\n"),
    "lambda": ("", "softmax = lambda logits, dim=-1: (lambda w: w / w.sum(dim, keepdim=True))(\n"
                   "    torch.exp(logits - logits.amax(dim, keepdim=True)))\n"),
    "comprehensions_and_walrus_inside": ("", "def softmax(logits, dim=-1):\n    rows = [r for r in [logits]]\n"
                                             "    sizes = {k: v for k, v in enumerate(logits.shape)}\n"
                                             "    if (m := logits.amax(dim, keepdim=True)) is not None:\n"
                                             "        w = torch.exp(rows[0] - m)\n"
                                             "    return w / w.sum(dim, keepdim=True)\n"),
    "nested_defs": ("", "def softmax(logits, dim=-1):\n    def normalise(w):\n        return w / w.sum(dim, keepdim=True)\n"
                        "    return normalise(torch.exp(logits - logits.amax(dim, keepdim=True)))\n"),
    "class_as_helper": ("from dataclasses import dataclass\n\n@dataclass\nclass Normaliser:\n    dim: int = -1\n\n"
                        "    def __call__(self, w):\n        return w / w.sum(self.dim, keepdim=True)\n\n"
                        "    def __repr__(self):\n        return f'Normaliser({self.dim})'\n",
                        "def softmax(logits, dim=-1):\n    return Normaliser(dim)(torch.exp(logits - logits.amax(dim, "
                        "keepdim=True)))\n"),
    "imports_torch_numpy_math_F": ("import math\nimport numpy as np\nimport torch\nimport torch.nn.functional as F\n"
                                   "from math import exp, log\nfrom collections import defaultdict\n"
                                   "from itertools import product\nfrom functools import partial, reduce\n",
                                   "import torch\n\ndef softmax(logits, dim=-1):\n    w = torch.exp(logits - "
                                   "logits.amax(dim, keepdim=True))\n    return w / w.sum(dim, keepdim=True)\n"),
    "type_hints_docstring_annotated": ("from typing import Optional\nscale: float = 1.0\n",
                                       "def softmax(logits: torch.Tensor, dim: int = -1) -> torch.Tensor:\n"
                                       "    \"\"\"exp(z) / sum exp(z), shifted by the max first.\"\"\"\n"
                                       "    shifted: torch.Tensor = logits - logits.amax(dim, keepdim=True)\n"
                                       "    return shifted.exp() / shifted.exp().sum(dim, keepdim=True)\n"),
    "try_except_assert_fstring_print": ("", "def softmax(logits, dim=-1):\n    assert logits.ndim >= 1, f'{logits.shape}'\n"
                                            "    try:\n        m = logits.amax(dim, keepdim=True)\n"
                                            "    except RuntimeError as error:\n        raise ValueError(f'bad dim "
                                            "{dim}') from error\n    w = torch.exp(logits - m)\n"
                                            "    return w / w.sum(dim, keepdim=True)\n\n"
                                            "print(f\"{softmax(torch.tensor([2.0, 1.0, 0.0]))=}\")\n"),
    "plotting": ("import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([0, 1], [1, 0])\n"
                 "ax.set_title('logits')\nplt.close(fig)\n", PLAIN + "\nfor row in torch.eye(3):\n    print(softmax(row))\n"),
    "a_placeholder_then_the_def": ("", "softmax = None  # to do\n" + PLAIN),
    "an_earlier_attempt_in_a_scratch_cell": ("def softmax(logits, dim=-1):\n    return torch.exp(logits) / "
                                             "torch.exp(logits).sum(dim, keepdim=True)\n", PLAIN),
    "main_guard_and_numpy": ("import numpy as np\nif __name__ == '__main__':\n    print(np.exp(np.array([1.0])))\n",
                             PLAIN + "print(type(softmax).__name__, softmax.__doc__)\n"),
    "loops_and_augmented_helpers": ("total = 0.0\nfor value in [1.0, 2.0]:\n    total += math.exp(value)\n"
                                    "while total > 10:\n    total /= 2\n",
                                    "def softmax(logits, dim=-1):\n    out = torch.exp(logits - logits.amax(dim, keepdim=True))\n"
                                    "    out /= out.sum(dim, keepdim=True)\n    return out\n"),
}


@pytest.mark.parametrize("variation", sorted(HONEST))
def test_an_honest_variation_passes_the_rule(variation):
    before, answer = HONEST[variation]
    assert judge(answer, before=before) is None


def test_without_an_answer_cell_a_plain_making_anywhere_stands_in_and_nothing_else_does():
    """The answer cell deleted (the grader restores every deleted cell but answers): the rule still asks for plain."""
    assert outside_the_rule([Cell(4, SETUP), Cell(5, PLAIN)], TEST, SOFTMAX, TRUSTED) is None
    reason = outside_the_rule([Cell(4, SETUP), Cell(5, "for softmax in [torch.softmax]:\n    pass")], TEST, SOFTMAX,
                              TRUSTED)
    assert reason == ("cell 6 line 1 binds softmax with a for loop: the grader only credits a softmax made by a plain "
                      "def or assignment (softmax = ...) at the top level of its answer cell")


# Code run from a string, however it hides: each would reach the namespace with a name the rule cannot read.
HIDDEN_EVALUATION = {
    "getattr_passed_around": ("import functools\n_g = functools.reduce(getattr, ['_' * 2 + 'globals' + '_' * 2], softmax)",
                              "getattr passed as a value"),
    "format_traversal": ("_text = '{0.__globals__}'.format(softmax)", "the name '__globals__' in a string"),
    "string_annotation": ("import typing\ndef _f(x: 'globals().update(softmax=torch.softmax)'):\n    pass\n"
                          "typing.get_type_hints(_f)", "a string annotation"),
    "string_formatter": ("import string\n_f = string.Formatter().get_field('0.x', [softmax], {})", "import string"),
    "the_librarys_private_shell": ("from lmpolicy.notebook import checks\n_shell = checks._ipython()",
                                   "._ipython, a private name of a module"),
    "the_librarys_private_importer": ("from lmpolicy.notebook.forbidden import _library_object\n"
                                      "_library_object('sys:modules')['__main__'].softmax = torch.softmax",
                                      "from lmpolicy.notebook.forbidden import _library_object"),
    "private_torch": ("_p = torch._softmax", "._softmax, a private name of a module"),
}


@pytest.mark.parametrize("case", sorted(HIDDEN_EVALUATION))
def test_code_run_from_a_string_is_refused_wherever_it_hides(case):
    after, says = HIDDEN_EVALUATION[case]
    reason = judge(PLAIN, after=after)
    assert reason is not None and says in reason, reason


# --- what the student reads before hand-in: one line per construct, with what to do ------------------------------

# An honest habit outside the rule (a free cell below the softmax exercise) -> what the student's line says to do.
HABITS = {
    "%matplotlib inline": "is not plain Python the grader can check: every exercise below it would get no credit; "
                          "delete the line (plots show without it)",
    "%time probs = torch.softmax(z, -1)": "delete the magic and keep the code",
    "%%capture\nprint(1)": "delete the line: IPython's magics are not plain Python",
    "!pip install tqdm": "the course's packages are installed already",
    "!ls": "run shell commands in a terminal",
    "softmax?": "Shift+Tab on a name shows its help",
    "import os": "`import os` is outside the plain Python the grader can check: every exercise below it would get no "
                 "credit; delete it: no exercise needs files, paths or the interpreter",
    "import sys\nprint(sys.version)": "no exercise needs files, paths or the interpreter",
    "from IPython.display import display": "delete it: display(...) works without an import",
    "from tqdm import tqdm": "delete it: print the progress every so many steps instead",
    "import pandas as pd": "a notebook may import torch, numpy, math, matplotlib, lmpolicy",
    "for i in range(3)\n    print(i)": "is not plain Python (expected ':'), which the grader cannot check: every "
                                       "exercise below it would get no credit; fix it, or delete the cell",
    "def f(x: 'torch.Tensor'):\n    return x": "write the annotation without quotes",
    "help(math.exp)": "uses help, which is outside the plain Python the grader can check: every exercise below "
                           "it would get no credit; delete it (Shift+Tab on a name shows its help)",
    "with open('notes.txt', 'w') as f:\n    f.write('x')": "delete it: no exercise reads or writes files",
    "exec('x = 1')": "`exec('x = 1')` uses exec, which is outside the plain Python the grader can check",
}


@pytest.mark.parametrize("habit", sorted(HABITS))
def test_an_honest_habit_outside_the_rule_reads_as_the_cell_the_line_and_what_to_do(habit):
    free = Cell(11, habit, below="Exercise 01.softmax")
    (found,) = code_rule.constructs_outside(free)
    line = found.student_line()
    assert line.startswith(f"cell 12 (below Exercise 01.softmax), line {found.line}: `"), line
    assert HABITS[habit] in line, line
    # and the grader's reason for the test below says the same thing to do
    assert judge(PLAIN, after=habit).endswith(found.advice)


def test_a_making_the_grader_refuses_reads_as_the_check_it_costs():
    nb = nbformat.read(REPO / "source" / "ch11" / "01_policy_softmax.ipynb", as_version=4)
    answer = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") ==
                  "nb01_softmax__answer")
    nb.cells.insert(answer + 1, nbformat.v4.new_code_cell("for softmax in [torch.softmax]:\n    pass"))
    (found,) = code_rule.notebook_outside(nb)
    assert found.student_line() == (
        "cell 11 (below Exercise 01.softmax), line 1: `for softmax in [torch.softmax]:` binds softmax with a for "
        "loop outside its answer cell: the check of softmax would get no credit; make softmax only with a plain def "
        "or assignment (softmax = ...) at the top level of its answer cell")


def test_a_kernels_history_names_its_first_cell_outside_and_counts_the_others():
    history = [(0, ""), (1, SETUP), (2, "%matplotlib inline"), (3, PLAIN), (4, "import os"), (5, "import os"),
               (6, "print(1")]
    found, others = code_rule.first_outside_in_history(history)
    assert found.student_line(f"In [{found.cell.index}]").startswith("In [2], line 1: `%matplotlib inline` is not")
    assert others == 2  # import os (run twice: one cell) and the syntax error
    assert code_rule.first_outside_in_history([(1, SETUP), (2, PLAIN), (3, "xs = [math.exp(x) for x in range(3)]")]) \
        is None
