"""A tiny nbgrader course with the repository's grading configuration, for the grading tests.

One notebook, ``01_tiny``: a locked import cell, an unlocked set-up cell, two autograded exercises (``ex1``: double,
``ex2``: square; each answer cell relies on the locked import cell, each test cell has hidden tests)
and a manually graded answer (``ex3``). Hostile submissions are made from its reference solution.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from lmpolicy_grader.class_grading.status import Status

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = "01_tiny"
POINTS = {"ex1": 2.0, "ex2": 3.0, "ex3": 2.0}
CELL_TIMEOUT = 5

CONFIG = f"""
load_subconfig({str(REPO / 'nbgrader_config.py')!r})
from pathlib import Path
root = Path(__file__).resolve().parent
c.CourseDirectory.root = str(root)
c.CourseDirectory.db_url = f"sqlite:///{{root / 'gradebook.db'}}"
c.RestoreDeletedCells.course_root = str(root)
c.GradingExecute.timeout = {CELL_TIMEOUT}
c.GradingExecute.default_budget = 60
c.GradingExecute.probe_timeout = 5
c.GradingExecute.max_output_bytes = 20_000
c.GradingKernelManager.memory_bytes = 2 * 1024**3
c.Exchange.root = str(root / 'exchange')
"""


def _meta(grade_id, *, grade=False, solution=False, locked=False, points=None):
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "solution": solution,
            "schema_version": 3, "task": False}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def _test(call: str, expected: str, hidden_call: str, hidden_expected: str, what: str) -> str:
    return (f"import numpy as np\nfrom lmpolicy.notebook import checks\n"
            f"checks.check_close({call}, {expected}, {what!r})\n"
            "### BEGIN HIDDEN TESTS\n"
            f"assert np.allclose({hidden_call}, {hidden_expected}), 'hidden check of {what} failed'\n"
            "### END HIDDEN TESTS")


# ex2's hidden test also draws random inputs, from the student's hidden seed (lmpolicy.per_student.hidden_inputs)
HIDDEN_INPUTS_SEED = 7
HIDDEN_RANDOM_INPUTS = (
    "\n### BEGIN HIDDEN TESTS\nfrom lmpolicy.per_student.hidden_inputs import hidden_seed\n"
    f"_x = np.random.default_rng(hidden_seed({HIDDEN_INPUTS_SEED})).normal(size=4)\n"
    "assert np.allclose(square(_x), _x ** 2), 'hidden check of square on random inputs failed'\n"
    "### END HIDDEN TESTS")


def source_notebook() -> nbformat.NotebookNode:
    cells = [
        (new_markdown_cell("# A tiny assignment\nTwo functions and one question."), _meta("header", locked=True)),
        (new_code_cell("import numpy as np"), _meta("setup", locked=True)),
        (new_code_cell("TWO = 2.0  # an unlocked set-up cell the answer relies on"), {}),
        (new_code_cell("def double(x):\n    ### BEGIN SOLUTION\n    return TWO * np.asarray(x, dtype=float)\n"
                       "    ### END SOLUTION"), _meta("ex1__answer", solution=True)),
        (new_code_cell(_test("double([1.0, 2.0])", "[2.0, 4.0]", "double([-3.0, 0.5])", "[-6.0, 1.0]", "double")),
         _meta("ex1__tests", grade=True, locked=True, points=POINTS["ex1"])),
        (new_code_cell("def square(x):\n    ### BEGIN SOLUTION\n    return np.asarray(x, dtype=float) ** 2\n"
                       "    ### END SOLUTION"), _meta("ex2__answer", solution=True)),
        (new_code_cell(_test("square([2.0])", "[4.0]", "square([-3.0, 0.5])", "[9.0, 0.25]", "square")
                       + HIDDEN_RANDOM_INPUTS), _meta("ex2__tests", grade=True, locked=True, points=POINTS["ex2"])),
        (new_markdown_cell("Why is squaring never negative?"), _meta("ex3__question", locked=True)),
        (new_markdown_cell("### BEGIN SOLUTION\nMark scheme: 2 points for x*x >= 0.\n### END SOLUTION"),
         _meta("ex3__manual", grade=True, solution=True, points=POINTS["ex3"])),
    ]
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    for number, (cell, metadata) in enumerate(cells):
        cell.metadata.update(metadata)
        cell["id"] = f"tiny-{number:02d}"  # stable ids, as a student's copy of the release keeps them
        nb.cells.append(cell)
    return nb


def make_course(root: Path) -> Path:
    """Write the course folder (config + source); the release comes from `lmpolicy_grader release`."""
    (root / "source" / "ch11").mkdir(parents=True)
    (root / "nbgrader_config.py").write_text(CONFIG)
    nbformat.write(source_notebook(), root / "source" / "ch11" / f"{NOTEBOOK}.ipynb")
    return root


def cell_index(nb, grade_id: str) -> int:
    return next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def one_notebook_course(root: Path, notebook: str, cell_timeout: int = 20) -> Path:
    """A course in ``root`` of the repository's source ``notebook`` alone (its ``NN_name``), with the repository's
    grading configuration and a cell timeout of ``cell_timeout`` s, released; returns the source notebook's path."""
    from lmpolicy_grader.__main__ import release

    (root / "source" / "ch11").mkdir(parents=True)
    shutil.copy(REPO / "source" / "ch11" / f"{notebook}.ipynb", root / "source" / "ch11")
    (root / "nbgrader_config.py").write_text((REPO / "nbgrader_config.py").read_text()
                                             + f"\nc.GradingExecute.timeout = {cell_timeout}\n")
    release(root)
    return root / "source" / "ch11" / f"{notebook}.ipynb"


def numbers_shown(values, text: str) -> list[float]:
    """The values that ``text`` shows as a number, written to six significant digits as a recording prints them.

    Only a value whose six-digit form holds at least four significant digits counts: a short form ("11", "0.5")
    is in any page by chance (an exercise number, a score), so finding it there says nothing about a leak."""
    shown = []
    for value in values:
        written = f"{value:.6g}"
        if len(re.sub(r"\D|e.*", "", written).lstrip("0")) >= 4 and \
                re.search(rf"(?<![\d.]){re.escape(written)}(?!\d)", text):
            shown.append(value)
    return shown


def replace_answer(nb, grade_id: str, source: str):
    nb.cells[cell_index(nb, grade_id)].source = source
    return nb


def submit(root: Path, student: str, nb=None, raw: str | None = None, notebook: str = NOTEBOOK) -> None:
    """Hand in ``nb`` (or the ``raw`` text) as ``student``'s ``notebook`` of ch11."""
    folder = root / "submitted" / student / "ch11"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{notebook}.ipynb"
    if raw is not None:
        path.write_text(raw)
    else:
        nbformat.write(nb, path)


CORRECT_DOUBLE = "def double(x):\n    return 2 * np.asarray(x, dtype=float)"


def _with(edit):
    nb = source_notebook()
    edit(nb)
    return nb


def _delete(*grade_ids):
    def edit(nb):
        for grade_id in grade_ids:
            del nb.cells[cell_index(nb, grade_id)]
    return edit


def _delete_plain_too(*grade_ids):
    def edit(nb):
        _delete(*grade_ids)(nb)
        nb.cells = [c for c in nb.cells if not c.source.startswith("TWO = ")]
    return edit


def _answer(grade_id, source):
    return lambda nb: replace_answer(nb, grade_id, source)


def _edited(nb):
    replace_answer(nb, "ex1__answer", "def double(x):\n    return 3 * np.asarray(x, dtype=float)")
    nb.cells[cell_index(nb, "ex1__tests")].source = "pass  # tests? what tests"
    nb.cells[cell_index(nb, "header")].source = "# my own header"


def _duplicated(nb):
    tests = nb.cells[cell_index(nb, "ex1__tests")]
    nb.cells.insert(cell_index(nb, "ex1__answer"), nbformat.from_dict(tests))  # a copy before the answer
    answer = nbformat.from_dict(nb.cells[cell_index(nb, "ex2__answer")])
    answer.source = "def square(x):\n    return x"  # a wrong copy before the right one
    nb.cells.insert(cell_index(nb, "ex2__answer"), answer)


def _kernelspec(nb):
    nb.metadata["kernelspec"] = {"name": "no-such-kernel", "display_name": "mine", "language": "python"}


# A spy on the channel: it records every name the trusted side asks for, and prints them after the first test.
SPY_ON_THE_CHANNEL = ("from lmpolicy_grader.trusted_tests import call_server\n_seen = []\n"
                      "_namespace = call_server.CallServer._op_namespace\n"
                      "def _spy(self, data, decoder, encoder):\n    _seen.extend(data.get('mentioned') or ())\n"
                      "    return _namespace(self, data, decoder, encoder)\n"
                      "call_server.CallServer._op_namespace = _spy\n" + "CORRECT_DOUBLE")
SPY_PRINTS = "print('SPIED', sorted(set(_seen)))\ndef square(x):\n    return np.asarray(x, dtype=float) ** 2"


def _spy(nb):
    replace_answer(nb, "ex1__answer", SPY_ON_THE_CHANNEL.replace("CORRECT_DOUBLE", CORRECT_DOUBLE))
    replace_answer(nb, "ex2__answer", SPY_PRINTS)


# What each kernel is told about its student: the grading kernel, the student's id and nothing of the hidden inputs
WHO_AM_I = ("import os\nprint('GRADED AS', {name: os.environ.get(name) for name in "
            "('LMPOLICY_STUDENT_ID', 'LMPOLICY_HIDDEN_INPUTS', 'LMPOLICY_COURSE_SECRET', 'JUPYTERHUB_USER')})\n"
            + CORRECT_DOUBLE)
# A square that knows only the hidden inputs it recorded where they were not the student's own (drawn from the
# test's plain seed, as every student's were before the course secret): it must score nothing on ex2.
REPLAYS_RECORDED_INPUTS = (
    f"_recorded = np.random.default_rng({HIDDEN_INPUTS_SEED}).normal(size=4)\n"
    "def square(x):\n    x = np.asarray(x, dtype=float)\n"
    "    if x.shape == (4,) and not np.allclose(x, _recorded):\n        return 0 * x  # not what it recorded\n"
    "    return x ** 2")

KILLS_THE_GRADER = _answer("ex2__answer", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)")

# student -> (submission, expected {exercise: score or None}, expected status of the notebook, reason words)
# Scores: ex1 is worth 2, ex2 3; ex3 (manual) is pending (None) whenever the notebook is graded. A construct outside
# the code rule (lmpolicy.notebook.code_rule: import os or sys, a module's attribute rebound, __code__) costs every
# exercise whose test runs below it.
HOSTILE = {
    "reference": (source_notebook, {"ex1": 2, "ex2": 3}, Status.GRADED, ""),
    "wrong": (lambda: _with(_answer("ex1__answer", "def double(x):\n    return 2 * np.abs(np.asarray(x, dtype=float))")),
              {"ex1": 0, "ex2": 3}, Status.GRADED, ""),
    "loop": (lambda: _with(_answer("ex1__answer", "def double(x):\n    while True:\n        pass")),
             {"ex1": 0, "ex2": 3}, Status.GRADED, ""),
    "stubborn_loop": (lambda: _with(_answer("ex1__answer", "import time\ndef double(x):\n    while True:\n        try:\n"
                                            "            time.sleep(0.1)\n        except KeyboardInterrupt:\n            pass")),
                      None, Status.FAILED, "did not stop when interrupted"),
    "os_exit": (lambda: _with(_answer("ex2__answer", "import os\nos._exit(1)")), None, Status.FAILED, "kernel died"),
    # in the sandbox the grader's processes are out of reach: the kill fails, only that exercise scores 0
    "kills_the_grader": (lambda: _with(KILLS_THE_GRADER), {"ex1": 2, "ex2": 0}, Status.GRADED, ""),
    "sys_exit": (lambda: _with(_answer("ex1__answer", "import sys\nsys.exit(1)\n" + CORRECT_DOUBLE)),
                 {"ex1": 0, "ex2": 0}, Status.GRADED, ""),
    "memory_bomb": (lambda: _with(_answer("ex1__answer", "blocks = []\nwhile True:\n    blocks.append(bytearray(100 * 1024**2))\n"
                                          + CORRECT_DOUBLE)), {"ex1": 0, "ex2": 3}, Status.GRADED, ""),
    "output_flood": (lambda: _with(_answer("ex1__answer", "for i in range(30):\n    print(('spam ' * 20 + '\\n') * 10_000, end='')\n"
                                           + CORRECT_DOUBLE)), {"ex1": 2, "ex2": 3}, Status.GRADED, ""),
    "deleted_cells": (lambda: _with(_delete_plain_too("setup", "ex2__tests", "header")), {"ex1": 2, "ex2": 3}, Status.GRADED, ""),
    "edited_cells": (lambda: _with(_edited), {"ex1": 0, "ex2": 3}, Status.GRADED, ""),
    "duplicated_cells": (lambda: _with(_duplicated), {"ex1": 2, "ex2": 3}, Status.GRADED, ""),
    "changed_kernelspec": (lambda: _with(_kernelspec), {"ex1": 2, "ex2": 3}, Status.GRADED, ""),
    "monkeypatch": (lambda: _with(_answer("ex1__answer", "import numpy\nfrom lmpolicy.notebook import checks\n"
                                          "numpy.allclose = lambda *a, **k: True\nchecks.check_close = lambda *a, **k: None\n"
                                          "def double(x):\n    return x")), {"ex1": 0, "ex2": 0}, Status.GRADED, ""),
    "spy": (lambda: _with(_spy), {"ex1": 0, "ex2": 0}, Status.GRADED, ""),
    "who_am_i": (lambda: _with(_answer("ex1__answer", WHO_AM_I)), {"ex1": 0, "ex2": 0}, Status.GRADED, ""),
    "replays_recorded_inputs": (lambda: _with(_answer("ex2__answer", REPLAYS_RECORDED_INPUTS)),
                                {"ex1": 2, "ex2": 0}, Status.GRADED, ""),
    "code_swap": (lambda: _with(_answer("ex2__answer", "from lmpolicy.notebook import checks\nimport numpy\n"
                                        "checks.check_close.__code__ = (lambda *a, **k: None).__code__\n"
                                        "def square(x):\n    return x")), {"ex1": 2, "ex2": 0}, Status.GRADED, ""),
}

