"""An answer written under the name an older copy of its notebook gives it (name_advice.RENAMED): the check that
misses the current name says both names and what to do, in the student's kernel, in Validate and in the feedback."""
import os
import re

import nbformat
import pytest

from lmpolicy.notebook import name_advice, progress, validator
from tests.lmpolicy.notebook.test_checks import Kernel
from tests.verdicts import one_line

ANSI = re.compile(r"\x1b\[[0-9;]*m")
OLD, NEW = "temperature_095", "temperature_at_target"
ANSWER = "ex11_2b__answer"
OLD_ANSWER = f"{OLD} = 0.2\n"
CHECK = "ex11_2b__tests"
SAYS = (f"this exercise's answer is named {NEW}; your cell names it {OLD}, as older copies of this notebook do: "
        f"rename it {NEW}")


def with_old_answer(path) -> nbformat.NotebookNode:
    """Release notebook 02 with Exercise 11.2(b)'s answer written under the older name."""
    notebook = nbformat.read(progress.release_dir() / "02_temperature.ipynb", as_version=4)
    answer = next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == ANSWER)
    answer.source = OLD_ANSWER
    nbformat.write(notebook, path)
    return notebook


def test_the_renamed_answer_is_the_one_in_the_released_notebook():
    notebook = nbformat.read(progress.release_dir() / "02_temperature.ipynb", as_version=4)
    answer = next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == ANSWER)
    assert answer.source.startswith(f"{NEW} = None"), answer.source
    assert name_advice.RENAMED[OLD] == NEW
    assert OLD not in "".join(c.source for c in notebook.cells)


def test_the_check_in_the_students_kernel_names_the_new_name_and_the_old(tmp_path):
    notebook = tmp_path / "02_temperature.ipynb"
    check = next(c for c in with_old_answer(notebook).cells if c.metadata.get("nbgrader", {}).get("grade_id") == CHECK)
    env = dict(os.environ, LMPOLICY_PROGRESS_FILE=str(tmp_path / "progress.json"), JPY_SESSION_NAME=str(notebook))
    env.pop("NBGRADER_EXECUTION", None)
    kernel = Kernel(env)
    try:
        kernel.run("from lmpolicy.notebook import checks")
        kernel.run(OLD_ANSWER)
        _, error = kernel.run(check.source, cell_id=check.id)
    finally:
        kernel.close()
    assert error["ename"] == "NameError", error
    shown = one_line(ANSI.sub("", "\n".join(error["traceback"])))
    assert shown == f"\u2717 Not defined yet: {SAYS}.", shown


def test_validate_and_the_grader_say_the_same(tmp_path):
    from lmpolicy_grader.trusted_tests import in_kernel, no_credit

    notebook = with_old_answer(tmp_path / "02_temperature.ipynb")
    check = next(i for i, c in enumerate(notebook.cells)
                 if c.metadata.get("nbgrader", {}).get("grade_id") == CHECK)
    assert validator._undefined_name_advice(NEW, notebook, check) == SAYS
    sources = [c.source for c in notebook.cells[:check] if c.cell_type == "code"]
    try:
        no_credit.SOURCES[:] = sources
        assert in_kernel._missing_from_submission(NEW, {}) == SAYS
    finally:
        no_credit.SOURCES.clear()


@pytest.mark.parametrize("name", [OLD])
def test_the_old_name_read_anywhere_gets_the_new_one(name):
    assert name_advice.renamed_advice(name, set()) == f"{OLD} is named {NEW} in this notebook's checks: use {NEW}"
