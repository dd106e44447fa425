"""The grader's code rule (``lmpolicy.notebook.code_rule``), met before hand-in: a construct outside it costs every exercise
checked below it at grading, so Validate lists each one (cell, line, code, what to do) and a check cell run in the
student's own kernel adds one ✗ line naming the first cell it ran that is outside. Honest notebooks hear nothing."""
import io
import re

import nbformat
import pytest

from lmpolicy.notebook import code_rule
from lmpolicy.notebook.validator import CODE_RULE, VerdictValidator

from .notebook_tools import RELEASE_DIR, SOURCE_DIR, client, grade_id, kernel_env, visible_only

ANSI = re.compile(r"\x1b\[[0-9;]*m")
IMPORT_OS = ("cell 10 (your answer to Exercise 01.softmax), line 1: `import os` is outside the plain Python the "
             "grader can check: every exercise below it would get no credit; delete it: no exercise needs files, "
             "paths or the interpreter")
MATPLOTLIB = ("cell 11 (below Exercise 01.softmax), line 1: `%matplotlib inline` is not plain Python the grader can "
              "check: every exercise below it would get no credit; delete the line (plots show without it)")


def _by_id(nb, wanted: str):
    return next(cell for cell in nb.cells if grade_id(cell) == wanted)


def habits_notebook(folder):
    """Release notebook 01 as a student with two honest habits saves it: `import os` atop the softmax answer and a
    free cell `%matplotlib inline` below it, above the check (answered with the reference)."""
    nb = nbformat.read(RELEASE_DIR / "01_policy_softmax.ipynb", as_version=4)
    source = nbformat.read(SOURCE_DIR / "01_policy_softmax.ipynb", as_version=4)
    answer = _by_id(nb, "nb01_softmax__answer")
    answer.source = "import os\n" + _by_id(source, "nb01_softmax__answer").source
    nb.cells.insert(nb.cells.index(answer) + 1, nbformat.v4.new_code_cell("%matplotlib inline"))
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / "01_policy_softmax.ipynb")
    return folder / "01_policy_softmax.ipynb"


@pytest.mark.slow
def test_validate_lists_each_construct_outside_the_rule_with_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setenv("LMPOLICY_PROGRESS_FILE", str(tmp_path / "progress.json"))
    path = habits_notebook(tmp_path / "ch11")
    validator = VerdictValidator()
    validator.stream = io.StringIO()
    validator.validate_and_print(str(path))
    printed = " ".join(ANSI.sub("", validator.stream.getvalue()).split())
    assert f"{CODE_RULE}: \u2717 {IMPORT_OS} {'=' * 90} {CODE_RULE}: \u2717 {MATPLOTLIB}" in printed, printed
    results = VerdictValidator().validate(str(path))
    assert [entry["raw_error"] for entry in results["failed"][:2]] == [f"\u2717 {IMPORT_OS}", f"\u2717 {MATPLOTLIB}"]
    # the softmax check itself passes (the answer is right): only the code rule and the stubs below fail
    assert "Exercise 01.softmax" not in " ".join(entry["source"] for entry in results["failed"][2:])


@pytest.mark.parametrize("folder", [SOURCE_DIR, RELEASE_DIR], ids=["source", "release"])
def test_no_course_notebook_has_anything_outside_the_rule(folder):
    """No false positives: every reference solution and every notebook as released is plain to the rule."""
    found = {path.stem: [o.student_line() for o in code_rule.notebook_outside(nbformat.read(path, as_version=4))]
             for path in sorted(folder.glob("*.ipynb"))}
    assert found and {name: lines for name, lines in found.items() if lines} == {}


# --- a check cell in the student's own kernel ------------------------------------------------------------------

def _check_outputs(extra: list[str], tmp_path) -> str:
    """Notebook 01's set-up, the ``extra`` cells, the reference softmax and the softmax check as the student has
    it, run in a kernel as JupyterLab runs them: what the check cell printed."""
    source = nbformat.read(SOURCE_DIR / "01_policy_softmax.ipynb", as_version=4)
    cells = [_by_id(source, "nb01_softmax__setup"), *map(nbformat.v4.new_code_cell, extra),
             _by_id(source, "nb01_softmax__answer"), visible_only(_by_id(source, "nb01_softmax__tests"))]
    nb = nbformat.v4.new_notebook(cells=[nbformat.from_dict(cell) for cell in cells])
    running = client(nb)
    running.allow_errors = True  # a scratch cell that does not parse is the student's to fix, later
    with running.setup_kernel(env=kernel_env(grader=False, progress_file=tmp_path / "progress.json")):
        for index, cell in enumerate(nb.cells):
            running.execute_cell(cell, index)
    check = nb.cells[-1]
    assert not [out for out in check.outputs if out.output_type == "error"], check.outputs
    return ANSI.sub("", "".join(out.get("text", "") for out in check.outputs if out.output_type == "stream"))


@pytest.mark.slow
def test_a_check_after_a_cell_outside_the_rule_says_which_and_that_grading_gives_no_credit(tmp_path):
    printed = _check_outputs(["%matplotlib inline", "import os\nprint(os.getcwd() != '')", "print(1"], tmp_path)
    said = " ".join(printed.split())
    assert "\u2713 Exercise 01.softmax passed the visible checks" in said, printed
    assert ("\u2717 When graded: In [2], line 1: `%matplotlib inline` is not plain Python the grader can check: every "
            "exercise below it would get no credit; delete the line (plots show without it) (2 more cells too; "
            "Validate lists what the saved notebook holds)") in said, printed
    assert len([line for line in printed.splitlines() if line.startswith("\u2717")]) == 1, printed


@pytest.mark.slow
def test_a_check_after_honest_cells_says_nothing_of_the_rule(tmp_path):
    printed = _check_outputs(["import matplotlib.pyplot as plt\nfrom functools import partial\n"
                              "xs = [math.exp(x) for x in range(3)]\nprint(sum(xs))"], tmp_path)
    assert "\u2713 Exercise 01.softmax passed the visible checks" in printed and "\u2717" not in printed, printed
